"""The guarantees of docs/guarantees.md as pure functions over a recorded history.

Each rule takes the history's events and returns a RuleResult: how many calls (or
grants, tasks, streams ...) it checked and the violations it found, each naming the
events that show it. ``check`` runs them all.

Every rule is sound under indeterminate outcomes: only acknowledged replies are facts,
a call that failed UNAVAILABLE / DEADLINE_EXCEEDED / CANCELLED / INTERNAL / on the
client's side "maybe happened" (history.Event.indeterminate), and intervals built from
a history are the parts of a holding the client can be SURE of:

- a grant (or refresh) acknowledged at [invoke, complete] with TTL t holds from
  ``complete`` (the reply proves it) to ``invoke + t`` (the server set the expiry no
  earlier than the request was sent), or to ``expires_at`` - CLOCK_MARGIN when only the
  server's Redis-clock expiry is known (Hold streams, Consume leases), cut at the first
  release attempt whatever its outcome;
- "A before B" means A completed before B was invoked, on one monotonic clock.

So two such intervals that overlap, or a token that does not grow from one grant to a
later one, are violations whatever the indeterminate calls did.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .history import DEFINITE_REASONS, Event

BLOCKED_SLACK = 0.5  # a blocked call answers within its wait timeout plus this
CLOCK_MARGIN = 0.1  # Redis-clock timestamps converted to the client's monotonic clock
EPS = 1e-6
MAX_REPORTED = 25  # violations listed per rule (all are counted)

NOT_HELD = {"LOCK_NOT_HELD", "PERMIT_NOT_HELD", "NOT_LEADER"}
BLOCKING_OPS = {"lock.acquire", "sem.acquire", "queue.dequeue", "lock.hold", "sem.hold", "ratelimit.wait"}
RATE_OPS = ("ratelimit.check", "ratelimit.wait")  # both take units (Wait once allowed)
# Calls a retrying client library repeats on UNAVAILABLE (concord._retry): one recorded
# call may then be several RPCs. A repeat after an attempt that took effect answers
# "not held" (release, ack, nack), and a call can use up its budget on retries and end
# DEADLINE_EXCEEDED without any attempt hanging. Stream messages are never repeated.
RETRIED_OPS = {"lock.acquire", "lock.refresh", "lock.release", "lock.describe", "sem.acquire", "sem.refresh",
               "sem.release", "queue.dequeue", "queue.ack", "queue.nack", "queue.stats", "queue.final_dead",
               "queue.final_stats", "chat.ack", "chat.history", "ac.suggest_recent", "ac.suggest", "ac.count"}


def client_retries(events: Sequence[Event]) -> bool:
    """Whether the history's client library retries calls (a harness.client note says)."""
    return any(e.op == "harness.client" and e.args.get("retries") for e in events)


def _retried(e: Event, retries: bool) -> bool:
    """The call may have been repeated by the client library (not a stream's message,
    nor a call the harness made without the library's retries: via "once")."""
    return retries and e.op in RETRIED_OPS and e.args.get("via") not in ("stream", "once")


@dataclass
class Violation:
    rule: str
    message: str
    events: list[int] = field(default_factory=list)

    def render(self, index: dict[int, Event] | None = None, faults: Sequence[Event] = ()) -> str:
        lines = [f"[{self.rule}] {self.message}"]
        shown = [index[i] for i in self.events if index and i in index]
        lines += [f"    {e.brief()}" for e in shown]
        if shown and faults:
            lo = min(e.invoke for e in shown) - 1.0
            hi = max(e.complete if e.complete is not None else e.invoke for e in shown) + 1.0
            near = [f for f in faults if f.invoke <= hi and (f.complete or f.invoke) >= lo]
            lines += [f"    (fault) {f.brief()}" for f in near]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "events": self.events}


@dataclass
class RuleResult:
    rule: str
    checked: int
    violations: list[Violation]

    @property
    def ok(self) -> bool:
        return not self.violations


class _Found:
    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.violations: list[Violation] = []

    def add(self, message: str, *events: Event | None) -> None:
        self.violations.append(Violation(self.rule, message, [e.id for e in events if e is not None]))

    def result(self, checked: int) -> RuleResult:
        return RuleResult(self.rule, checked, self.violations)


def _children(events: Iterable[Event]) -> dict[int, list[Event]]:
    kids: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        if e.parent is not None:
            kids[e.parent].append(e)
    for v in kids.values():
        v.sort(key=lambda e: (e.invoke, e.id))
    return kids


def _union(segments: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for s, e in sorted(seg for seg in segments if seg[1] > seg[0] + EPS):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


# ---------------------------------------------------------------- every service


def no_internal_or_unknown(events: Sequence[Event]) -> RuleResult:
    """No call ever ends INTERNAL or UNKNOWN (Redis trouble is UNAVAILABLE). Left out:
    transport_errors(), which the client's gRPC library made up (no ErrorInfo: no
    Concord server sent them)."""
    found = _Found("no_internal_or_unknown")
    excused = {e.id for e in transport_errors(events)}
    calls = 0
    for e in events:
        if e.outcome in ("ok", "fail"):
            calls += 1
            if e.outcome == "fail" and e.code in ("INTERNAL", "UNKNOWN") and e.id not in excused:
                found.add(f"{e.op} ended {e.code} (reason {e.reason}): {e.message[:200]!r}", e)
    return found.result(calls)


GRPC_CORE_INTERNAL = "Internal error from Core"  # grpc.aio's client side (call.pyx.pxi set_internal_error)
BIDI_OPS = {"queue.consume"}


def transport_errors(events: Sequence[Event]) -> list[Event]:
    """Calls that ended INTERNAL or UNKNOWN without an ErrorInfo, so with no status a
    Concord servicer sent (those always carry one), where the client's own gRPC library
    made it up:

    - while the call's server process was being SIGKILLed and restarted (its
      connection died under the call);
    - grpc.aio's "Internal error from Core" on a bidirectional stream (Consume, and
      acks written on it): when a server ends such a call while the client is still
      writing, the client may read this instead of the server's status.

    Reported in the summary, not as violations."""
    restarts = _restarting(events)
    out = []
    for e in events:
        if not (e.failed and e.code in ("INTERNAL", "UNKNOWN") and not e.reason):
            continue
        bidi = e.op in BIDI_OPS or e.args.get("via") == "stream"
        if _during_restart(restarts, e, e.end) or (bidi and e.message == GRPC_CORE_INTERNAL):
            out.append(e)
    return out


def _lag_within(lags: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Seconds the harness's own event loop was stalled within [lo, hi]."""
    return sum(min(hi, end) - max(lo, start) for start, end in lags if end > lo and start < hi)


RESTART_MARGIN = 0.5


def _restarting(events: Sequence[Event]) -> dict[int, list[tuple[float, float]]]:
    """Per server index: the windows from its kill to RESTART_MARGIN after it served
    again. A call to a server in such a window waits on the client's reconnect, not on
    the server: the timing rules leave it out."""
    out: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for f in events:
        if f.op == "fault" and f.args.get("kind") == "server_kill":
            out[f.args["target"]].append((f.invoke, f.end + RESTART_MARGIN))
    return out


def _during_restart(windows: dict[int, list[tuple[float, float]]], e: Event, until: float) -> bool:
    return any(lo < until and e.invoke < hi for lo, hi in windows.get(e.server, ()))


def _cpu_starved(events: Sequence[Event]) -> list[tuple[float, float]]:
    """When busy-loop processes competed for the CPU: each cpu_pressure fault (and
    RESTART_MARGIN after), or the whole run when the campaign ran them throughout (a
    harness.cpu_hogs note)."""
    if any(e.op == "harness.cpu_hogs" for e in events):
        return [(float("-inf"), float("inf"))]
    return [(f.invoke, f.end + RESTART_MARGIN) for f in events
            if f.op == "fault" and f.args.get("kind") == "cpu_pressure"]


def blocked_calls_answer_in_time(events: Sequence[Event]) -> RuleResult:
    """A blocked call (wait_timeout > 0: Acquire, Hold, Dequeue) answers within its wait
    timeout + BLOCKED_SLACK, whatever Redis does meanwhile. The harness's own event-loop
    stalls during the call (recorded as harness.lag notes) are added to the allowance,
    and calls to a server being killed and restarted are left out, so a late answer is
    the server's; so are calls while other processes starved the machine of CPU
    (_cpu_starved: a wall-clock bound is not the server's to keep then)."""
    found = _Found("blocked_calls_answer_in_time")
    kids = _children(events)
    lags = [(e.invoke - e.args["lag"], e.invoke) for e in events if e.op == "harness.lag"]
    restarts = _restarting(events)
    starved = _cpu_starved(events)
    checked = 0
    for e in events:
        wait = e.args.get("wait") or 0
        if e.op not in BLOCKING_OPS or wait <= 0 or e.outcome in ("note", "pending"):
            continue
        answered = e.complete
        firsts = [k.invoke for k in kids.get(e.id, []) if k.op == e.op + ".event"]
        if firsts:
            answered = min(firsts)
        elif e.code == "CLIENT_CANCELLED":
            continue  # the harness stopped it before any answer: nothing to time
        if answered is None or _during_restart(restarts, e, answered):
            continue
        if any(lo < answered and e.invoke < hi for lo, hi in starved):
            continue
        checked += 1
        took = answered - e.invoke
        allowed = wait + BLOCKED_SLACK + _lag_within(lags, e.invoke, answered)
        if took > allowed + EPS:
            what = f"{e.code}" if e.failed and answered == e.complete else "answer"
            found.add(f"{e.op} with wait_timeout {wait:g}s answered ({what}) after {took:.2f}s "
                      f"(allowed {allowed:.2f}s)", e)
    return found.result(checked)


DEADLINE_LAG_ALLOWANCE = 1.0  # harness stalls beyond this excuse a missed deadline


def calls_answered_by_deadline(events: Sequence[Event]) -> RuleResult:
    """No call runs into its deadline unanswered. Every call's deadline is its wait
    timeout + the client's timeout (8 s), past the server's Redis reply timeout (5 s):
    a command lost with its connection fails UNAVAILABLE within that, so a call (or a
    Consume stream's ack/nack) still unanswered at its deadline hung in the server.
    Calls during which the harness itself stalled more than a second are not counted,
    nor calls a retrying client library may have repeated (RETRIED_OPS)."""
    found = _Found("calls_answered_by_deadline")
    lags = [(e.invoke - e.args["lag"], e.invoke) for e in events if e.op == "harness.lag"]
    restarts = _restarting(events)
    retries = client_retries(events)
    checked = 0
    for e in events:
        if e.outcome not in ("ok", "fail") or e.op == "fault" or _during_restart(restarts, e, e.end):
            continue
        if _retried(e, retries):
            continue  # its last try may have had only the end of the budget left
        checked += 1
        hung = e.code == "CLIENT_TIMEOUT" or (e.code == "DEADLINE_EXCEEDED" and e.reason not in DEFINITE_REASONS)
        if hung and _lag_within(lags, e.invoke, e.complete) <= DEADLINE_LAG_ALLOWANCE:
            found.add(f"{e.op} unanswered after {e.complete - e.invoke:.2f}s ({e.code}: {e.message[:100]!r})", e)
    return found.result(checked)


# ---------------------------------------------------------------- locks and semaphores


@dataclass
class Grant:
    kind: str  # lock | sem | election | rw
    name: str
    lease: str  # lease (locks) or permit id (semaphores)
    invoke: float  # the acquire (or Hold stream) was sent
    start: float  # the grant was received
    event: Event  # the acquire call or the Hold's ACQUIRED note
    token: int | None = None
    permits: int = 1
    limit: int = 0
    segments: list[tuple[float, float]] = field(default_factory=list)  # sure to be held
    related: list[Event] = field(default_factory=list)


def grants(events: Sequence[Event], kind: str) -> list[Grant]:
    """Every acknowledged grant of locks (kind "lock") or semaphores ("sem") with the
    intervals it was surely held."""
    kids = _children(events)
    ops_by_lease: dict[tuple[str, str], list[Event]] = defaultdict(list)
    key = "permit_id" if kind == "sem" else "lease"
    for e in events:
        if e.op in (f"{kind}.refresh", f"{kind}.release"):
            ops_by_lease[e.args["name"], e.args[key]].append(e)
    out: list[Grant] = []
    for e in events:
        if e.op == f"{kind}.acquire" and e.ok and e.result and e.result.get("acquired"):
            r = e.result
            g = Grant(kind, e.args["name"], r[key], e.invoke, e.complete, e, r.get("token"),
                      e.args.get("permits", 1), e.args.get("limit", 0))
            ops = sorted(ops_by_lease.get((g.name, g.lease), []), key=lambda o: o.invoke)
            released = min((o.invoke for o in ops if o.op.endswith(".release")), default=float("inf"))
            segs = [(e.complete, e.invoke + e.args["ttl"])]
            segs += [(o.complete, o.invoke + o.args["ttl"]) for o in ops if o.op.endswith(".refresh") and o.ok]
            g.segments = _union((s, min(t, released)) for s, t in segs)
            g.related = ops
            out.append(g)
        elif e.op == f"{kind}.hold":
            notes = [k for k in kids.get(e.id, []) if k.op == f"{kind}.hold.event"]
            acquired = next((n for n in notes if n.args["kind"] == "acquired"), None)
            if acquired is None:
                continue
            stops = [e.end] + [n.invoke for n in notes if n.args["kind"] == "lost"]
            stops += [k.invoke for k in kids.get(e.id, []) if k.op == f"{kind}.hold.close"]
            released = min(stops)
            g = Grant(kind, e.args["name"], acquired.args[key], e.invoke, acquired.invoke, acquired,
                      acquired.args.get("token"), e.args.get("permits", 1), e.args.get("limit", 0))
            segs = [(n.invoke, n.args["expires"] - CLOCK_MARGIN) for n in notes
                    if n.args["kind"] in ("acquired", "refreshed") and n.args.get("expires") is not None]
            g.segments = _union((s, min(t, released)) for s, t in segs)
            g.related = [e] + kids.get(e.id, [])
            out.append(g)
    return out


def lock_mutual_exclusion(events: Sequence[Event]) -> RuleResult:
    """At most one holder of a lock at a time: the sure-held intervals of two grants of
    one lock never overlap."""
    return _exclusive(events, "lock", "lock_mutual_exclusion")


def election_one_leader(events: Sequence[Event]) -> RuleResult:
    """At most one leader of an election at a time (its terms as a lock's grants)."""
    return _exclusive(events, "election", "election_one_leader")


def _exclusive(events: Sequence[Event], kind: str, rule: str) -> RuleResult:
    found = _Found(rule)
    gs = grants(events, kind)
    by_name: dict[str, list[tuple[float, float, Grant]]] = defaultdict(list)
    for g in gs:
        by_name[g.name] += [(s, t, g) for s, t in g.segments]
    for name, intervals in by_name.items():
        intervals.sort(key=lambda x: x[0])
        active: list[tuple[float, float, Grant]] = []
        reported: set[tuple[int, int]] = set()
        for s, t, g in intervals:
            active = [a for a in active if a[1] > s + EPS]
            for s2, t2, g2 in active:
                pair = (g2.event.id, g.event.id)
                if g2 is not g and pair not in reported:
                    reported.add(pair)
                    found.add(f"{kind} {name!r}: holders with fencing tokens {g2.token} and {g.token} both held it "
                              f"for {min(t, t2) - s:.3f}s from t={s:.3f}", g2.event, g.event)
            active.append((s, t, g))
    return found.result(len(gs))


def lock_fencing_tokens_increase(events: Sequence[Event]) -> RuleResult:
    """Fencing tokens are unique per lock and increase in grant order: a grant received
    before another was asked for has the smaller token."""
    return _increasing(events, "lock", "lock_fencing_tokens_increase")


def election_terms_increase(events: Sequence[Event]) -> RuleResult:
    """Terms are unique per election and increase from leader to leader, as fencing tokens do."""
    return _increasing(events, "election", "election_terms_increase")


def _increasing(events: Sequence[Event], kind: str, rule: str) -> RuleResult:
    found = _Found(rule)
    gs = [g for g in grants(events, kind) if g.token is not None]
    by_name: dict[str, list[Grant]] = defaultdict(list)
    for g in gs:
        by_name[g.name].append(g)
    for name, mine in by_name.items():
        seen: dict[int, Grant] = {}
        for g in mine:
            if g.token in seen:
                found.add(f"{kind} {name!r}: fencing token {g.token} granted twice", seen[g.token].event, g.event)
            seen[g.token] = g
        by_start = sorted(mine, key=lambda g: g.start)
        starts = [g.start for g in by_start]
        best: list[Grant] = []  # best[i]: the largest token among by_start[:i+1]
        for g in by_start:
            best.append(g if not best or g.token > best[-1].token else best[-1])
        for g in mine:
            i = bisect.bisect_left(starts, g.invoke) - 1  # grants received before g was asked for
            if i >= 0 and best[i].token >= g.token and best[i] is not g:
                found.add(f"{kind} {name!r}: token {g.token} granted after token {best[i].token} was received",
                          best[i].event, g.event)
    return found.result(len(gs))


def leases_not_lost_early(events: Sequence[Event]) -> RuleResult:
    """A holder that acquired or refreshed in time is never told LOCK_NOT_HELD /
    PERMIT_NOT_HELD by an answer that arrives before its TTL (counted from the
    acknowledged call's invocation) could have run out, unless it asked to release.
    With a retrying client a Release's "not held" may follow its own first try: only
    Refresh answers are checked then."""
    found = _Found("leases_not_lost_early")
    retries = client_retries(events)
    checked = 0
    for kind in ("lock", "sem", "election", "rw"):
        for g in grants(events, kind):
            if g.event.op != f"{kind}.acquire":
                continue  # Hold streams renew on the server's side: LOST may come early, safely
            acked = [(g.event.complete, g.event.invoke + g.event.args["ttl"], g.event)]
            released = float("inf")
            for o in g.related:  # in invocation order
                checked += 1
                # A repeated release answers "not held" after its first try released.
                repeatable = retries and o.op.endswith(".release")
                if o.failed and o.reason in NOT_HELD and o.invoke < released and not repeatable:
                    valid = [(until, x) for done, until, x in acked if done <= o.invoke]
                    if valid:
                        until, x = max(valid, key=lambda v: v[0])
                        if o.complete < until - EPS:
                            found.add(f"{kind} {g.name!r}: {o.op} answered {o.reason} at t={o.complete:.3f}, "
                                      f"{until - o.complete:.3f}s before the TTL of an acknowledged "
                                      f"{x.op} ran out", x, o)
                if o.op.endswith(".release"):
                    released = min(released, o.invoke)
                elif o.ok:
                    acked.append((o.complete, o.invoke + o.args["ttl"], o))
    return found.result(checked)


def rwlock_writers_exclusive(events: Sequence[Event]) -> RuleResult:
    """A writer holds a read-write lock alone: its sure-held intervals never overlap
    another grant's of the same name (readers' may overlap each other)."""
    found = _Found("rwlock_writers_exclusive")
    gs = grants(events, "rw")
    by_name: dict[str, list[tuple[float, float, Grant]]] = defaultdict(list)
    for g in gs:
        by_name[g.name] += [(s, t, g) for s, t in g.segments]
    for name, intervals in by_name.items():
        intervals.sort(key=lambda x: x[0])
        active: list[tuple[float, float, Grant]] = []
        reported: set[tuple[int, int]] = set()
        for s, t, g in intervals:
            active = [a for a in active if a[1] > s + EPS]
            for _, t2, g2 in active:
                writer = "write" in (g.event.args.get("mode"), g2.event.args.get("mode"))
                if g2 is not g and writer and (g2.event.id, g.event.id) not in reported:
                    reported.add((g2.event.id, g.event.id))
                    found.add(f"rw {name!r}: a {g2.event.args.get('mode')} hold (token {g2.token}) and a "
                              f"{g.event.args.get('mode')} hold (token {g.token}) overlapped for "
                              f"{min(t, t2) - s:.3f}s from t={s:.3f}", g2.event, g.event)
            active.append((s, t, g))
    return found.result(len(gs))


def rwlock_tokens_increase(events: Sequence[Event]) -> RuleResult:
    """Read-write lock fencing tokens are unique per name and increase in grant order, readers' too."""
    return _increasing(events, "rw", "rwlock_tokens_increase")


def election_observers_agree(events: Sequence[Event]) -> RuleResult:
    """Every observer of an election sees the same changes in the same order, none
    missed: each observer's positions follow one another (but where it was told of a
    gap), two observers never see different terms at one position, and the leaders'
    terms never go down along the positions."""
    found = _Found("election_observers_agree")
    seen: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.op == "election.observe.change":
            seen[e.process, e.args["name"]].append(e)
    at: dict[tuple[str, int], Event] = {}
    for (proc, name), changes in seen.items():
        for prev, cur in zip(changes, changes[1:]):
            if cur.args["position"] != prev.args["position"] + 1 and not cur.args["gap"]:
                found.add(f"observer {proc} of {name!r}: position {cur.args['position']} came after "
                          f"{prev.args['position']} with no gap", prev, cur)
        for c in changes:
            other = at.setdefault((name, c.args["position"]), c)
            if other.args["term"] != c.args["term"] and not (c.args["gap"] or other.args["gap"]):
                found.add(f"election {name!r}: position {c.args['position']} is term {other.args['term']} to "
                          f"{other.process} and term {c.args['term']} to {c.process}", other, c)
    for name in {n for _, n in seen}:
        ordered = sorted(((p, e) for (n, p), e in at.items() if n == name), key=lambda x: x[0])
        terms = [(p, e) for p, e in ordered if e.args["term"]]
        for (p1, e1), (p2, e2) in zip(terms, terms[1:]):
            if e2.args["term"] < e1.args["term"] and not e2.args["gap"]:
                found.add(f"election {name!r}: term {e2.args['term']} at position {p2} after term "
                          f"{e1.args['term']} at position {p1}", e1, e2)
    return found.result(sum(len(v) for v in seen.values()))


def semaphore_within_limit(events: Sequence[Event]) -> RuleResult:
    """At no instant do the surely-held permits of a semaphore exceed its limit."""
    found = _Found("semaphore_within_limit")
    gs = grants(events, "sem")
    by_name: dict[str, list[Grant]] = defaultdict(list)
    for g in gs:
        by_name[g.name].append(g)
    for name, mine in by_name.items():
        limit = max(g.limit for g in mine)
        points = []
        for g in mine:
            for s, t in g.segments:
                points += [(s, 1, g), (t, 0, g)]  # at one instant, ends before starts
        points.sort(key=lambda p: (p[0], p[1]))
        active: dict[int, Grant] = {}
        reported = 0
        for t, is_start, g in points:
            if not is_start:
                active.pop(id(g), None)
                continue
            active[id(g)] = g
            level = sum(a.permits for a in active.values())
            if level > limit and reported < MAX_REPORTED:
                reported += 1
                found.add(f"semaphore {name!r}: {level} permits held at t={t:.3f}, limit {limit}",
                          *(a.event for a in active.values()))
    return found.result(len(gs))


# ---------------------------------------------------------------- queues


@dataclass
class Delivery:
    queue: str
    task_id: str
    lease: str
    attempt: int
    payload: str
    max_attempts: int
    lower: float  # the lease was certainly taken after this (Dequeue sent / stream opened)
    start: float  # held from: received, or when the server's event log says it leased it if earlier
    end: float  # surely held until
    event: Event
    expires: float = float("inf")  # the reported expiry (less the clock margin)
    given_up: float = float("inf")  # the holder ended its stream (close, crash, cancel)


TaskKey = tuple[str, str]  # (queue, task id): task ids are per queue


def _enqueued(events: Sequence[Event]) -> tuple[dict[TaskKey, tuple[str, int, Event]], dict[str, list[Event]]]:
    """((queue, acknowledged task id) -> (payload, max_attempts, enqueue), payload -> every enqueue that sent it)."""
    acked: dict[TaskKey, tuple[str, int, Event]] = {}
    sent: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.op != "queue.enqueue":
            continue
        for t in e.args["tasks"]:
            sent[t["payload"]].append(e)
        if e.ok:
            for t, task_id in zip(e.args["tasks"], e.result["task_ids"]):
                acked[e.args["queue"], task_id] = (t["payload"], t["max_attempts"], e)
    return acked, sent


def _lease_log(events: Sequence[Event]) -> dict[TaskKey, dict[int, list[float]]]:
    """(queue, task id) -> attempt -> when the server leased it (queue.event.leased
    notes: the queue's event log, on this history's clock)."""
    out: dict[TaskKey, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        if e.op == "queue.event.leased" and e.args.get("when") is not None:
            out[e.args["queue"], e.args["task_id"]][e.args["attempt"]].append(e.args["when"])
    return out


HOLDER_ENDS = {"CLIENT_CANCELLED", "CLIENT_TIMEOUT", "CLIENT_ERROR"}  # a stream the harness itself ended


def deliveries(events: Sequence[Event]) -> list[Delivery]:
    """Every lease a client received, with the part of it the client can be sure of:
    from its receipt to the expiry the server reported (Dequeue: also no later than
    invoke + lease_ttl), cut at the holder's first settle or release that took effect or
    may have (one answered TASK_LEASE_NOT_HELD found the lease gone), and for a
    Consume stream at the holder's own end of it (a graceful close, a crash, the
    harness cancelling it). A stream the *server* ends or that breaks does not cut it:
    the consumer cannot know until it reads the end, and may still be working on the
    task and settle it by its lease (docs/guarantees.md, api/consume.py)."""
    kids = _children(events)
    index = {e.id: e for e in events}
    retries = client_retries(events)
    leased = _lease_log(events)

    def held_from(t: dict[str, Any], lower: float, received: float) -> float:
        """When the server leased it, by its event log (a consumer may read a task
        long after the server leased it to its stream), else the receipt."""
        when = [w for w in leased.get((t["queue"], t["task_id"]), {}).get(t["attempt"], [])
                if lower - CLOCK_MARGIN <= w <= received + CLOCK_MARGIN]
        return min(received, max(when) + CLOCK_MARGIN) if when else received

    settles: dict[tuple[str, str, str], float] = {}
    for e in events:
        # A settle that did not take effect (TASK_LEASE_NOT_HELD: the lease was gone
        # already) ends nothing; one that did or may have ends the lease when sent.
        if e.op in ("queue.ack", "queue.nack", "queue.release") and (e.maybe or _retried(e, retries)):
            k = (e.args["queue"], e.args["task_id"], e.args["lease"])
            settles[k] = min(settles.get(k, float("inf")), e.invoke)
    out = []
    for e in events:
        if e.op == "queue.dequeue" and e.ok:
            for t in e.result["tasks"]:
                expires = e.invoke + e.args["lease_ttl"]
                if t.get("lease_expires") is not None:
                    expires = min(expires, t["lease_expires"] - CLOCK_MARGIN)
                settled = settles.get((t["queue"], t["task_id"], t["lease"]), float("inf"))
                out.append(Delivery(t["queue"], t["task_id"], t["lease"], t["attempt"], t["payload"],
                                    t["max_attempts"], e.invoke, held_from(t, e.invoke, e.complete),
                                    min(expires, settled), e, expires))
        elif e.op == "queue.consume.task":
            stream = index.get(e.parent)
            stops = [k.invoke for k in kids.get(e.parent, []) if k.op == "queue.consume.close"]
            if stream is not None and stream.failed and stream.code in HOLDER_ENDS:
                stops.append(stream.end)
            t = e.args
            expires = float("inf")
            if stream is not None and stream.args.get("lease_ttl") is not None:
                expires = e.invoke + stream.args["lease_ttl"]  # leased before it arrived
            if t.get("lease_expires") is not None:
                expires = min(expires, t["lease_expires"] - CLOCK_MARGIN)
            if expires == float("inf"):
                stops.append(stream.end if stream else float("inf"))  # nothing else bounds it
            given_up = min(stops, default=float("inf"))
            settled = settles.get((t["queue"], t["task_id"], t["lease"]), float("inf"))
            lower = stream.invoke if stream else e.invoke
            out.append(Delivery(t["queue"], t["task_id"], t["lease"], t["attempt"], t["payload"],
                                t["max_attempts"], lower, held_from(t, lower, e.invoke),
                                min(expires, given_up, settled), e, expires, given_up))
    return out


def queue_leases_not_lost_early(events: Sequence[Event]) -> RuleResult:
    """A lease is its holder's until the expiry the server reported, unless the holder
    gave it up first: an ack, nack or release answered TASK_LEASE_NOT_HELD before that
    expiry, with no earlier settle, release or end of its stream by the holder, says
    the server let go of a task its holder still had (a stream the server ended handed
    its tasks back at once). A retrying client's repeat near a Redis fault may have
    followed an attempt that took effect (its reply lost): not counted."""
    found = _Found("queue_leases_not_lost_early")
    retries = client_retries(events)
    windows = _redis_fault_windows(events)
    by_lease = {(d.queue, d.task_id, d.lease): d for d in deliveries(events)}
    tries: dict[tuple[str, str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.op in ("queue.ack", "queue.nack", "queue.release"):
            tries[e.args["queue"], e.args["task_id"], e.args["lease"]].append(e)
    checked = 0
    for key, mine in tries.items():
        d = by_lease.get(key)
        if d is None:
            continue
        mine.sort(key=lambda e: e.invoke)
        for i, e in enumerate(mine):
            if not (e.failed and e.reason == "TASK_LEASE_NOT_HELD"):
                continue
            checked += 1
            if e.complete >= d.expires or e.invoke >= d.given_up:
                continue
            if any(o.maybe or _retried(o, retries) for o in mine[:i]):
                continue  # an earlier settle may have ended it
            if _retried(e, retries) and any(e.invoke <= hi and e.end >= lo for lo, hi in windows):
                continue
            found.add(f"task {key[0]}/{key[1]}: {e.op} on lease {key[2][:8]} (attempt {d.attempt}) answered "
                      f"TASK_LEASE_NOT_HELD {d.expires - e.complete:.3f}s before the lease's reported expiry",
                      d.event, e)
    return found.result(checked)


def queue_tasks_settled(events: Sequence[Event]) -> RuleResult:
    """Every task whose Enqueue was acknowledged ends acked once (an acknowledged Ack) or
    dead-lettered, never both, never twice, never lost; after the final drain nothing is
    ready, delayed or leased. A task whose only Ack was indeterminate may have been acked
    (so may one whose Ack a retrying client repeated and was told TASK_LEASE_NOT_HELD)."""
    found = _Found("queue_tasks_settled")
    acked_tasks, _ = _enqueued(events)
    acks: dict[TaskKey, list[Event]] = defaultdict(list)
    maybe_acked: set[TaskKey] = set()
    retries = client_retries(events)
    for e in events:
        if e.op == "queue.ack":
            key = (e.args["queue"], e.args["task_id"])
            if e.ok:
                acks[key].append(e)
            elif e.indeterminate or _retried(e, retries):  # a repeat answers TASK_LEASE_NOT_HELD
                maybe_acked.add(key)
    finals: dict[str, tuple[Event | None, Event | None]] = {}
    for e in events:
        if e.op in ("queue.final_dead", "queue.final_stats") and e.ok:
            dead, stats = finals.get(e.args["queue"], (None, None))
            finals[e.args["queue"]] = (e, stats) if e.op == "queue.final_dead" else (dead, e)
    queues = {e.args["queue"] for e in events if e.op == "queue.enqueue"}
    dead_ids: set[TaskKey] = set()
    for q in sorted(queues):
        dead, stats = finals.get(q, (None, None))
        if dead is None or stats is None:
            found.add(f"queue {q!r}: the final dead-letter list and stats were never read")
            continue
        dead_ids |= {(q, task_id) for task_id in dead.result["task_ids"]}
        left = {k: stats.result[k] for k in ("ready", "delayed", "leased") if stats.result[k]}
        if left:
            found.add(f"queue {q!r}: tasks left after the final drain: {left}", stats)
    for key, evs in acks.items():
        if len(evs) > 1:
            found.add(f"task {key} acked {len(evs)} times (leases {[e.args['lease'][:8] for e in evs]})", *evs)
        if key in dead_ids:
            found.add(f"task {key} acked and also dead-lettered", *evs)
    for key, (_, _, enq) in acked_tasks.items():
        if not acks.get(key) and key not in dead_ids and key not in maybe_acked:
            if finals.get(key[0], (None, None))[0] is not None:
                found.add(f"task {key} (enqueue acknowledged) lost: never acked, not dead-lettered", enq)
    return found.result(len(acked_tasks))


def queue_leases_exclusive(events: Sequence[Event]) -> RuleResult:
    """A task is never held by two leases at once (sure-held intervals of its deliveries
    never overlap), and a later delivery has a higher attempt number (the same one after
    a release, which does not count the attempt)."""
    found = _Found("queue_leases_exclusive")
    ds = deliveries(events)
    # A released lease's attempt is not counted: the next one may carry the same number.
    released = {(e.args["queue"], e.args["task_id"], e.args["lease"]) for e in events if e.op == "queue.release"}
    by_task: dict[TaskKey, list[Delivery]] = defaultdict(list)
    for d in ds:
        by_task[d.queue, d.task_id].append(d)
    for (queue, tid), mine in by_task.items():
        task_id = f"{queue}/{tid}"
        mine.sort(key=lambda d: d.start)
        for i, a in enumerate(mine):
            for b in mine[i + 1:]:
                if a.lease == b.lease:
                    continue
                # Only non-empty sure-held intervals count: a delivery received after its
                # lease ran out (a late push) was never surely held.
                if a.start + EPS < a.end and b.start + EPS < b.end and b.start < a.end - EPS:
                    found.add(f"task {task_id}: leases {a.lease[:8]} (attempt {a.attempt}) and {b.lease[:8]} "
                              f"(attempt {b.attempt}) both held for {min(a.end, b.end) - b.start:.3f}s",
                              a.event, b.event)
                uncounted = (a.queue, a.task_id, a.lease) in released
                if a.start < b.lower and (a.attempt > b.attempt or a.attempt == b.attempt and not uncounted):
                    found.add(f"task {task_id}: attempt {b.attempt} delivered after attempt {a.attempt}",
                              a.event, b.event)
    return found.result(len(ds))


# Faults that may lose a script's reply after it ran: on one Redis, and a primary
# killed, paused or cut off under Sentinel or on a cluster (the claim may have reached
# the replica that is promoted while its reply, or its WAIT's, never came back).
REDIS_FAULTS = {"redis_kill", "redis_pause", "link_cut", "failover", "primary_pause", "primary_cut", "primary_kill"}
REPLY_LOST_WINDOW = 6.0  # after a Redis fault heals, a reply lost in it is surely given up on (socket timeout 5 s)


def _redis_fault_windows(events: Sequence[Event]) -> list[tuple[float, float]]:
    return [(f.invoke, f.end + REPLY_LOST_WINDOW) for f in events
            if f.op == "fault" and f.args.get("kind") in REDIS_FAULTS]


def _blind_claims(events: Sequence[Event]) -> dict[str, list[Event]]:
    """Per queue, the claims that may have leased a task without any client seeing it:
    a Dequeue whose reply never came (the server or the connection died, the client's
    deadline ran out: no ErrorInfo), a Consume stream its consumer abandoned with tasks
    on the wire (a crash, the harness cancelling it) or that broke the same way, and
    any Dequeue or Consume claim that may have met a Redis fault (the script ran, its
    reply was lost: the lease is nobody's). A slot move, CPU pressure or a Redis error
    the server answered cleanly is no excuse: the server never leases what it does not
    hand over."""
    windows = _redis_fault_windows(events)
    retries = client_retries(events)
    kids = _children(events)

    def near_fault(lo: float, hi: float) -> bool:
        return any(lo <= w_hi and hi >= w_lo for w_lo, w_hi in windows)

    out: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.op == "queue.dequeue":
            blind = (not e.ok and e.reason is None) or ((not e.ok or _retried(e, retries))
                                                        and near_fault(e.invoke, e.end))
        elif e.op == "queue.consume":
            crashed = any(k.op == "queue.consume.close" and k.args.get("how") == "crash" for k in kids.get(e.id, []))
            ended = [k.invoke for k in kids.get(e.id, []) if k.op == "queue.consume.end"] or [e.end]
            blind = crashed or (e.failed and e.reason is None) or near_fault(e.invoke, min(ended))
        else:
            continue
        if blind:
            for q in e.args.get("queues") or [e.args["queue"]]:
                out[q].append(e)
    return out


PLACE_MARGIN = 0.5  # a lease placed by the server's event (Redis clock) against a claim's span


def queue_dead_tasks_delivered(events: Sequence[Event]) -> RuleResult:
    """A task that ends dead at attempt N was delivered N times: every attempt the
    server counted is a lease some client received (a max_attempts=1 task that died was
    seen once), unless a blind claim on its queue (see _blind_claims) may have taken the
    lease no client saw: one whose span holds the time the server's event log
    (queue.event.leased notes, WatchQueue) says that attempt was leased, or, when the
    log does not say, any blind claim since the task was enqueued."""
    found = _Found("queue_dead_tasks_delivered")
    acked_tasks, _ = _enqueued(events)
    seen: dict[TaskKey, set[int]] = defaultdict(set)
    for d in deliveries(events):
        seen[d.queue, d.task_id].add(d.attempt)
    leased = _lease_log(events)
    blind = _blind_claims(events)
    checked = 0
    for e in events:
        if e.op != "queue.final_dead" or not e.ok or "attempts" not in e.result:
            continue
        q = e.args["queue"]
        for task_id, attempt in e.result["attempts"].items():
            checked += 1
            key = (q, task_id)
            missing = [k for k in range(1, attempt + 1) if k not in seen.get(key, ())]
            if not missing:
                continue
            enq = acked_tasks.get(key)
            since = enq[2].invoke if enq else float("-inf")
            claims = [b for b in blind.get(q, []) if b.end >= since]

            def excused(k: int) -> bool:
                when = leased.get(key, {}).get(k)
                if not when:
                    return bool(claims)
                return any(b.invoke - PLACE_MARGIN <= t <= b.end + PLACE_MARGIN for b in claims for t in when)

            unseen = [k for k in missing if not excused(k)]
            if unseen:
                places = {k: [round(t, 3) for t in leased.get(key, {}).get(k, [])] for k in unseen}
                found.add(f"task {q}/{task_id} died at attempt {attempt} (max_attempts "
                          f"{enq[1] if enq else '?'}); no client saw attempt(s) {unseen} "
                          f"(leased at {places}), {len(seen.get(key, ()))} deliveries seen",
                          *(enq[2:] if enq else ()), e)
    return found.result(checked)


def queue_deliveries_match_enqueues(events: Sequence[Event]) -> RuleResult:
    """A delivered task carries the payload and max_attempts its Enqueue was acknowledged
    with (or, for an unacknowledged Enqueue, a payload that was sent and not
    acknowledged under another id), and its attempt never exceeds max_attempts."""
    found = _Found("queue_deliveries_match_enqueues")
    acked_tasks, sent = _enqueued(events)
    acked_payloads = {payload: key for key, (payload, _, _) in acked_tasks.items()}
    ds = deliveries(events)
    for d in ds:
        if (d.queue, d.task_id) in acked_tasks:
            payload, max_attempts, enq = acked_tasks[d.queue, d.task_id]
            if d.payload != payload or d.max_attempts != max_attempts:
                found.add(f"task {d.queue}/{d.task_id} delivered with payload {d.payload!r} "
                          f"(max_attempts {d.max_attempts}), "
                          f"acknowledged with {payload!r} ({max_attempts})", enq, d.event)
        elif d.payload in acked_payloads:
            other = acked_payloads[d.payload]
            found.add(f"task {d.queue}/{d.task_id} delivered with the payload acknowledged as task {other}",
                      acked_tasks[other][2], d.event)
        elif d.payload not in sent:
            found.add(f"task {d.queue}/{d.task_id} delivered with payload {d.payload!r} that nobody enqueued", d.event)
        if d.attempt > d.max_attempts or d.attempt < 1:
            found.add(f"task {d.queue}/{d.task_id} delivered at attempt {d.attempt} of {d.max_attempts}", d.event)
    return found.result(len(ds))


# ---------------------------------------------------------------- chat


def _sends(events: Sequence[Event]) -> list[tuple[str, int, str, str, Event]]:
    """Acknowledged messages: (chat, id, sender, body, event), CreateChat's first one included."""
    out = []
    for e in events:
        if e.ok and e.op == "chat.send":
            out.append((e.args["chat"], e.result["message_id"], e.args["sender"], e.args["body"], e))
        elif e.ok and e.op == "chat.create":
            out.append((e.args["chat"], e.result["message_id"], e.args["sender"], e.args["body"], e))
    return out


def chat_ids_unique_and_increasing(events: Sequence[Event]) -> RuleResult:
    """Acknowledged message ids are unique per chat and increase in real-time order: a
    send acknowledged before another was invoked got the smaller id."""
    found = _Found("chat_ids_unique_and_increasing")
    sends = _sends(events)
    by_chat: dict[str, list[tuple[int, Event]]] = defaultdict(list)
    for chat, mid, _, _, e in sends:
        by_chat[chat].append((mid, e))
    for chat, mine in by_chat.items():
        seen: dict[int, Event] = {}
        for mid, e in mine:
            if mid in seen:
                found.add(f"chat {chat!r}: message id {mid} acknowledged to two sends", seen[mid], e)
            seen[mid] = e
        by_done = sorted(mine, key=lambda x: x[1].complete)
        dones = [e.complete for _, e in by_done]
        best: list[tuple[int, Event]] = []
        for mid, e in by_done:
            best.append((mid, e) if not best or mid > best[-1][0] else best[-1])
        for mid, e in mine:
            i = bisect.bisect_left(dones, e.invoke) - 1
            if i >= 0 and best[i][0] >= mid and best[i][1] is not e:
                found.add(f"chat {chat!r}: id {mid} acknowledged after id {best[i][0]} was", best[i][1], e)
    return found.result(len(sends))


def _chat_deliveries(events: Sequence[Event]) -> list[tuple[str, int, str, str, Event]]:
    out = []
    for e in events:
        if e.op == "chat.deliver":
            out.append((e.args["chat"], e.args["message_id"], e.args["sender"], e.args["body"], e))
        elif e.op == "chat.history" and e.ok:
            out += [(e.args["chat"], m["message_id"], m["sender"], m["body"], e) for m in e.result["messages"]]
    return out


def chat_bodies_match(events: Sequence[Event]) -> RuleResult:
    """Every message delivered (Subscribe) or read (GetHistory) under an id carries the
    sender and body acknowledged under that id; one not acknowledged carries a body
    that was sent (bodies are unique) and not acknowledged under another id; no body
    appears under two ids."""
    found = _Found("chat_bodies_match")
    acked = {(chat, mid): (sender, body, e) for chat, mid, sender, body, e in _sends(events)}
    acked_bodies = {(chat, body): (mid, e) for (chat, mid), (_, body, e) in acked.items()}
    sent: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.op in ("chat.send", "chat.create"):
            sent[e.args["chat"], e.args["body"]].append(e)
    ds = _chat_deliveries(events)
    ids_of_body: dict[tuple[str, str], dict[int, Event]] = defaultdict(dict)
    for chat, mid, sender, body, e in ds:
        ids_of_body[chat, body].setdefault(mid, e)
        if (chat, mid) in acked:
            a_sender, a_body, a = acked[chat, mid]
            if (sender, body) != (a_sender, a_body):
                found.add(f"chat {chat!r} id {mid}: got {sender!r}/{body!r}, acknowledged {a_sender!r}/{a_body!r}",
                          a, e)
        elif (chat, body) in acked_bodies:
            mid2, a = acked_bodies[chat, body]
            found.add(f"chat {chat!r}: body {body!r} got under id {mid}, acknowledged under id {mid2}", a, e)
        elif (chat, body) not in sent:
            found.add(f"chat {chat!r} id {mid}: body {body!r} was never sent to this chat", e)
    for (chat, body), ids in ids_of_body.items():
        if len(ids) > 1:
            found.add(f"chat {chat!r}: one sent body {body!r} stored under ids {sorted(ids)}", *ids.values())
    return found.result(len(ds))


def chat_delivery_order(events: Sequence[Event]) -> RuleResult:
    """On one Subscribe stream a chat's messages come in order without gaps (ids +1);
    an explicit-ack stream starts right after the member's acknowledged position (never
    before what it acked, never past what it may have acked) and carries no Gap; at the
    end every explicit-ack member has received every acknowledged message."""
    found = _Found("chat_delivery_order")
    kids = _children(events)
    acks: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in events:
        if e.op == "chat.ack":
            acks[e.args["user"], e.args["chat"]].append(e)
    streams = [e for e in events if e.op == "chat.subscribe"]
    received: dict[tuple[str, str], set[int]] = defaultdict(set)
    caught_up: dict[str, bool] = {}
    for s in streams:
        user, explicit = s.args["user"], s.args["mode"] == "explicit"
        last: dict[str, tuple[int, Event]] = {}
        for k in kids.get(s.id, []):
            if k.op == "chat.gap" and explicit:
                found.add(f"{user}: explicit-ack stream got {k.args} with retention far above the messages sent", k)
            if k.op == "chat.caught_up" and s.args.get("final"):
                caught_up[user] = True
            if k.op != "chat.deliver":
                continue
            chat, mid = k.args["chat"], k.args["message_id"]
            received[user, chat].add(mid)
            if chat in last:
                prev, pe = last[chat]
                if mid != prev + 1:
                    found.add(f"{user} in {chat!r}: id {mid} followed id {prev} on one stream", pe, k)
            elif explicit:
                mine = acks.get((user, chat), [])
                low = max((a.args["up_to"] for a in mine if a.ok and a.complete <= s.invoke), default=0)
                high = max((a.args["up_to"] for a in mine if a.invoke < k.invoke), default=0)
                if not low + 1 <= mid <= high + 1:
                    found.add(f"{user} in {chat!r}: explicit-ack stream started at id {mid}; acked up to {low} "
                              f"(maybe {high}) before", s, k)
            last[chat] = (mid, k)
    explicit_users = {s.args["user"] for s in streams if s.args["mode"] == "explicit"}
    finals = {s.args["user"] for s in streams if s.args.get("final")}
    sends = _sends(events)
    for user in sorted(explicit_users):
        if user not in finals:
            continue  # no final read (the campaign reports why); nothing to compare with
        if not caught_up.get(user):
            found.add(f"{user}: the final explicit-ack subscription never reported caught_up",
                      *[s for s in streams if s.args["user"] == user and s.args.get("final")])
            continue
        missing = [(chat, mid, e) for chat, mid, _, _, e in sends if mid not in received[user, chat]]
        for chat, mid, e in missing[:MAX_REPORTED]:
            found.add(f"{user} never received acknowledged message {mid} of {chat!r}", e)
        if len(missing) > MAX_REPORTED:
            found.add(f"{user}: {len(missing) - MAX_REPORTED} more acknowledged messages never received")
    return found.result(len(streams))


# ---------------------------------------------------------------- autocomplete


def autocomplete_reads(events: Sequence[Event]) -> RuleResult:
    """Reads of recent contacts and name indexes (which only grow here) show every
    entry acknowledged before the read was invoked and nothing that was never written
    before it completed; Suggest is in name order; counts lie between the two."""
    found = _Found("autocomplete_reads")
    # (kind, user or index) -> entry -> (first invocation of a write, first acknowledgement)
    written: dict[tuple[str, str], dict[str, tuple[float, float]]] = defaultdict(dict)

    def wrote(key: tuple[str, str], entry: str, e: Event) -> None:
        inv, ack = written[key].get(entry, (float("inf"), float("inf")))
        written[key][entry] = (min(inv, e.invoke), min(ack, e.complete if e.ok else float("inf")))

    for e in events:
        if e.op == "ac.add_recent":
            wrote(("recent", e.args["user"]), e.args["contact"], e)
        elif e.op == "ac.add_names":
            for n in e.args["names"]:
                wrote(("names", e.args["index"]), n, e)
    checked = 0
    for e in events:
        if not e.ok:
            continue
        if e.op == "ac.suggest_recent":
            key, got = ("recent", e.args["user"]), e.result["contacts"]
        elif e.op == "ac.suggest":
            key, got = ("names", e.args["index"]), e.result["names"]
            if got != sorted(got):
                found.add(f"suggest {e.args['index']!r} {e.args['prefix']!r}: not in name order", e)
        elif e.op == "ac.count":
            key, got = ("names", e.args["index"]), None
        elif e.op == "ac.add_recent":
            key, got = ("recent", e.args["user"]), None
        else:
            continue
        checked += 1
        prefix = e.args.get("prefix", "")
        entries = {n: w for n, w in written[key].items() if n.startswith(prefix)}
        must = {n for n, (_, ack) in entries.items() if ack < e.invoke}
        may = {n for n, (inv, _) in entries.items() if inv < e.complete}
        if e.op == "ac.count":
            if not len(must) <= e.result["count"] <= len(may):
                found.add(f"count {key[1]!r} {prefix!r} = {e.result['count']}, expected {len(must)}..{len(may)}", e)
            continue
        if e.op == "ac.add_recent":
            must |= {e.args["contact"]}
            if not len(must) <= e.result["size"] <= len(may):
                found.add(f"add_recent {key[1]!r}: size {e.result['size']}, expected {len(must)}..{len(may)}", e)
            continue
        phantom = sorted(set(got) - may)
        lost = sorted(must - set(got))
        if phantom:
            found.add(f"{e.op} {key[1]!r} {prefix!r}: {phantom[:5]} never written before the read completed "
                      f"(or not matching the prefix)", e)
        if lost:
            found.add(f"{e.op} {key[1]!r} {prefix!r}: acknowledged {lost[:5]} missing ({len(lost)} in all)", e)
    return found.result(checked)


# ---------------------------------------------------------------- server logs

LOG_MARKERS = ("unexpected error", "Traceback", "Task exception was never retrieved", "Exception in callback")


def other_log_errors(logs: dict[str, str]) -> list[str]:
    """ERROR-level log lines that server_logs_clean does not count (for the summary)."""
    return [f"{name}: {line.strip()[:200]}" for name, text in sorted(logs.items()) for line in text.splitlines()
            if " ERROR " in line and not any(m in line for m in LOG_MARKERS)]


def server_logs_clean(logs: dict[str, str]) -> RuleResult:
    """No server logged an unexpected error or a traceback."""
    found = _Found("server_logs_clean")
    for name, text in sorted(logs.items()):
        lines = text.splitlines()
        hits = [i for i, line in enumerate(lines) if any(m in line for m in LOG_MARKERS)]
        for i in hits[:MAX_REPORTED]:
            found.add(f"{name}:{i + 1}: " + " | ".join(line.strip() for line in lines[i:i + 12]))
        if len(hits) > MAX_REPORTED:
            found.add(f"{name}: {len(hits) - MAX_REPORTED} more such lines")
    return found.result(len(logs))


RATE_WINDOW_PERIODS = 10  # windows up to this many periods from every start; longer ones from every 64th


def ratelimit_within_limit(events: Sequence[Event]) -> RuleResult:
    """GCRA never lets more than burst + rate x w / per units pass in any window of
    length w, counted over every server's checks and waits of a key: the units of allowed ones
    whose whole call lies inside the window (a call's decision is somewhere in its span;
    ones that straddle the window's edges are left out, so the count is a floor and a
    violation is certain). Windows run from an allowed call's invoke to a later one's
    complete: every one up to RATE_WINDOW_PERIODS periods long, and from every 64th
    start to the end of the run (a slow drift past the rate shows there), so a long run
    is checked in about n x (calls per 10 periods + n / 64) steps, not n squared."""
    found = _Found("ratelimit_within_limit")
    by_key: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        if e.op in RATE_OPS and e.ok and e.result.get("allowed"):
            by_key[e.args["key"]].append(e)
    checked = 0
    for key, allowed in by_key.items():
        by_end = sorted(allowed, key=lambda e: e.complete)
        ends = [e.complete for e in by_end]
        for n, first in enumerate(sorted(allowed, key=lambda e: e.invoke)):
            rate, per, burst = first.args["rate"], first.args["per"], first.args["burst"]
            span = float("inf") if n % 64 == 0 else RATE_WINDOW_PERIODS * per
            units, inside = 0, []
            for last in by_end[bisect.bisect_left(ends, first.invoke):]:  # growing windows from first.invoke
                if last.complete - first.invoke > span:
                    break
                if last.invoke < first.invoke:
                    continue
                units += last.args["hits"]
                inside.append(last)
                checked += 1
                bound = burst + rate * (last.complete - first.invoke) / per
                if units > bound + 1e-6:
                    found.add(f"rate limit {key!r}: {units} units allowed within {last.complete - first.invoke:.3f}s, "
                              f"where at most {bound:.1f} may pass (burst {burst} + {rate} per {per}s)",
                              *inside[:3], *inside[-2:])
                    return found.result(checked)
    return found.result(checked)


def ratelimit_refusals_justified(events: Sequence[Event]) -> RuleResult:
    """GCRA refuses h units at time t only if more than burst - h units were taken in
    the tau = burst x per / rate before t: after any admission at s the key's TAT is at
    most s + tau, so with A units taken in [t - tau, t] its TAT at t is at most t + A x T,
    and a refusal needs TAT + h x T - tau > t. Counted conservatively: every call on the
    key that may have taken units (allowed, or of unknown outcome) whose span meets
    [refused.invoke - tau, refused.complete]; a refusal with no more than burst - h of
    them around it refused what the limit allowed. Keys that Wait also uses are left out:
    a Wait retried after a lost reply may take units no event shows.

    A call of unknown outcome may take its units after its client gave up: a script
    sent to a paused (or cut off) Redis waits in the socket and runs when Redis comes
    back. So its span reaches to the end of every fault that overlapped it (the runs
    at 61b436a refused right after a 6 s pause, counting none of the checks the pause
    had queued)."""
    found = _Found("ratelimit_refusals_justified")
    faults = [(f.invoke, math.inf if f.complete is None else f.complete) for f in events if f.op == "fault"]

    def effect_end(e: Event) -> float:
        end = math.inf if e.complete is None else e.complete
        if e.indeterminate:
            end = max([end, *(f_end for f_start, f_end in faults if f_start <= end and f_end >= e.invoke)])
        return end

    by_key: dict[str, list[Event]] = defaultdict(list)
    waited = {e.args.get("key") for e in events if e.op == "ratelimit.wait"}
    for e in events:
        if e.op == "ratelimit.check" and e.args.get("key") not in waited:
            by_key[e.args["key"]].append(e)
    checked = 0
    for key, calls in by_key.items():
        takers = sorted((e for e in calls if (e.ok and e.result.get("allowed")) or e.indeterminate),
                        key=lambda e: e.invoke)
        starts = [e.invoke for e in takers]
        for r in calls:
            if not (r.ok and not r.result.get("allowed")) or r.complete is None:
                continue
            rate, per, burst, hits = r.args["rate"], r.args["per"], r.args["burst"], r.args["hits"]
            if hits > burst:
                continue  # never passes at once: refused by rule, not by the count
            tau = burst * per / rate
            lo, hi = r.invoke - tau - 0.005, r.complete + 0.005
            taken = [e for e in takers[:bisect.bisect_right(starts, hi)] if effect_end(e) >= lo]
            units = sum(e.args["hits"] for e in taken)
            checked += 1
            if units <= burst - hits:
                found.add(f"rate limit {key!r}: {hits} units refused with at most {units} taken in the "
                          f"{tau:.3f}s before (burst {burst}: at least {burst - hits + 1} had to be)", r, *taken[:3])
    return found.result(checked)


# Rules about answering (every call answered, in time, never INTERNAL): they hold in
# every deployment. The others check the state Redis keeps, and a failover without
# replica acks may lose some of it (asynchronous replication): there, their violations
# are the measured loss (campaign.Report.losses), reported rather than failed.
ANSWER_RULES = frozenset({"no_internal_or_unknown", "blocked_calls_answer_in_time", "calls_answered_by_deadline",
                          "server_logs_clean"})

RULES: list[Callable[[Sequence[Event]], RuleResult]] = [
    no_internal_or_unknown,
    blocked_calls_answer_in_time,
    calls_answered_by_deadline,
    lock_mutual_exclusion,
    lock_fencing_tokens_increase,
    election_one_leader,
    election_terms_increase,
    election_observers_agree,
    rwlock_writers_exclusive,
    rwlock_tokens_increase,
    leases_not_lost_early,
    semaphore_within_limit,
    queue_tasks_settled,
    queue_leases_exclusive,
    queue_leases_not_lost_early,
    queue_dead_tasks_delivered,
    queue_deliveries_match_enqueues,
    chat_ids_unique_and_increasing,
    chat_bodies_match,
    chat_delivery_order,
    autocomplete_reads,
    ratelimit_within_limit,
    ratelimit_refusals_justified,
]


def check(events: Sequence[Event], logs: dict[str, str] | None = None) -> list[RuleResult]:
    results = [rule(events) for rule in RULES]
    if logs is not None:
        results.append(server_logs_clean(logs))
    return results

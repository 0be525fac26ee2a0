"""Reliable task queues: priorities, delays, leases, retries with backoff, dead letters.

Every state change is one Lua script (lua/queue_*.lua) on the Redis server clock, and
all of a queue's keys share one hash tag. Each script first applies what the clock
alone changes (due delayed tasks become ready; expired leases, whose workers died,
make their tasks ready for the next attempt), so no sweeper process is needed and
every answer reflects the queue as of Redis's "now".

A Dequeue that finds nothing waits on the queues' doorbells (wakeups/doorbells.py): scripts
that make tasks ready publish how many, and the scripts' replies say when the clock
will next change the queue, so a waiting worker claims a delayed task within a
millisecond or two of its time, with no polling sleep. An uncontended enqueue, and
a dequeue that finds a task, are one round trip each.

Imports no grpc: api/queue.py maps its errors to status codes.
"""

from __future__ import annotations

import asyncio
import random
import secrets
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ..errors import ReplicationTimeout, TaskFinished, TaskLeased, TaskLeaseNotHeld, TaskNotFound
from ..keys import KeySpace, QueueKeys
from ..store.reply_shapes import Codes, Either, INT, Maybe, STR, Seq, Tagged, Tup
from ..store.scripts import Commands, Script, script
from ..statuses import CANCEL, HELD
from ..wakeups.doorbells import Doorbells
from ..wakeups.outcomes import Outcomes
from .letting_go import Releaser, answer_within
from .. import quotas
from .listing import noting, scan_names
from .task_search import EXAMINE, READ_BYTES, START, Cursor, SearchQuery

TASK_OVERHEAD = 1024  # queue_common.lua's TASK_OVERHEAD: a task's reply bytes beyond its variable fields
# One task as queue_common.lua's task_reply gives it: its id, then fourteen fields (nil if unset).
TASK = Tup(STR, *[Maybe(STR)] * 14)
# task_detail: TASK's fifteen, then lat prog pj pt res rct fin why bk bb bc bj ('' when unset),
# then what holds it back (wait_reason).
TASK_DETAIL = Tup(STR, *[Maybe(STR)] * 27)

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class EnqueueReply(NamedTuple):
    added: list[tuple[str, int]]  # per task: (task id, 0 added / 1 a duplicate / 2 debounced)


class DequeueReply(NamedTuple):
    now_ms: int
    next_change_ms: int  # until the clock changes the queue (-1: never)
    ready_left: int
    tasks: list[list[Any]]  # each as TASK


class Settling(NamedTuple):
    """One settle of a leased attempt, as queue_settle.lua takes it."""
    task_id: str
    lease: str
    action: str  # ack | nack | release | abandon | extend | progress
    ms: int = -1  # nack: retry delay (-1: backoff); extend, progress: lease length (-1: keep)
    text: str | bytes = ""  # ack: result; nack, abandon: error; progress: value
    text2: str = ""  # ack: result type; progress: JSON
    retryable: bool = True


class SettleReply(NamedTuple):
    status: int  # HELD.*
    state: str = ""  # HELD: ready | delayed | dead | succeeded | leased
    at_ms: int = 0


class StatsReply(NamedTuple):
    ready: int
    delayed: int
    leased: int
    dead: int
    oldest_ready_age_ms: int  # -1: nothing ready
    paused: int  # 0/1
    finished: int  # succeeded and cancelled tasks retained


class TaskReply(NamedTuple):
    now_ms: int
    paused: int  # 0/1
    fields: list[Any]  # TASK_DETAIL


class PolicyReply(NamedTuple):
    succeeded_count: int  # -1: no limit
    succeeded_age_ms: int  # 0: no limit
    dead_count: int
    dead_age_ms: int
    max_attempts: int
    backoff: str  # fixed | exp | '' (the server's default for this and the rest)
    initial_ms: str
    cap_ms: str
    jitter: str  # 1 | 0
    keep_events: int
    flow: tuple[str, ...] = ()  # qc qr qp qb gc gr gp gb ('' when unset)


class EventsReply(NamedTuple):
    last: int  # the last event's number (0: none yet)
    first_kept: int  # the oldest kept (0: none kept)
    events: list[list[str]]  # each: n, kind, task id, ms, then field, value pairs


class TaskEventsReply(NamedTuple):
    now_ms: int
    last: int  # the last event's number (0: none yet)
    first_kept: int  # the oldest kept (0: none kept)
    looked: int  # events looked at
    go_on: int  # look below this number next (0: nothing older to look at)
    whole: int  # 1: the task's enqueued event was found, so its history is whole
    events: list[list[str]]  # the task's, newest first: n, kind, task id, ms, then field, value pairs


class SearchReply(NamedTuple):
    examined: int
    paused: int  # 0/1
    next_set: int  # 0: the search is done
    next_score: bytes
    next_id: bytes
    tasks: list[list[Any]]  # each as TASK


@dataclass(frozen=True)
class SearchPage:
    tasks: list[TaskRecord]
    next: Cursor | None  # None: the whole queue has been searched
    examined: int


class PurgeReply(NamedTuple):
    deleted: int
    more: int  # 1: call again


POLICY = Tup(INT, INT, INT, INT, INT, STR, STR, STR, STR, INT, *[STR] * 8)
# One group as queue_group.lua describes it.
GROUP = Tup(STR, INT, INT, Codes(0, 1), STR, STR, STR, STR, STR, INT, STR, STR, STR, STR)


def _policy_reply(r: list[Any]) -> PolicyReply:
    return PolicyReply(*r[:5], *(_text(x) for x in r[5:9]), r[9], tuple(_text(x) for x in r[10:18]))


_ENQUEUE = script("queue_enqueue.lua", Seq(each=(STR, Codes(0, 1, 2))),
                  decode=lambda r: EnqueueReply([(r[i], r[i + 1]) for i in range(0, len(r), 2)]))
_DEQUEUE = script("queue_dequeue.lua", Seq(INT, INT, INT, each=(TASK,)), raw=True,
                  decode=lambda r: DequeueReply(*r[:3], r[3:]))
_SETTLE = script("queue_settle.lua", Seq(each=(Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(STR, INT)}),)),
                 decode=lambda r: [SettleReply(*x) for x in r])
# One script, several questions: each caller decodes the reply to the one it asked
# (stats: StatsReply; task: TaskReply, or 0 for no such task; policy: PolicyReply; a
# state: its TASKs).
_INSPECT = script("queue_inspect.lua",
                  Either(Tup(INT, INT, INT, INT, INT, Codes(0, 1), INT), Tup(INT, Codes(0, 1), TASK_DETAIL),
                         POLICY, Codes(0), Seq(each=(TASK,))),
                  raw=True)
# cancel: a CANCEL status; purge: PurgeReply
_REMOVE = script("queue_remove.lua", Either(Codes(*CANCEL.codes()), Tup(INT, Codes(0, 1))),
                 decode=lambda r: PurgeReply(*r) if isinstance(r, list) else r)
_RETRY_DEAD = script("queue_retry_dead.lua", INT)
_PAUSE = script("queue_pause.lua", Codes(0, 1))  # 1: it was paused
_SEARCH = script("queue_search.lua", Seq(INT, Codes(0, 1), Codes(0, 1, 2, 3, 4, 5), STR, STR, each=(TASK,)), raw=True,
                 decode=lambda r: SearchReply(*r[:5], r[5:]))
_POLICY = script("queue_policy.lua", POLICY, raw=True, decode=_policy_reply)

_GROUP = script("queue_group.lua", Either(GROUP, Seq(each=(GROUP,))), raw=True)
_EVENTS = script("queue_events.lua", Seq(INT, INT, each=(Seq(STR, STR, STR, STR, each=(STR,)),)),
                 decode=lambda r: EventsReply(r[0], r[1], r[2:]))

_TASK_EVENTS = script("queue_task_events.lua",
                      Seq(INT, INT, INT, INT, INT, Codes(0, 1), each=(Seq(INT, STR, STR, STR, each=(STR,)),)),
                      decode=lambda r: TaskEventsReply(*r[:6], r[6:]))

SCRIPTS = (_ENQUEUE, _DEQUEUE, _SETTLE, _INSPECT, _REMOVE, _RETRY_DEAD, _PAUSE, _POLICY, _GROUP, _EVENTS, _SEARCH,
           _TASK_EVENTS)

# Strict priority: one priority step outweighs any difference in ready time (2^43 ms
# is ~280 years), and scores stay exact in Lua's doubles for priorities up to 1000.
STRICT = 2**43
MAX_PRIORITY = 1000
BACKOFF_CAP_MS = 3_600_000
PURGE_BATCH = 5000
STATES = ("ready", "delayed", "leased", "dead")
EVENTS_BATCH = 500
WATCH_WAIT = 30.0  # a watcher's doorbell wait, re-armed until the stream ends
GAP = "gap"
CAUGHT_UP = "caught_up"
FINISHED = ("succeeded", "dead", "cancelled")


@dataclass(frozen=True)
class NewTask:
    type: str
    payload: bytes = b""
    priority: int = 0
    delay_ms: int | None = None  # ready this long after Redis's now
    run_at_ms: int | None = None  # or at this time (ms since the epoch)
    dedupe_key: str = ""
    dedupe_window_ms: int = 0
    max_attempts: int = 0  # 0: the queue's retry policy (3 unless set)
    retry: RetryPolicy | None = None  # overrides the queue's backoff, field by field
    throttle_key: str = ""  # at most one task per key accepted each throttle_ms
    throttle_ms: int = 0
    debounce_key: str = ""  # a pending task with this key takes the new one's place
    group: str = ""  # takes turns with the queue's other groups, under the group's rules


@dataclass(frozen=True)
class Enqueued:
    task_id: str
    duplicate: bool  # the dedupe or throttle key named task_id
    debounced: bool = False  # the pending task task_id took this one's place


@dataclass(frozen=True)
class TaskRecord:
    queue: str
    task_id: str
    type: str
    payload: bytes
    priority: int
    state: str  # ready | delayed | leased | dead | succeeded | cancelled | waiting (ready, queue paused)
    attempt: int
    max_attempts: int
    lease: str
    lease_expires_ms: int | None
    enqueued_ms: int
    ready_ms: int
    last_error: str
    schedule: str = ""  # the schedule that enqueued it
    scheduled_ms: int | None = None  # the tick it ran for
    group: str = ""
    # get_task and wait_task only:
    leased_ms: int | None = None
    progress: Progress | None = None
    result: bytes = b""
    result_type: str = ""
    finished_ms: int | None = None

    def reply_bytes(self) -> int:
        """What this task adds to a reply, counted as queue_common.lua's task_bytes does."""
        return (TASK_OVERHEAD + len(self.payload) + len(self.type.encode()) + len(self.last_error.encode())
                + len(self.schedule.encode()))
    dead_reason: str = ""  # attempts | lease | not_retryable
    retry: RetryPolicy | None = None  # the task's own, if it set one
    # Ready but not leased now because of: paused queue_capped queue_limited group_paused
    # group_capped group_limited ('' when no rule holds it back).
    wait_reason: str = ""


@dataclass(frozen=True)
class Progress:
    value: float | None
    json: str
    reported_ms: int


@dataclass(frozen=True)
class RetryPolicy:
    """How failed attempts are retried; None fields take the queue's, then the
    server's defaults (exponential from --queue-retry-backoff, capped at an hour)."""

    max_attempts: int | None = None
    backoff: str | None = None  # fixed | exp
    initial_ms: int | None = None
    cap_ms: int | None = None
    jitter: bool | None = None

    def fields(self) -> list[object]:
        """bk bb bc bj for the scripts ('' when unset); max_attempts goes apart."""
        return ["" if self.backoff is None else self.backoff, "" if self.initial_ms is None else self.initial_ms,
                "" if self.cap_ms is None else self.cap_ms, "" if self.jitter is None else int(self.jitter)]

    @staticmethod
    def parse(bk: bytes | str, bb: bytes | str, bc: bytes | str, bj: bytes | str) -> RetryPolicy | None:
        """A task's own retry fields (its max attempts are stored apart); None if it set none."""
        bk, bb, bc, bj = (_text(x) for x in (bk, bb, bc, bj))
        if not (bk or bb or bc or bj):
            return None
        return RetryPolicy(None, bk or None, int(bb) if bb else None, int(bc) if bc else None,
                           bj == "1" if bj else None)


@dataclass(frozen=True)
class Retention:
    max_count: int | None = None  # None: no count limit
    max_age_ms: int = 0  # 0: no age limit


@dataclass(frozen=True)
class Rate:
    """At most `count` leases per `period_ms`, `burst` of them at once (GCRA)."""

    count: int
    period_ms: int
    burst: int

    def fields(self) -> list[object]:
        return [self.count, self.period_ms, self.burst]

    @staticmethod
    def parse(count: str, period: str, burst: str) -> Rate | None:
        return Rate(int(count), int(period), int(burst)) if count else None


@dataclass(frozen=True)
class Policy:
    """A queue's settings, kept with its tasks; None fields take the defaults."""

    succeeded: Retention | None = None
    dead: Retention | None = None
    retry: RetryPolicy | None = None
    keep_events: int | None = None  # task events kept for WatchQueue (0: none)
    max_leased: int | None = None  # tasks leased at once, across all workers (None: no cap)
    rate: Rate | None = None  # leases of the whole queue
    group_max_leased: int | None = None  # each group's, unless it sets its own
    group_rate: Rate | None = None  # each group's, unless it sets its own


@dataclass(frozen=True)
class GroupRules:
    """A group's own rules; None takes the queue's (group_max_leased, group_rate), weight 1."""

    max_leased: int | None = None  # -1: no cap, whatever the queue's default
    weight: int | None = None  # its share of turns against the other busy groups
    rate: Rate | None = None


@dataclass(frozen=True)
class GroupInfo:
    name: str
    ready: int
    leased: int
    paused: bool
    own: GroupRules
    max_leased: int | None  # in force
    rate: Rate | None  # in force
    wait_reason: str  # group_paused | group_capped | group_limited | ''


def _group(r: list[Any]) -> GroupInfo:
    name, ready, leased, paused, c, w, rr, rp, rb, cap, er, ep, eb, why = (_text(x) if isinstance(x, bytes) else x
                                                                         for x in r)
    own = GroupRules(int(c) if c else None, int(w) if w else None, Rate.parse(rr, rp, rb))
    return GroupInfo(name, ready, leased, paused == 1, own, None if cap < 0 else cap, Rate.parse(er, ep, eb), why)


@dataclass(frozen=True)
class QueueStats:
    ready: int
    delayed: int
    leased: int
    dead: int
    oldest_ready_age_ms: int  # 0 when nothing is ready
    paused: bool = False
    finished: int = 0  # succeeded and cancelled tasks retained


@dataclass(frozen=True)
class QueueEvent:
    """What happened to a task (queue_common.lua's event); or a GAP: the events
    between the position asked for and this one's were dropped; or CAUGHT_UP: every
    event kept so far has been sent."""

    position: int
    kind: str  # enqueued leased progress succeeded failed dead cancelled released retried | gap
    task_id: str = ""
    at_ms: int = 0
    attempt: int = 0
    type: str = ""
    ready_ms: int | None = None
    error: str = ""
    dead_reason: str = ""
    progress: Progress | None = None
    schedule: str = ""
    group: str = ""  # held: the group ('' the whole queue)
    wait_reason: str = ""  # held: the rule now holding its ready tasks back (as TaskRecord's)


def _event(e: list[str]) -> QueueEvent:
    f = dict(zip(e[4::2], e[5::2]))
    progress = None
    if "pj" in f:
        progress = Progress(float(f["pv"]) if f.get("pv") else None, f["pj"], int(e[3]))
    return QueueEvent(int(e[0]), e[1], e[2], int(e[3]), int(f.get("a") or 0), f.get("ty", ""),
                      int(f["r"]) if "r" in f else None, f.get("e", ""), f.get("w", ""), progress, f.get("s", ""),
                      f.get("g", ""), f.get("h", ""))


@dataclass(frozen=True)
class Outcome:
    state: str  # ready | delayed | dead | succeeded | leased
    at_ms: int  # when it is ready again (nack), or when the lease now ends (extend, progress)


def _text(b: bytes | str) -> str:
    return b.decode() if isinstance(b, bytes) else b


def _record(queue: str, f: list[Any]) -> TaskRecord:
    lease_expires = int(f[8])
    return TaskRecord(
        queue=queue, task_id=_text(f[0]), type=_text(f[1]), payload=f[2], priority=int(f[3]), state=_text(f[4]),
        attempt=int(f[5]), max_attempts=int(f[6]), lease=_text(f[7]),
        lease_expires_ms=lease_expires if lease_expires >= 0 else None,
        enqueued_ms=int(f[9]), ready_ms=int(f[10]), last_error=_text(f[11]), schedule=_text(f[12]),
        scheduled_ms=_ms(f[13]), group=_text(f[14]),
    )


def _ms(b: bytes) -> int | None:
    return int(b) if b else None


def _detail(queue: str, paused: bool, f: list[Any]) -> TaskRecord:
    """A TASK_DETAIL reply; a ready task of a paused queue is ``waiting``."""
    base = _record(queue, f)
    leased, value, pj, reported, result, rtype, finished, why = f[15:23]
    retry = RetryPolicy.parse(*f[23:27])
    state = "waiting" if base.state == "ready" and paused else base.state
    progress = Progress(float(value) if value else None, _text(pj), int(reported)) if reported else None
    return replace(base, state=state, leased_ms=_ms(leased), progress=progress, result=bytes(result),
                   result_type=_text(rtype), finished_ms=_ms(finished), dead_reason=_text(why), retry=retry,
                   wait_reason=_text(f[27]))


def _retention_args(r: Retention | None) -> list[object]:
    """sn/sa (or dn/da) for queue_policy.lua: '' for the default."""
    if r is None:
        return ["", ""]
    return [-1 if r.max_count is None else r.max_count, r.max_age_ms]


def _opt(x: int | None) -> object:
    return "" if x is None else x


def _rate_args(r: Rate | None) -> list[object]:
    return ["", "", ""] if r is None else r.fields()


def _policy_args(p: Policy) -> list[object]:
    """ARGV for queue_policy.lua."""
    retry = p.retry or RetryPolicy()
    return [*_retention_args(p.succeeded), *_retention_args(p.dead), _opt(retry.max_attempts), *retry.fields(),
            _opt(p.keep_events), _opt(p.max_leased), *_rate_args(p.rate), _opt(p.group_max_leased),
            *_rate_args(p.group_rate)]


def run(redis: Commands, s: Script, k: QueueKeys, weight: int, *args: object):
    """Runs a queue script: every one takes the queue's KEYS and the same first four ARGV
    (queue_common.lua), then its own."""
    return s.run(redis, k.keys, [k.channel, k.finished, k.task_prefix, weight, k.group_prefix, k.group_ready_prefix,
                                 *args])


class Queues:
    """The queue primitive of one server process.

    ``priority_aging_ms`` 0 keeps priorities strict (higher first, then FIFO);
    otherwise each priority step counts as having waited that much longer, so a
    task of lower priority is served after at most (difference x aging) of waiting.
    ``retry_backoff_ms`` is the default first retry delay; it doubles per attempt
    up to an hour unless a queue's or a task's retry policy says otherwise.
    ``max_reply_bytes`` bounds what one dequeue leases (TaskRecord.reply_bytes), so
    a reply is never too large to send after its tasks were leased.
    """

    def __init__(self, redis: Commands, keyspace: KeySpace, doorbells: Doorbells, outcomes: Outcomes,
                 watch_bells: Doorbells, *, priority_aging_ms: int = 0, retry_backoff_ms: int = 1000,
                 max_reply_bytes: int = 4 * 1024 * 1024 - 64 * 1024) -> None:
        self._redis = redis
        self._keys = keyspace
        self._doorbells = doorbells
        self._outcomes = outcomes
        self._watch_bells = watch_bells  # broadcast: every watcher of a queue reads its new events
        self.weight = priority_aging_ms or STRICT
        self._backoff_ms = retry_backoff_ms
        self._max_reply_bytes = max_reply_bytes
        self._releaser = Releaser()

    def _run(self, s, k: QueueKeys, *args: object):
        return run(self._redis, s, k, self.weight, *args)

    async def enqueue(self, queue: str, tasks: Sequence[NewTask]) -> list[Enqueued]:
        """Adds all tasks atomically; a task whose dedupe key is taken names the first one."""
        k = self._keys.queue(queue)
        args: list[object] = [len(tasks)]
        for t in tasks:
            args += [t.type, t.payload, t.priority, -1 if t.delay_ms is None else t.delay_ms,
                     -1 if t.run_at_ms is None else t.run_at_ms, k.dedupe(t.dedupe_key) if t.dedupe_key else "",
                     t.dedupe_window_ms, t.max_attempts, *(t.retry or RetryPolicy()).fields(),
                     k.throttle(t.throttle_key) if t.throttle_key else "", t.throttle_ms,
                     k.debounce(t.debounce_key) if t.debounce_key else "", t.group]
        charged = await quotas.admit(self._redis, self._keys, queue, sum(len(t.payload) + len(t.type) for t in tasks))
        try:
            reply = await noting(self._run(_ENQUEUE, k, *args), self._redis, self._keys, "queue", [queue])
        except BaseException:
            await quotas.refund(self._redis, self._keys, queue, charged)
            raise
        return [Enqueued(task_id, how == 1, how == 2) for task_id, how in reply.added]

    async def dequeue(self, queues: Sequence[str], max_tasks: int, lease_ms: int, wait_ms: int) -> list[TaskRecord]:
        """Leases up to max_tasks ready tasks, from the queues in the order given,
        waiting up to wait_ms for one to become ready; [] if none did. A claim in
        flight when the wait is over hands its tasks back (see _claim)."""
        async with answer_within(max(wait_ms, 0)):
            return await self._dequeue(queues, max_tasks, lease_ms, wait_ms)

    async def _dequeue(self, queues: Sequence[str], max_tasks: int, lease_ms: int, wait_ms: int) -> list[TaskRecord]:
        tasks, rechecks, busy = await self._claim(queues, max_tasks, lease_ms)
        if not tasks and wait_ms > 0:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + wait_ms / 1000
            keys = [self._keys.queue(q) for q in queues]
            async with self._doorbells.watch([k.channel for k in keys]) as watch:
                while True:
                    watch.arm()
                    tasks, rechecks, busy = await self._claim(queues, max_tasks, lease_ms)
                    if tasks:
                        break
                    self._doorbells.after_claim(changes=self._changes(queues, rechecks))
                    left = deadline - loop.time()
                    if left <= 0 or not await watch.wait(left):
                        break
        # The claim's news for the other local waiters: ready tasks are left in `busy`
        # (the next waiter there claims them); when the clock next changes each queue,
        # and when these leases end if nobody settles them.
        changes = self._changes(queues, rechecks) + self._changes(sorted({t.queue for t in tasks}),
                                                                  [lease_ms] * len(tasks)) if tasks else []
        self._doorbells.after_claim(ready=busy, changes=changes)
        return tasks

    def _changes(self, queues: Sequence[str], ms_until_change: Sequence[int]) -> list[tuple[str, float]]:
        """(channel, seconds) for each queue whose next change by the clock is known (ms >= 0)."""
        return [(self._keys.queue(q).channel, ms / 1000) for q, ms in zip(queues, ms_until_change) if ms >= 0]

    async def _claim(self, queues: Sequence[str], max_tasks: int, lease_ms: int
                     ) -> tuple[list[TaskRecord], list[int], list[str]]:
        """One pass over the queues: (tasks leased, per queue ms until the clock
        changes it or -1, channels of queues with ready tasks left over).

        If the caller is cancelled while a claim is in flight, the tasks it leased
        are handed back at once (attempt not counted) rather than left to expire."""
        claim = asyncio.ensure_future(self._claim_pass(queues, max_tasks, lease_ms))
        try:
            return await asyncio.shield(claim)
        except asyncio.CancelledError:
            claim.add_done_callback(self._hand_back)
            raise

    async def _claim_pass(self, queues: Sequence[str], max_tasks: int, lease_ms: int
                          ) -> tuple[list[TaskRecord], list[int], list[str]]:
        tasks: list[TaskRecord] = []
        rechecks: list[int] = []
        busy: list[str] = []
        room = self._max_reply_bytes
        for queue in queues:
            if len(tasks) >= max_tasks:
                break
            k = self._keys.queue(queue)
            try:
                reply = await self._run(_DEQUEUE, k, max_tasks - len(tasks), lease_ms, secrets.token_hex(12),
                                        room, int(not tasks))
            except Exception as exc:
                if isinstance(exc, ReplicationTimeout) and exc.reply is not None:
                    # Leased on the primary but not confirmed by its replicas: nobody is told
                    # of these, so they go back at once, their attempt not counted.
                    for t in (_record(queue, f) for f in exc.reply.tasks):
                        self.let_go(t.queue, t.task_id, t.lease, count_attempt=False)
                if not tasks:
                    raise
                # What the earlier queues leased goes to the caller, not to nobody (it would
                # expire and cost an attempt); this queue's trouble shows on the next pass.
                break
            leased = [_record(queue, f) for f in reply.tasks]
            tasks += leased
            room -= sum(t.reply_bytes() for t in leased)
            rechecks.append(int(reply.next_change_ms))
            if reply.ready_left > 0 and reply.tasks:
                busy.append(k.channel)
        return tasks, rechecks, busy

    def _hand_back(self, claim: asyncio.Future[tuple[list[TaskRecord], list[int], list[str]]]) -> None:
        if claim.cancelled() or claim.exception() is not None:
            return
        for t in claim.result()[0]:
            self.let_go(t.queue, t.task_id, t.lease, count_attempt=False)

    async def _settle(self, queue: str, task_id: str, lease: str, action: str, ms: int = -1,
                      text: str | bytes = "", text2: str = "", retryable: bool = True) -> Outcome:
        (outcome,) = await self.settle_many(queue, [Settling(task_id, lease, action, ms, text, text2, retryable)])
        if isinstance(outcome, TaskLeaseNotHeld):
            raise outcome
        return outcome

    async def settle_many(self, queue: str, settles: Sequence[Settling]) -> list[Outcome | TaskLeaseNotHeld]:
        """Settles of one queue's tasks in one script call; each one's outcome, or
        TaskLeaseNotHeld for one whose lease no longer holds its task."""
        k = self._keys.queue(queue)
        args: list[object] = [self._backoff_ms, BACKOFF_CAP_MS, len(settles)]
        for x in settles:
            args += [x.task_id, x.lease, x.action, x.ms, x.text, x.text2, random.random(), int(x.retryable)]
        replies = await self._run(_SETTLE, k, *args)
        return [Outcome(r.state, r.at_ms) if r.status == HELD.HELD else
                TaskLeaseNotHeld(f"task {x.task_id!r} of queue {queue!r} is not leased with this lease "
                                 "(it expired, or the task was settled)", queue=queue, task_id=x.task_id)
                for x, r in zip(settles, replies)]

    async def ack(self, queue: str, task_id: str, lease: str, result: bytes = b"", result_type: str = "") -> None:
        """The task succeeded; its result is kept with it under the queue's retention."""
        await self._settle(queue, task_id, lease, "ack", -1, result, result_type)

    async def nack(self, queue: str, task_id: str, lease: str, retry_delay_ms: int | None, error: str,
                   retryable: bool = True) -> Outcome:
        """A failed attempt: retried after retry_delay_ms (None: the retry policy's
        backoff), or dead when out of attempts or not ``retryable``."""
        return await self._settle(queue, task_id, lease, "nack", -1 if retry_delay_ms is None else retry_delay_ms,
                                  error, retryable=retryable)

    async def extend(self, queue: str, task_id: str, lease: str, lease_ms: int) -> int:
        """The lease's new expiry (ms, Redis clock)."""
        return (await self._settle(queue, task_id, lease, "extend", lease_ms)).at_ms

    async def progress(self, queue: str, task_id: str, lease: str, value: float | None, json: str,
                       lease_ms: int | None) -> int:
        """Records the attempt's progress (and extends the lease when lease_ms is
        given); returns when the lease ends (ms, Redis clock)."""
        text = "" if value is None else repr(float(value))
        return (await self._settle(queue, task_id, lease, "progress", -1 if lease_ms is None else lease_ms,
                                   text, json)).at_ms

    async def release(self, queue: str, task_id: str, lease: str) -> None:
        """Hands the task back, ready at once, its attempt not counted."""
        await self._settle(queue, task_id, lease, "release")

    def let_go(self, queue: str, task_id: str, lease: str, *, count_attempt: bool, error: str = "") -> None:
        """Hands a task back in the background, retrying while Redis is unreachable
        (for up to an hour: past its lease the task comes back by itself anyway)."""

        async def give_back() -> None:
            try:
                await self._settle(queue, task_id, lease, "abandon" if count_attempt else "release", text=error)
            except TaskLeaseNotHeld:
                pass  # settled or expired meanwhile

        self._releaser.let_go(give_back, 3_600_000, f"task {task_id} of {queue}")

    async def names(self, page_token: str, count: int) -> tuple[list[str], str]:
        """A page of the queues that hold tasks in any state (listing.scan_names)."""
        return await scan_names(self._redis, self._keys, "queue", page_token, count)

    async def stats(self, queue: str) -> QueueStats:
        r = StatsReply._make(await self._run(_INSPECT, self._keys.queue(queue), "stats", 0, 0))
        return QueueStats(r.ready, r.delayed, r.leased, r.dead, max(0, r.oldest_ready_age_ms), r.paused == 1,
                          r.finished)

    async def get_task(self, queue: str, task_id: str) -> TaskRecord:
        """The task in any state; TaskNotFound once it is gone (after its retention)."""
        return (await self._look(queue, task_id))[1]

    async def _look(self, queue: str, task_id: str) -> tuple[int, TaskRecord]:
        """(Redis's now in ms, the task)."""
        reply = await self._run(_INSPECT, self._keys.queue(queue), "task", task_id, 0)
        if reply == 0:
            raise TaskNotFound(f"queue {queue!r} has no task {task_id!r}", queue=queue, task_id=task_id)
        r = TaskReply(*reply)
        return r.now_ms, _detail(queue, r.paused == 1, r.fields)

    async def wait_task(self, queue: str, task_id: str, wait_ms: int) -> tuple[bool, TaskRecord]:
        """(finished, the task) once it succeeded, died or was cancelled, or when
        wait_ms passed first. Woken by the script that finishes it (wakeups/outcomes.py);
        a leased task is looked at again when its lease ends, since only a script run
        then turns an expired last attempt into a dead task."""
        now_ms, task = await self._look(queue, task_id)
        if task.state in FINISHED or wait_ms <= 0:
            return task.state in FINISHED, task
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        async with self._outcomes.watch(self._keys.queue(queue).finished, task_id) as awaited:
            while True:
                awaited.arm()
                now_ms, task = await self._look(queue, task_id)
                left = deadline - loop.time()
                if task.state in FINISHED or left <= 0:
                    break
                timeout = left
                if task.lease_expires_ms is not None:  # + 1 ms: Redis's clock has whole ms
                    timeout = min(left, max(0, task.lease_expires_ms - now_ms + 1) / 1000)
                await awaited.wait(timeout)
        return task.state in FINISHED, task

    async def watch(self, queue: str, after: int | None, from_oldest: bool) -> AsyncIterator[QueueEvent]:
        """The queue's task events, in order, as they happen: after the event
        numbered ``after``, else every one kept (``from_oldest``), else those from
        now on. A GAP comes first wherever events the watcher had not seen were
        dropped (the queue keeps its latest; Redis lost its data). CAUGHT_UP comes
        once, when the events kept so far have all been sent."""
        k = self._keys.queue(queue)
        async with self._watch_bells.watch([k.events]) as bell:
            bell.arm()
            if after is None:
                cursor, check = 0 if from_oldest else (await self._run(_EVENTS, k, 0, 0)).last, False
            else:
                cursor, check = after, True
            caught_up = False
            while True:
                r = await self._run(_EVENTS, k, cursor, EVENTS_BATCH)
                if r.last < cursor:  # the numbers started again: Redis lost the queue's events
                    yield QueueEvent(0, GAP)
                    cursor = 0
                    continue
                if check and r.first_kept > cursor + 1:
                    yield QueueEvent(r.first_kept - 1, GAP)
                check = True
                for e in r.events:
                    event = _event(e)
                    cursor = event.position
                    yield event
                if len(r.events) < EVENTS_BATCH:
                    if not caught_up:
                        caught_up = True
                        yield QueueEvent(cursor, CAUGHT_UP)
                    await bell.wait(WATCH_WAIT)
                    bell.arm()

    async def task_events(self, queue: str, task_id: str, before: int, look: int, most: int
                          ) -> tuple[TaskEventsReply, list[QueueEvent]]:
        """One task's events from the queue's event stream (WatchQueue's), newest first:
        of at most ``look`` events (at most 1,000) numbered below ``before`` (0: from the
        newest), at most ``most`` (200) of the task's. Stops at the task's first event
        (enqueued): ``whole`` then says its history is all there; else ``go_on`` is where
        to look next, or 0 when older events were trimmed (the queue keeps its latest
        ``keep_events``). One script that writes nothing; the web console's read."""
        r = await self._run(_TASK_EVENTS, self._keys.queue(queue), task_id, before, look, most)
        return r, [_event([str(x) for x in e]) for e in r.events]

    async def set_policy(self, queue: str, policy: Policy) -> Policy:
        """Replaces the queue's policy; returns it with the defaults filled in."""
        return self._policy(await self._run(_POLICY, self._keys.queue(queue), *_policy_args(policy)))

    async def get_policy(self, queue: str) -> Policy:
        return self._policy(_policy_reply(await self._run(_INSPECT, self._keys.queue(queue), "policy", 0, 0)))

    def _policy(self, r: PolicyReply) -> Policy:
        """The reply with every default filled in, the server's backoff included."""
        retry = RetryPolicy(r.max_attempts, r.backoff or "exp", int(r.initial_ms or self._backoff_ms),
                            int(r.cap_ms or BACKOFF_CAP_MS), r.jitter == "1")
        qc, qr, qp, qb, gc, gr, gp, gb = r.flow
        return Policy(Retention(None if r.succeeded_count < 0 else r.succeeded_count, r.succeeded_age_ms),
                      Retention(None if r.dead_count < 0 else r.dead_count, r.dead_age_ms), retry, r.keep_events,
                      int(qc) if qc else None, Rate.parse(qr, qp, qb), int(gc) if gc else None, Rate.parse(gr, gp, gb))

    async def pause(self, queue: str, paused: bool, group: str = "") -> bool:
        """Pauses (True) or resumes (False) leasing of the queue, or of one group of it;
        returns whether it was paused. Resuming wakes the blocked Dequeues and Consume
        streams at once."""
        return await self._run(_PAUSE, self._keys.queue(queue), "1" if paused else "0", group) == 1

    async def set_group(self, queue: str, group: str, own: GroupRules) -> GroupInfo:
        """Replaces the group's own rules (None fields: the queue's for every group)."""
        r = await self._run(_GROUP, self._keys.queue(queue), "set", group, _opt(own.max_leased), _opt(own.weight),
                            *_rate_args(own.rate))
        return _group(r)

    async def get_group(self, queue: str, group: str) -> GroupInfo:
        return _group(await self._run(_GROUP, self._keys.queue(queue), "get", group))

    async def groups(self, queue: str, after: str, count: int) -> list[GroupInfo]:
        """A page of the queue's groups by name, after the one named ("": from the first)."""
        return [_group(r) for r in await self._run(_GROUP, self._keys.queue(queue), "list", after, count)]

    async def peek(self, queue: str, state: str, limit: int, offset: int = 0) -> list[TaskRecord]:
        """Up to limit tasks in one state, in that state's order (ready: Dequeue
        order; delayed: run-at; leased: expiry; dead: time of death), fewer if more
        would not fit in a reply (max_reply_bytes): the next page starts after them."""
        assert state in STATES
        reply = await self._run(_INSPECT, self._keys.queue(queue), state, offset, limit, self._max_reply_bytes)
        return [_record(queue, f) for f in reply]

    async def search(self, queue: str, query: SearchQuery, page_size: int, cursor: Cursor | None, *,
                     reply_bytes: int | None = None) -> SearchPage:
        """One page of a search (task_search.py): at most page_size matches, from no more
        than EXAMINE tasks looked at after the cursor (None: from the start), fewer if more
        would not fit in a reply (or in ``reply_bytes``, when smaller); ``next`` is None once
        the whole queue has been searched. A ready task of a paused queue is ``waiting``."""
        budget = self._max_reply_bytes if reply_bytes is None else min(reply_bytes, self._max_reply_bytes)
        r = await self._run(_SEARCH, self._keys.queue(queue), query.sets(), query.done_state(),
                            *(cursor.args() if cursor else START), *query.filters(), page_size, EXAMINE, READ_BYTES,
                            budget)
        tasks = [_record(queue, f) for f in r.tasks]
        if r.paused:
            tasks = [replace(t, state="waiting") if t.state == "ready" else t for t in tasks]
        cursor = Cursor(r.next_set, _text(r.next_score), _text(r.next_id)) if r.next_set else None
        return SearchPage(tasks, cursor, r.examined)

    async def cancel(self, queue: str, task_id: str) -> None:
        result = await self._run(_REMOVE, self._keys.queue(queue), "cancel", task_id)
        if result == CANCEL.NO_SUCH_TASK:
            raise TaskNotFound(f"queue {queue!r} has no task {task_id!r}", queue=queue, task_id=task_id)
        if result == CANCEL.LEASED:
            raise TaskLeased(f"task {task_id!r} is leased to a worker; it can be cancelled once settled",
                             queue=queue, task_id=task_id)
        if result == CANCEL.FINISHED:
            raise TaskFinished(f"task {task_id!r} of queue {queue!r} has finished already",
                               queue=queue, task_id=task_id)

    async def delete_dead(self, queue: str, task_ids: Sequence[str]) -> int:
        """Deletes the named tasks that are dead (as Cancel deletes a dead task); returns
        how many were. Ids of tasks in any other state, or gone, change nothing."""
        return (await self._run(_REMOVE, self._keys.queue(queue), "delete_dead", *task_ids)).deleted

    async def purge(self, queue: str, include_dead: bool) -> int:
        """Deletes ready and delayed (include_dead: also dead and retained finished)
        tasks, in batches so Redis never blocks for long; leased ones are left to their
        workers. An emptied queue keeps only its task counter and settings
        (lua/queue_remove.lua)."""
        k = self._keys.queue(queue)
        total = 0
        while True:
            r = await self._run(_REMOVE, k, "purge_with_dead" if include_dead else "purge", PURGE_BATCH)
            total += r.deleted
            if not r.more:
                return total

    async def retry_dead(self, queue: str, task_ids: Sequence[str], limit: int) -> int:
        return await self._run(_RETRY_DEAD, self._keys.queue(queue), limit, *task_ids)

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for background hand-backs to reach Redis; at shutdown."""
        await self._releaser.drain(timeout)

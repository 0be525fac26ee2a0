"""Every task state transition of the queue primitive against a pure-Python model.

A hypothesis state machine drives ``Queues`` (real Redis, no gRPC) with enqueue,
dequeue, ack, nack, release, extend, progress, settles with stale, foreign or made-up
leases, cancel, purge, retry_dead and pause/resume, and keeps its own model of every
task: ready | delayed | leased | dead | succeeded | cancelled, or gone (deleted).
After every step the server must agree with the model on each task, field by field
(GetTask), on the members of each state's set and the ready set's order (peek), and
on the counts (stats). A scripted walk drives the same machine through every
transition once, so each run checks them all whatever the random examples reach.

The rules modelled (lua/include/queue_common.lua, queue_settle.lua, queue_remove.lua,
queue_retry_dead.lua):

- dequeue leases in strict priority order, then by when the task became ready, then
  by task id (ready-zset score ties break on the member); nothing while paused; each
  lease counts an attempt; a ready task of a paused queue shows as "waiting";
- ack: succeeded, with exactly the result bytes and result type;
- nack: not retryable -> dead "not_retryable" (even on the last attempt); out of
  attempts -> dead "attempts"; else ready (delay 0) or delayed (an hour); the error
  replaces last_error when not empty (an empty one keeps the last);
- release: ready, the attempt not counted; extend and progress keep the lease
  (progress without lease_ms leaves its expiry alone); progress stays with the task
  across attempts and after it ends;
- a settle whose lease does not hold the task (stale, another task's, made up, the
  task gone) fails with TaskLeaseNotHeld and changes nothing;
- cancel: ready/delayed -> cancelled; leased -> TaskLeased; succeeded/cancelled ->
  TaskFinished; dead -> deleted, and TaskNotFound from then on;
- retry_dead: dead -> ready with attempt 0, dead_reason and finished time cleared,
  last_error kept; ids that are not dead are skipped; without ids, the oldest dead;
- purge deletes ready and delayed (and, asked to, dead and retained succeeded and
  cancelled) tasks; leased ones stay.

Time is kept out: leases are a minute or more, delays 0 or an hour, no sleeps; the
queue's retention has no count or age limit. The model borrows from the server only
each task's ready time and time of death as GetTask reports them, to order tasks
that became ready (died) in the same order the model counted; the model checks that
these times follow its own count.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from dataclasses import dataclass, field

import pytest
import uvloop
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

from concord_server.errors import TaskFinished, TaskLeased, TaskLeaseNotHeld, TaskNotFound
from concord_server.primitives.queue import NewTask, Policy, Queues, Retention, RetryPolicy
from support import queue_primitive

LEASE_MS = 60_000
HOUR_MS = 3_600_000
QUEUE_MAX_ATTEMPTS = 2  # the queue policy's, for tasks enqueued with max_attempts 0
SETTLES = ("ack", "nack", "release", "extend", "progress")
STATES = ("ready", "delayed", "leased", "dead")

MACHINE = settings(max_examples=25, stateful_step_count=30, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

PICK = st.integers(min_value=0, max_value=10_000)  # an index into a sorted list of candidates
# (priority, delay_ms, max_attempts, payload, type)
TASK_SPECS = st.tuples(st.integers(-2, 2), st.sampled_from([None, None, 0, HOUR_MS]), st.sampled_from([0, 1, 2, 3]),
                       st.binary(max_size=8), st.sampled_from(["a", "b"]))
# The arguments of each settle action besides the task and its lease.
SETTLE_ARGS = {
    "ack": st.fixed_dictionaries({"result": st.binary(max_size=64),
                                  "result_type": st.sampled_from(["", "text/plain", "application/octet-stream"])}),
    "nack": st.fixed_dictionaries({"retryable": st.booleans(), "delay_ms": st.sampled_from([0, HOUR_MS]),
                                   "error": st.sampled_from(["", "boom", "bad input", "ü\x00 multi\nline"])}),
    "release": st.fixed_dictionaries({}),
    "extend": st.fixed_dictionaries({"lease_ms": st.sampled_from([LEASE_MS, 2 * LEASE_MS])}),
    "progress": st.fixed_dictionaries({
        "value": st.none() | st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
        "json": st.sampled_from(["", '{"rows": 3}', "[1, 2]"]),
        "lease_ms": st.sampled_from([None, LEASE_MS])}),
}

# What the random examples of one run did, so that run can show it was not vacuous.
SEEN: Counter[str] = Counter()


@dataclass
class ModelTask:
    task_id: str
    type: str
    payload: bytes
    priority: int
    max_attempts: int
    state: str  # ready | delayed | leased | dead | succeeded | cancelled | gone
    attempt: int = 0
    lease: str = ""
    lease_expires_ms: int | None = None  # as the server last reported it (dequeue, extend, progress)
    ever_leased: bool = False
    last_error: str = ""
    dead_reason: str = ""
    result: bytes = b""
    result_type: str = ""
    progress: tuple[float | None, str] | None = None
    old_leases: list[str] = field(default_factory=list)
    seq: int = 0  # the model's count of "became ready" / "died" events, for FIFO and oldest-dead order
    # As GetTask reports them, recorded the first time they are seen:
    ready_ms: int | None = None
    died_ms: int | None = None

    def drop_lease(self) -> None:
        self.old_leases.append(self.lease)
        self.lease, self.lease_expires_ms = "", None


def has(*states: str):
    """Precondition: the model has a task in one of these states."""
    return precondition(lambda self: any(t.state in states for t in self.tasks.values()))


class QueueModel(RuleBasedStateMachine):
    queues: Queues  # set by the test: one primitive and event loop for all examples
    loop: asyncio.AbstractEventLoop

    def __init__(self) -> None:
        super().__init__()
        self.name = f"model:{uuid.uuid4().hex}"  # a queue of this example's own
        self.tasks: dict[str, ModelTask] = {}
        self.paused = False
        self.all_leases: set[str] = set()
        self.events = 0
        self.steps_since_purge = 0

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def refused(self, exc: type[Exception], coro) -> None:
        with pytest.raises(exc):
            self.run(coro)

    def look(self, task_id: str):
        """GetTask, or None when there is no such task."""
        try:
            return self.run(self.queues.get_task(self.name, task_id))
        except TaskNotFound:
            return None

    # -- the model's views -------------------------------------------------------------

    def in_state(self, *states: str) -> list[ModelTask]:
        return sorted((t for t in self.tasks.values() if t.state in states), key=lambda t: t.task_id)

    def pick(self, i: int, *states: str) -> ModelTask:
        candidates = self.in_state(*states)
        return candidates[i % len(candidates)]

    def pick_any(self, i: int) -> ModelTask:
        """A task in any state (deleted ones too): the state first, uniformly over those
        present, so the rare ones are met about as often as the common ones."""
        states = sorted({t.state for t in self.tasks.values()})
        return self.pick(i // 7, states[i % len(states)])

    def ready_order(self) -> list[ModelTask]:
        """Dequeue order: priority, then when it became ready, then id."""
        return sorted(self.in_state("ready"), key=lambda t: (-t.priority, t.ready_ms, t.task_id))

    def next_event(self) -> int:
        self.events += 1
        return self.events

    def become_ready(self, t: ModelTask) -> None:
        t.state, t.seq, t.ready_ms = "ready", self.next_event(), None

    def die(self, t: ModelTask, reason: str) -> None:
        t.state, t.dead_reason, t.seq, t.died_ms = "dead", reason, self.next_event(), None

    # -- the operations: call the server, assert its reply, update the model -----------

    def do_enqueue(self, specs) -> list[ModelTask]:
        new = [NewTask(ttype, payload, priority=prio, delay_ms=delay, max_attempts=max_att)
               for prio, delay, max_att, payload, ttype in specs]
        added = self.run(self.queues.enqueue(self.name, new))
        assert len(added) == len(new) and not any(a.duplicate for a in added)
        ids = [a.task_id for a in added]
        assert ids == sorted(ids) and not set(ids) & set(self.tasks), ids
        made = []
        for a, spec in zip(added, new):
            t = ModelTask(a.task_id, spec.type, spec.payload, spec.priority, spec.max_attempts or QUEUE_MAX_ATTEMPTS,
                          "delayed")
            if not spec.delay_ms:
                self.become_ready(t)
            self.tasks[t.task_id] = t
            made.append(t)
        return made

    def do_dequeue(self, n: int) -> list[ModelTask]:
        """The model's first n ready tasks are leased, unless the queue is paused."""
        got = self.run(self.queues.dequeue([self.name], n, LEASE_MS, 0))
        if self.paused:
            assert got == [], "a paused queue leased tasks"
            return []
        expected = self.ready_order()[:n]
        assert [r.task_id for r in got] == [t.task_id for t in expected], (
            "not the model's dequeue order", [(t.task_id, t.priority, t.ready_ms) for t in self.ready_order()])
        for r, t in zip(got, expected):
            assert (r.state, r.attempt, r.priority, r.payload, r.type) == (
                "leased", t.attempt + 1, t.priority, t.payload, t.type)
            assert r.lease and r.lease not in self.all_leases, "a lease token was handed out twice"
            assert r.lease_expires_ms is not None
            self.all_leases.add(r.lease)
            t.state, t.attempt, t.lease, t.lease_expires_ms = "leased", t.attempt + 1, r.lease, r.lease_expires_ms
            t.ever_leased, t.ready_ms = True, None
        return expected

    def do_settle(self, t: ModelTask, action: str, **kw) -> None:
        assert t.state == "leased"
        getattr(self, f"_{action}")(t, **kw)

    def _ack(self, t: ModelTask, result: bytes, result_type: str) -> None:
        self.run(self.queues.ack(self.name, t.task_id, t.lease, result, result_type))
        t.drop_lease()
        t.state, t.result, t.result_type = "succeeded", result, result_type

    def _nack(self, t: ModelTask, retryable: bool, delay_ms: int, error: str) -> None:
        outcome = self.run(self.queues.nack(self.name, t.task_id, t.lease, delay_ms, error, retryable=retryable))
        t.drop_lease()
        if error:
            t.last_error = error
        if not retryable:
            self.die(t, "not_retryable")
        elif t.attempt >= t.max_attempts:
            self.die(t, "attempts")
        elif delay_ms:
            t.state = "delayed"
        else:
            self.become_ready(t)
        assert outcome.state == t.state, (outcome, t)

    def _release(self, t: ModelTask) -> None:
        self.run(self.queues.release(self.name, t.task_id, t.lease))
        t.drop_lease()
        t.attempt -= 1
        self.become_ready(t)

    def _extend(self, t: ModelTask, lease_ms: int) -> None:
        t.lease_expires_ms = self.run(self.queues.extend(self.name, t.task_id, t.lease, lease_ms))

    def _progress(self, t: ModelTask, value: float | None, json: str, lease_ms: int | None) -> None:
        expires = self.run(self.queues.progress(self.name, t.task_id, t.lease, value, json, lease_ms))
        if lease_ms is None:
            assert expires == t.lease_expires_ms, "progress without lease_ms moved the lease"
        t.lease_expires_ms = expires
        t.progress = (value, json)

    def do_settle_not_held(self, t: ModelTask, action: str, which: str, i: int = 0) -> None:
        """A settle with a lease that does not hold t: refused, and t unchanged."""
        others = sorted(self.all_leases - {t.lease})
        if which == "stale" and t.old_leases:
            lease = t.old_leases[i % len(t.old_leases)]
        elif which == "foreign" and others:
            lease = others[i % len(others)]
        else:
            which, lease = "made up", (t.lease or "x") + "-forged"
        before = self.look(t.task_id)
        q, name, tid = self.queues, self.name, t.task_id
        call = {"ack": lambda: q.ack(name, tid, lease, b"nope", "text/plain"),
                "nack": lambda: q.nack(name, tid, lease, 0, "nope", retryable=False),
                "release": lambda: q.release(name, tid, lease),
                "extend": lambda: q.extend(name, tid, lease, 1),
                "progress": lambda: q.progress(name, tid, lease, 0.5, '"nope"', 1)}[action]
        self.refused(TaskLeaseNotHeld, call())
        assert self.look(t.task_id) == before, f"a refused {action} with a {which} lease changed the task"

    def do_cancel(self, t: ModelTask | None) -> None:
        """Cancel t (None: an id the queue never had)."""
        if t is None:
            self.refused(TaskNotFound, self.queues.cancel(self.name, "f" * 12))
        elif t.state in ("ready", "delayed"):
            self.run(self.queues.cancel(self.name, t.task_id))
            t.state, t.ready_ms = "cancelled", None
        elif t.state == "dead":
            self.run(self.queues.cancel(self.name, t.task_id))
            t.state = "gone"
        else:
            error = {"leased": TaskLeased, "succeeded": TaskFinished, "cancelled": TaskFinished,
                     "gone": TaskNotFound}[t.state]
            self.refused(error, self.queues.cancel(self.name, t.task_id))

    def do_retry_dead(self, chosen: list[ModelTask] | None, limit: int = 100) -> None:
        """retry_dead of these tasks (only the dead ones count), or (None) of the oldest dead."""
        if chosen is None:
            revived = sorted(self.in_state("dead"), key=lambda t: (t.died_ms, t.task_id))[:limit]
            ids = []
        else:
            revived = list({t.task_id: t for t in chosen if t.state == "dead"}.values())  # an id named twice counts once
            ids = sorted({t.task_id for t in chosen})
        assert self.run(self.queues.retry_dead(self.name, ids, limit)) == len(revived)
        for t in revived:
            t.attempt, t.dead_reason, t.died_ms = 0, "", None
            self.become_ready(t)

    def do_purge(self, include_dead: bool) -> None:
        doomed = self.in_state("ready", "delayed", *(("dead", "succeeded", "cancelled") if include_dead else ()))
        assert self.run(self.queues.purge(self.name, include_dead)) == len(doomed)
        for t in doomed:
            t.state = "gone"

    def do_pause(self, paused: bool) -> None:
        assert self.run(self.queues.pause(self.name, paused)) == self.paused, "pause's 'was paused' reply"
        self.paused = paused

    # -- rules ----------------------------------------------------------------------------

    def set_policy(self) -> None:
        """No retention limits, and the queue's own max attempts."""
        policy = self.run(self.queues.set_policy(self.name, Policy(
            succeeded=Retention(None, 0), dead=Retention(None, 0),
            retry=RetryPolicy(max_attempts=QUEUE_MAX_ATTEMPTS))))
        assert (policy.succeeded, policy.dead) == (Retention(None, 0), Retention(None, 0))
        assert policy.retry.max_attempts == QUEUE_MAX_ATTEMPTS

    @initialize(specs=st.lists(TASK_SPECS, min_size=1, max_size=5))
    def a_queue_with_tasks(self, specs) -> None:
        """Every example starts with tasks, so its steps reach past enqueue."""
        self.set_policy()
        self.do_enqueue(specs)

    @rule(specs=st.lists(TASK_SPECS, min_size=1, max_size=3))
    def enqueue(self, specs) -> None:
        self.do_enqueue(specs)

    @rule(n=st.integers(1, 3))
    def dequeue(self, n: int) -> None:
        SEEN["leased"] += len(self.do_dequeue(n))

    # One rule for every action on a held lease, and one that leases and settles at
    # once: swarm testing switches rules off per example, and fewer, fuller rules
    # leave the long chains (lease, die, cancel or retry) reachable more often.
    @has("leased")
    @rule(i=PICK, action=st.sampled_from(SETTLES), data=st.data())
    def settle(self, i: int, action: str, data) -> None:
        self.do_settle(self.pick(i, "leased"), action, **data.draw(SETTLE_ARGS[action], label=action))
        SEEN["settled"] += 1

    @rule(action=st.sampled_from(SETTLES), data=st.data())
    def work(self, action: str, data) -> None:
        """A worker's step: lease one task and settle it at once."""
        for t in self.do_dequeue(1):
            self.do_settle(t, action, **data.draw(SETTLE_ARGS[action], label=action))
            SEEN["settled"] += 1

    @precondition(lambda self: self.tasks)
    @rule(i=PICK, action=st.sampled_from(SETTLES), which=st.sampled_from(["stale", "foreign", "made up"]))
    def settle_with_a_lease_not_held(self, i: int, action: str, which: str) -> None:
        self.do_settle_not_held(self.pick_any(i), action, which, i)

    @rule(i=PICK, unknown=st.sampled_from([False, False, False, True]))
    def cancel(self, i: int, unknown: bool) -> None:
        t = None if unknown or not self.tasks else self.pick_any(i)
        SEEN[f"cancel {t.state if t else 'unknown'}"] += 1
        self.do_cancel(t)

    @precondition(lambda self: self.tasks)
    @rule(by_id=st.booleans(), picks=st.lists(PICK, min_size=1, max_size=3), limit=st.integers(1, 4))
    def retry_dead(self, by_id: bool, picks: list[int], limit: int) -> None:
        self.do_retry_dead([self.pick_any(i) for i in picks] if by_id else None, limit)

    @precondition(lambda self: self.steps_since_purge >= 10)
    @rule(include_dead=st.booleans())
    def purge(self, include_dead: bool) -> None:
        """Only now and then: a purge empties the queue, and the chains need tasks."""
        self.steps_since_purge = 0
        self.do_purge(include_dead)

    @rule(paused=st.booleans())
    def pause(self, paused: bool) -> None:
        self.do_pause(paused)

    # -- the server agrees ----------------------------------------------------------------

    async def _snapshot(self):
        async def get(tid):
            try:
                return await self.queues.get_task(self.name, tid)
            except TaskNotFound:
                return None

        ids = sorted(self.tasks)
        records = await asyncio.gather(*(get(tid) for tid in ids))
        peeks = await asyncio.gather(*(self.queues.peek(self.name, s, 1000) for s in STATES))
        return dict(zip(ids, records)), dict(zip(STATES, peeks)), await self.queues.stats(self.name)

    @invariant()
    def server_agrees_with_the_model(self) -> None:
        self.steps_since_purge += 1
        records, peeks, stats = self.run(self._snapshot())
        for tid, t in self.tasks.items():
            self.check_task(t, records[tid])
        for state, times in (("ready", "ready_ms"), ("dead", "died_ms")):
            in_order = [getattr(t, times) for t in sorted(self.in_state(state), key=lambda t: t.seq)]
            assert in_order == sorted(in_order), f"{times} out of the order the tasks became {state}"
        assert [r.task_id for r in peeks["ready"]] == [t.task_id for t in self.ready_order()], "ready order"
        for state in ("delayed", "leased", "dead"):
            assert sorted(r.task_id for r in peeks[state]) == [t.task_id for t in self.in_state(state)], state
        n = Counter(t.state for t in self.tasks.values())
        assert (stats.ready, stats.delayed, stats.leased, stats.dead, stats.finished, stats.paused) == (
            n["ready"], n["delayed"], n["leased"], n["dead"], n["succeeded"] + n["cancelled"], self.paused), (stats, n)
        if not n["ready"]:
            assert stats.oldest_ready_age_ms == 0

    def check_task(self, t: ModelTask, r) -> None:
        if t.state == "gone":
            assert r is None, f"deleted task {t.task_id} is still there: {r}"
            return
        assert r is not None, f"task {t.task_id} ({t.state}) is gone"
        progress = None if r.progress is None else (r.progress.value, r.progress.json)
        got = (r.state, r.attempt, r.max_attempts, r.priority, r.type, r.payload, r.lease, r.lease_expires_ms,
               r.last_error, r.dead_reason, r.result, r.result_type, progress, r.leased_ms is not None,
               r.finished_ms is not None)
        want = ("waiting" if t.state == "ready" and self.paused else t.state, t.attempt, t.max_attempts, t.priority,
                t.type, t.payload, t.lease, t.lease_expires_ms, t.last_error, t.dead_reason, t.result, t.result_type,
                t.progress, t.ever_leased, t.state in ("dead", "succeeded", "cancelled"))
        assert got == want, f"task {t.task_id}:\n server {got}\n model  {want}"
        if t.state == "ready":
            t.ready_ms = t.ready_ms or r.ready_ms
            assert r.ready_ms == t.ready_ms, "a ready task's ready time moved"
        if t.state == "dead":
            t.died_ms = t.died_ms or r.finished_ms
            assert r.finished_ms == t.died_ms, "a dead task's time of death moved"


@contextlib.contextmanager
def bound_machine(url: str):
    """QueueModel with a Queues primitive on its own event loop (uvloop, as the server)."""
    loop = uvloop.new_event_loop()
    stack = contextlib.AsyncExitStack()
    try:
        QueueModel.loop = loop
        QueueModel.queues = loop.run_until_complete(stack.enter_async_context(queue_primitive(url)))
        yield QueueModel
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()
        with contextlib.suppress(AttributeError):
            del QueueModel.loop, QueueModel.queues


def test_queue_matches_the_model(redis_server):
    SEEN.clear()
    with bound_machine(redis_server.url) as machine:
        run_state_machine_as_test(machine, settings=MACHINE)
    # Not vacuous: the examples leased, settled and cancelled tasks.
    assert SEEN["leased"] and SEEN["settled"] and SEEN["cancel ready"] + SEEN["cancel delayed"], SEEN


def test_a_walk_through_every_transition(redis_server):
    """The same machine, model and checks, driven through each transition in turn."""
    with bound_machine(redis_server.url) as machine:
        m = machine()

        def do(f, *args, **kw):
            out = f(*args, **kw)
            m.server_agrees_with_the_model()  # the invariant hypothesis checks after each rule
            return out

        def enqueue(*specs):
            return do(m.do_enqueue, [(p, d, a, b"payload", "t") for p, d, a in specs])

        try:
            do(m.set_policy)
            a, b, c, d = enqueue((0, None, 3), (2, None, 3), (0, HOUR_MS, 3), (0, 0, 1))
            e, = enqueue((0, None, 0))
            assert e.max_attempts == QUEUE_MAX_ATTEMPTS
            # Priority first, then FIFO.
            assert do(m.do_dequeue, 1) == [b]
            do(m.do_settle, b, "progress", value=0.5, json='{"rows": 3}', lease_ms=None)
            do(m.do_settle, b, "ack", result=bytes(range(256)), result_type="application/octet-stream")
            do(m.do_cancel, b)  # succeeded: TaskFinished
            assert do(m.do_dequeue, 3) == [a, d, e]
            do(m.do_cancel, a)  # leased: TaskLeased
            do(m.do_settle, a, "extend", lease_ms=2 * LEASE_MS)
            do(m.do_settle, a, "progress", value=None, json="[1]", lease_ms=LEASE_MS)
            do(m.do_settle, a, "release")  # attempt not counted, progress kept
            for action in SETTLES:
                do(m.do_settle_not_held, a, action, "stale")
                do(m.do_settle_not_held, e, action, "foreign")
                do(m.do_settle_not_held, e, action, "made up")
            do(m.do_settle, d, "nack", retryable=True, delay_ms=0, error="first")  # max 1: dead, attempts
            assert (d.state, d.dead_reason) == ("dead", "attempts")
            do(m.do_settle, e, "nack", retryable=True, delay_ms=0, error="boom")  # ready, attempt kept
            assert do(m.do_dequeue, 2) == [a, e]  # a was ready first
            do(m.do_settle, e, "nack", retryable=True, delay_ms=0, error="")  # out of attempts; the last error kept
            assert (e.state, e.dead_reason, e.last_error, e.attempt) == ("dead", "attempts", "boom", 2)
            do(m.do_settle, a, "nack", retryable=False, delay_ms=0, error="nope")
            assert (a.state, a.dead_reason, a.last_error) == ("dead", "not_retryable", "nope")
            do(m.do_retry_dead, [a, e, c, b])  # the dead ones: a and e
            assert do(m.do_dequeue, 2) == [a, e]  # ready in the same ms: by id
            do(m.do_settle, a, "nack", retryable=True, delay_ms=0, error="again")  # ready, attempt kept
            do(m.do_settle, e, "nack", retryable=True, delay_ms=HOUR_MS, error="later")  # delayed
            assert (a.state, a.attempt, e.state) == ("ready", 1, "delayed")
            do(m.do_pause, True)
            assert do(m.do_dequeue, 3) == []
            do(m.do_cancel, a)  # waiting -> cancelled
            do(m.do_cancel, a)  # cancelled: TaskFinished
            do(m.do_pause, True)
            do(m.do_pause, False)
            f, g = enqueue((1, None, 1), (1, None, 1))
            assert do(m.do_dequeue, 2) == [f, g]
            do(m.do_settle, f, "nack", retryable=False, delay_ms=0, error="out")  # not retryable wins
            do(m.do_settle, g, "nack", retryable=True, delay_ms=0, error="out")
            assert (f.dead_reason, g.dead_reason) == ("not_retryable", "attempts")
            do(m.do_retry_dead, None, 2)  # the oldest two: d, then f
            assert (d.state, f.state, g.state) == ("ready", "ready", "dead")
            do(m.do_cancel, g)  # dead: deleted
            do(m.do_cancel, g)  # gone: TaskNotFound
            do(m.do_settle_not_held, g, "ack", "stale")
            do(m.do_cancel, None)
            do(m.do_cancel, c)  # delayed -> cancelled
            h, = enqueue((0, None, 1))
            assert do(m.do_dequeue, 1) == [f]  # priority 1 over the older d
            do(m.do_settle, f, "nack", retryable=True, delay_ms=0, error="x")  # dead again
            assert do(m.do_dequeue, 1) == [d]  # ready before h
            do(m.do_purge, False)  # ready and delayed go; leased and dead stay
            assert (h.state, e.state, d.state, f.state) == ("gone", "gone", "leased", "dead")
            assert {t.state for t in m.tasks.values()} >= {"succeeded", "cancelled"}
            do(m.do_purge, True)  # dead and retained finished ones go too
            assert f.state == "gone" and {t.state for t in m.tasks.values()} == {"leased", "gone"}
            do(m.do_settle, d, "ack", result=b"", result_type="")
            assert {t.state for t in m.tasks.values()} == {"succeeded", "gone"}
        finally:
            m.teardown()

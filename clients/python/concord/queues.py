"""Task queues for the Python client.

    emails = client.queue("email")
    emails.put("send_welcome", {"to": "ada@example.com"}, delay=60)

    for task in emails.get(max_tasks=10, timeout=5):   # leased to you for lease_ttl
        send(task.json())
        task.ack()                                     # or task.nack("why"), task.release()

``client.dequeue(["high", "low"], ...)`` takes from several queues, strictly in the
order given. A task not acked before its lease runs out (the worker died) comes back
for another attempt; failed attempts are retried with exponential backoff and, out
of attempts, dead-lettered (``queue.dead()``, ``queue.retry_dead()``). For a
long-running consumer use :class:`concord.Worker`, or ``queue.consume()`` for a
stream of tasks pushed by the server.

``emails.schedule("digest", cron="0 8 * * *", tz="Europe/Berlin")`` enqueues a
"digest" task every day at 08:00 Berlin time, once per tick however many servers
run (``update_schedule``, ``pause_schedule``, ``resume_schedule``,
``delete_schedule``, ``get_schedule``, ``schedules``).

``get(timeout=...)`` rides out a Redis outage shorter than its timeout, and the
settling calls and reads retry too; ``put`` retries only with a ``dedupe_key``
(see concord._retry).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


from ._resume import AsyncResuming, Resuming
from ._coalesce import AsyncCoalescer, Coalescer
from ._convert import duration, seconds, when
from .consume import AsyncConsumer, Consumer
from .queue.v1 import queue_pb2 as pb
from .tasks import (STATE_NAMES, STATE_VALUES, WAIT_REASONS, Progress, Task, _maybe_when, encode_result, task_from,
                    truncate_error)


def encode_payload(payload: Any) -> bytes:
    """bytes go as they are, str as UTF-8, anything else as JSON."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return bytes(payload)
    if isinstance(payload, str):
        return payload.encode()
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class NewTask:
    """A task to enqueue with :meth:`Queue.put_many` (same fields as ``put``)."""

    type: str
    payload: Any = b""
    priority: int = 0
    delay: float | None = None
    run_at: datetime | None = None
    dedupe_key: str = ""
    dedupe_window: float | None = None
    max_attempts: int | None = None
    retry: RetryPolicy | None = None  # overrides the queue's retry policy, field by field
    throttle_key: str = ""  # at most one task per key accepted each throttle_period (seconds)
    throttle_period: float | None = None
    debounce_key: str = ""  # a pending task with this key takes this one's payload and delay
    group: str = ""  # groups take turns, each under its own cap, rate and pause

    def message(self) -> pb.NewTask:
        m = pb.NewTask(type=self.type, payload=encode_payload(self.payload), priority=self.priority,
                       dedupe_key=self.dedupe_key, max_attempts=self.max_attempts or 0,
                       throttle_key=self.throttle_key, debounce_key=self.debounce_key, group=self.group)
        if self.throttle_period is not None:
            m.throttle_period.CopyFrom(duration(self.throttle_period))
        if self.retry is not None:
            m.retry.CopyFrom(self.retry.message())
        if self.delay is not None:
            m.delay.CopyFrom(duration(self.delay))
        if self.run_at is not None:
            m.run_at.FromDatetime(self.run_at)
        if self.dedupe_window is not None:
            m.dedupe_window.CopyFrom(duration(self.dedupe_window))
        return m


@dataclass(frozen=True)
class Enqueued:
    task_id: str
    duplicate: bool  # the dedupe or throttle key matched: task_id is the first task's
    debounced: bool = False  # a pending task with the debounce key (task_id) took this one's place


@dataclass(frozen=True)
class QueueStats:
    ready: int
    delayed: int
    leased: int
    dead: int
    oldest_ready_age: float  # seconds the longest-waiting ready task has waited
    paused: bool = False  # pause() was called and resume() not since
    finished: int = 0  # succeeded and cancelled tasks the retention keeps


@dataclass(frozen=True)
class Retention:
    """How many finished tasks a queue keeps (None: no limit; 0: none) and for how
    many seconds each (None: no limit)."""

    max_count: int | None = None
    max_age: float | None = None

    def message(self) -> pb.Retention:
        m = pb.Retention()
        if self.max_count is not None:
            m.max_count = self.max_count
        if self.max_age:
            m.max_age.CopyFrom(duration(self.max_age))
        return m

    @staticmethod
    def of(m: pb.Retention) -> Retention:
        return Retention(m.max_count if m.HasField("max_count") else None,
                         seconds(m.max_age) if m.HasField("max_age") else None)


_BACKOFFS = {"fixed": pb.BACKOFF_FIXED, "exponential": pb.BACKOFF_EXPONENTIAL}


@dataclass(frozen=True)
class RetryPolicy:
    """How failed attempts are retried. None fields take the queue's policy, then
    the defaults: 3 attempts, exponential from the server's --queue-retry-backoff,
    at most max_delay (an hour), no jitter. Delays in seconds."""

    max_attempts: int | None = None
    backoff: str | None = None  # "fixed" or "exponential"
    initial_delay: float | None = None
    max_delay: float | None = None
    jitter: bool | None = None  # full jitter: each delay drawn from [0, delay]

    def message(self) -> pb.RetryPolicy:
        if self.backoff is not None and self.backoff not in _BACKOFFS:
            raise ValueError(f"backoff must be one of {sorted(_BACKOFFS)}")
        m = pb.RetryPolicy(max_attempts=self.max_attempts or 0, backoff=_BACKOFFS.get(self.backoff or "", 0))
        if self.initial_delay is not None:
            m.initial_delay.CopyFrom(duration(self.initial_delay))
        if self.max_delay is not None:
            m.max_delay.CopyFrom(duration(self.max_delay))
        if self.jitter is not None:
            m.jitter = self.jitter
        return m

    @staticmethod
    def of(m: pb.RetryPolicy) -> RetryPolicy:
        names = {v: k for k, v in _BACKOFFS.items()}
        return RetryPolicy(m.max_attempts or None, names.get(m.backoff),
                           seconds(m.initial_delay) if m.HasField("initial_delay") else None,
                           seconds(m.max_delay) if m.HasField("max_delay") else None,
                           m.jitter if m.HasField("jitter") else None)


@dataclass(frozen=True)
class LeaseRate:
    """At most ``limit`` leases each ``per`` seconds, ``burst`` (default: limit) at once."""

    limit: int
    per: float = 1.0
    burst: int | None = None

    def message(self) -> pb.LeaseRate:
        return pb.LeaseRate(limit=self.limit, period=duration(self.per), burst=self.burst or 0)

    @staticmethod
    def of(parent: Any, name: str) -> LeaseRate | None:
        if not parent.HasField(name):
            return None
        m = getattr(parent, name)
        return LeaseRate(m.limit, seconds(m.period), m.burst)


@dataclass(frozen=True)
class QueuePolicy:
    """A queue's settings (set_policy: None takes the server's default, or no limit)."""

    succeeded: Retention | None = None  # succeeded and cancelled tasks; default 1000 for 24 h
    dead: Retention | None = None  # default: all, until retried, cancelled or purged
    retry: RetryPolicy | None = None  # for tasks that do not set their own
    max_leased: int | None = None  # tasks leased at once, across all workers
    rate: LeaseRate | None = None  # leases of the whole queue
    group_max_leased: int | None = None  # each group's, unless it sets its own (set_group)
    group_rate: LeaseRate | None = None

    @staticmethod
    def of(m: pb.QueuePolicy) -> QueuePolicy:
        return QueuePolicy(Retention.of(m.succeeded), Retention.of(m.dead), RetryPolicy.of(m.retry),
                           m.max_leased if m.HasField("max_leased") else None, LeaseRate.of(m, "rate"),
                           m.group_max_leased if m.HasField("group_max_leased") else None,
                           LeaseRate.of(m, "group_rate"))


@dataclass(frozen=True)
class Group:
    """A group of a queue's tasks: its counts, its own rules (None: the queue's), the
    rules in force, and what holds its ready tasks back ("" nothing)."""

    name: str
    ready: int
    leased: int
    paused: bool
    max_leased: int | None  # in force (None: no cap)
    weight: int
    rate: LeaseRate | None  # in force
    own_max_leased: int | None
    own_rate: LeaseRate | None
    wait_reason: str

    @staticmethod
    def of(m: pb.Group) -> Group:
        e, own = m.effective, m.own
        return Group(m.name, m.ready, m.leased, m.paused, e.max_leased if e.HasField("max_leased") else None,
                     e.weight or 1, LeaseRate.of(e, "rate"), own.max_leased if own.HasField("max_leased") else None,
                     LeaseRate.of(own, "rate"), WAIT_REASONS.get(m.wait_reason, ""))


SCHEDULES_PAGE = 1000  # schedules() reads them this many at a time
_MISSED = {"once": pb.MISSED_TICKS_RUN_ONCE, "skip": pb.MISSED_TICKS_SKIP}
_MISSED_NAMES = {pb.MISSED_TICKS_UNSPECIFIED: "once", **{v: k for k, v in _MISSED.items()}}


def _secs(value: float | timedelta) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


def schedule_spec(name: str, cron: str | None, every: float | timedelta | None, tz: str | None,
                  start_at: datetime | None, type: str | None, payload: Any, priority: int, max_attempts: int,
                  missed: str, grace: float | timedelta | None) -> pb.ScheduleSpec:
    """A ScheduleSpec from Queue.schedule's arguments (type None: the schedule's name;
    payload as put() encodes it). The server validates the values."""
    if (cron is None) == (every is None):
        raise ValueError("a schedule needs one of cron and every")
    if missed not in _MISSED:
        raise ValueError(f"missed must be one of {sorted(_MISSED)}")
    m = pb.ScheduleSpec(type=name if type is None else type, payload=encode_payload(payload), priority=priority,
                        max_attempts=max_attempts or 0, missed=_MISSED[missed])
    if cron is not None:
        m.cron = cron
        m.time_zone = tz or "UTC"
    else:
        assert every is not None
        m.every.CopyFrom(duration(_secs(every)))
        if tz and tz != "UTC":
            m.time_zone = tz  # the server refuses it: a time zone is for cron expressions
    if start_at is not None:
        m.start_at.FromDatetime(start_at)
    if grace is not None:
        m.grace.CopyFrom(duration(_secs(grace)))
    return m


@dataclass(frozen=True)
class Schedule:
    """A queue's recurring schedule: each tick enqueues one task of ``type`` with
    ``payload``. Times are aware datetimes (UTC), durations seconds."""

    queue: str
    name: str
    cron: str | None  # the cron expression; None for an interval
    every: float | None  # seconds between ticks; None for a cron expression
    tz: str | None  # the cron expression's time zone (IANA); None for an interval
    start_at: datetime | None  # intervals: the tick the others follow every interval
    type: str
    payload: bytes
    priority: int
    max_attempts: int  # 0: the queue's retry policy
    missed: str  # ticks missed beyond the grace: "once" (one run for all) or "skip"
    grace: float  # seconds a tick may be late and still run as itself
    paused: bool
    next_run_at: datetime | None  # None while paused
    last_run_at: datetime | None  # the tick of the last task it enqueued ...
    last_task_id: str  # ... and that task
    runs: int  # tasks it has enqueued
    last_missed_at: datetime | None  # the latest tick missed (dropped, or rolled into one run)
    created_at: datetime
    updated_at: datetime
    version: int  # bumped by every change

    @property
    def when(self) -> str:
        """How it ticks, for people: the cron expression and its time zone, or the interval."""
        return f"{self.cron} ({self.tz})" if self.cron is not None else f"every {self.every:g}s"

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    @staticmethod
    def of(m: pb.Schedule) -> Schedule:
        spec = m.spec
        cron = spec.cron if spec.WhichOneof("timing") == "cron" else None
        return Schedule(m.queue, m.name, cron, seconds(spec.every) if spec.HasField("every") else None,
                        (spec.time_zone or "UTC") if cron is not None else None, _maybe_when(spec, "start_at"),
                        spec.type, spec.payload, spec.priority, spec.max_attempts,
                        _MISSED_NAMES.get(spec.missed, "once"), seconds(spec.grace), m.paused,
                        _maybe_when(m, "next_run_at"), _maybe_when(m, "last_run_at"), m.last_task_id, m.runs,
                        _maybe_when(m, "last_missed_at"), when(m.created_at), when(m.updated_at), m.version)


@dataclass(frozen=True)
class SearchPage:
    """One page of ``queue.search(...)``: the matches, and where to go on (``next_page_token``,
    empty once the whole queue was searched). A page may hold few tasks, or none, while
    the search goes on: the server looks at a bounded number of tasks per call."""

    tasks: list[Task]
    next_page_token: str
    examined: int


def _search_request(queue: str, task_id: str, type: str, type_prefix: str, states: Iterable[str], error: str,
                    payload: bytes | str, page_size: int, page_token: str) -> pb.SearchTasksRequest:
    return pb.SearchTasksRequest(queue=queue, task_id=task_id, type=type, type_prefix=type_prefix,
                                 states=[STATE_VALUES[s] for s in states], error_contains=error,
                                 payload_contains=payload.encode() if isinstance(payload, str) else payload,
                                 page_size=page_size, page_token=page_token)


def _search_page(r: pb.SearchTasksResponse) -> SearchPage:
    return SearchPage([task_from(t, None) for t in r.tasks], r.next_page_token, r.examined)


def _unique(found: list[Schedule]) -> list[Schedule]:
    """ListSchedules pages by position in next-tick order, which ticks change between
    pages: a schedule may come twice; the first is kept."""
    seen: set[str] = set()
    return [s for s in found if not (s.name in seen or seen.add(s.name))]


class _Handle(str):
    """A task's id (a str, as put returned before) bound to its queue."""

    def __new__(cls, task_id: str, queue: Any) -> Any:
        handle = super().__new__(cls, task_id)
        handle.queue = queue
        return handle

    @property
    def task_id(self) -> str:
        return str(self)


class TaskHandle(_Handle):
    """What ``Queue.put`` returns: the task's id that can also wait for its outcome."""

    queue: Queue

    def result(self, timeout: float | None = None) -> Any:
        """Waits (None: forever) for the task to finish and returns its result as
        ``Task.value()`` decodes it; TaskFailed if it died or was cancelled,
        TimeoutError if it had not finished in time."""
        return self.queue.wait_task(self, timeout).outcome()

    def info(self) -> Task:
        """The task now (queue.get_task)."""
        return self.queue.get_task(self)


class AsyncTaskHandle(_Handle):
    """TaskHandle for an AsyncQueue: ``await handle.result(timeout)``."""

    queue: AsyncQueue

    async def result(self, timeout: float | None = None) -> Any:
        return (await self.queue.wait_task(self, timeout)).outcome()

    async def info(self) -> Task:
        return await self.queue.get_task(self)


@dataclass(frozen=True)
class NackResult:
    state: str  # "ready" or "delayed" (to be retried) or "dead"
    retry_at: datetime


def dequeue_request(queues: Sequence[str], max_tasks: int, lease_ttl: float, wait: float) -> pb.DequeueRequest:
    return pb.DequeueRequest(queues=list(queues), max_tasks=max_tasks, lease_ttl=duration(lease_ttl),
                             wait_timeout=duration(wait))


def _nack_request(task: Task, error: str, retry_delay: float | None, retryable: bool) -> pb.NackRequest:
    r = pb.NackRequest(queue=task.queue, task_id=task.task_id, lease=task.lease, error=truncate_error(error))
    if retry_delay is not None:
        r.retry_delay.CopyFrom(duration(retry_delay))
    if not retryable:
        r.retryable = False
    return r


class _QueueBase:
    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self._rpc = client._service("queue")
        self.name = name

    def _enqueue(self, tasks: Iterable[NewTask]) -> tuple[Any, pb.EnqueueRequest]:
        """The request, and the client method to send it with: retried only when
        every task has a dedupe, throttle or debounce key, so that a repeat cannot add
        a second task (it names the first, or takes its place again)."""
        request = pb.EnqueueRequest(queue=self.name, tasks=[t.message() for t in tasks])
        safe = all(t.dedupe_key or t.throttle_key or t.debounce_key for t in request.tasks)
        return (self._rpc.call_safe if safe else self._rpc.call), request

    def _settle(self, task: Task) -> dict[str, str]:
        return {"queue": task.queue, "task_id": task.task_id, "lease": task.lease}

    def _ack_request(self, task: Task, result: Any) -> pb.AckRequest:
        data, kind = encode_result(result)
        return pb.AckRequest(**self._settle(task), result=data, result_type=kind)

    def _progress_request(self, task: Task, value: float | None, data: Any,
                          lease_ttl: float | None) -> pb.ReportProgressRequest:
        r = pb.ReportProgressRequest(**self._settle(task),
                                     json="" if data is None else json.dumps(data, separators=(",", ":")))
        if value is not None:
            r.value = value
        if lease_ttl is not None:
            r.lease_ttl.CopyFrom(duration(lease_ttl))
        return r

    def _task_request(self, task_id: str) -> pb.GetTaskRequest:
        return pb.GetTaskRequest(queue=self.name, task_id=task_id)

    def _wait_args(self, task_id: str, timeout: float | None) -> tuple[Any, ...]:
        """Service.wait_for's arguments for WaitTask: done once the task finished."""
        def request(wait: float) -> pb.WaitTaskRequest:
            return pb.WaitTaskRequest(queue=self.name, task_id=task_id, wait_timeout=duration(wait))

        return "WaitTask", request, timeout, lambda r: task_from(r.task, None) if r.finished else None

    def _policy_request(self, succeeded: Retention | None, dead: Retention | None, retry: RetryPolicy | None,
                        max_leased: int | None = None, rate: LeaseRate | None = None,
                        group_max_leased: int | None = None,
                        group_rate: LeaseRate | None = None) -> pb.SetQueuePolicyRequest:
        policy = pb.QueuePolicy(max_leased=max_leased, group_max_leased=group_max_leased)
        for field, value in (("succeeded", succeeded), ("dead", dead), ("retry", retry), ("rate", rate),
                             ("group_rate", group_rate)):
            if value is not None:
                getattr(policy, field).CopyFrom(value.message())
        return pb.SetQueuePolicyRequest(queue=self.name, policy=policy)

    def _group_request(self, group: str, max_leased: int | None, weight: int | None,
                       rate: LeaseRate | None) -> pb.SetGroupRulesRequest:
        rules = pb.GroupRules(max_leased=max_leased, weight=weight, rate=None if rate is None else rate.message())
        return pb.SetGroupRulesRequest(queue=self.name, group=group, rules=rules)

    def _peek_request(self, state: str, limit: int) -> pb.PeekRequest:
        return pb.PeekRequest(queue=self.name, state=STATE_VALUES[state], limit=limit)

    def _create_schedule(self, name: str, paused: bool, spec: pb.ScheduleSpec) -> pb.CreateScheduleRequest:
        return pb.CreateScheduleRequest(queue=self.name, name=name, spec=spec, paused=paused)

    def _update_schedule(self, name: str, paused: bool | None, spec: pb.ScheduleSpec) -> pb.UpdateScheduleRequest:
        r = pb.UpdateScheduleRequest(queue=self.name, name=name, spec=spec)
        if paused is not None:
            r.paused = paused
        return r

    def _named(self, request_type: Any, name: str) -> Any:
        return request_type(queue=self.name, name=name)

    def _schedules_page(self, token: str) -> pb.ListSchedulesRequest:
        return pb.ListSchedulesRequest(queue=self.name, page_size=SCHEDULES_PAGE, page_token=token)

    @staticmethod
    def _stats(r: pb.StatsResponse) -> QueueStats:
        return QueueStats(r.ready, r.delayed, r.leased, r.dead, seconds(r.oldest_ready_age), r.paused, r.finished)


class Queue(_QueueBase):
    """A queue name on a synchronous :class:`~concord.Client`."""

    def put(self, type: str, payload: Any = b"", **options: Any) -> TaskHandle:
        """Enqueues one task and returns its id (the first task's id when its
        dedupe_key matched) as a TaskHandle: ``handle.result(timeout)`` waits for
        its outcome. Options: priority (-1000..1000, higher first), delay (seconds)
        or run_at (datetime), dedupe_key, dedupe_window (seconds), throttle_key with
        throttle_period (seconds: at most one task per key accepted each period; the
        others name it), debounce_key (with a delay: while the task with this key is
        pending, a new put replaces its payload and pushes its run time back, and
        names it), max_attempts (default: the queue's, 3), retry (a RetryPolicy). payload: bytes, str, or
        anything JSON can encode. Puts from many threads at once share Enqueue calls
        (concord._coalesce): each still gets its own id, or its own error."""
        enqueuer = self.client._enqueuers.get(self.name) or self.client._enqueuers.setdefault(
            self.name, Coalescer(self.put_many))
        return TaskHandle(enqueuer.submit(NewTask(type, payload, **options)).task_id, self)

    def put_many(self, tasks: Iterable[NewTask]) -> list[Enqueued]:
        """Enqueues a batch atomically: all or none."""
        call, request = self._enqueue(tasks)
        resp = call("Enqueue", request)
        return [Enqueued(r.task_id, r.duplicate, r.debounced) for r in resp.results]

    def get(self, max_tasks: int = 1, *, lease_ttl: float = 30.0, timeout: float | None = 0) -> list[Task]:
        """Leases up to max_tasks ready tasks, waiting up to timeout seconds for one
        (0: try once, None: forever). [] if none became ready."""
        return self.client.dequeue([self.name], max_tasks, lease_ttl=lease_ttl, timeout=timeout)

    def ack(self, task: Task, result: Any = None) -> None:
        """Finishes the task with ``result`` (bytes, str, or anything JSON can
        encode; see Task.value). Raises TaskLeaseNotHeld if the lease expired first."""
        self._rpc.call_safe("Ack", self._ack_request(task, result))

    def progress(self, task: Task, value: float | None = None, data: Any = None, *,
                 lease_ttl: float | None = None) -> Task:
        """Records the task's progress (a number and/or JSON data); with lease_ttl
        the lease also ends that many seconds from now."""
        r = self._rpc.call_safe("ReportProgress", self._progress_request(task, value, data, lease_ttl))
        task.lease_expires_at = when(r.lease_expires_at)
        return task

    def get_task(self, task_id: str) -> Task:
        """The task in any state, finished ones while the retention keeps them
        (result, last error, progress, timestamps). TaskNotFound once gone."""
        return task_from(self._rpc.call_safe("GetTask", self._task_request(task_id)).task, None)

    def wait_task(self, task_id: str, timeout: float | None = None) -> Task:
        """Waits in the server (None: forever) until the task succeeded, died or
        was cancelled, and returns it; if it had not by then, returns it as it is
        (``task.finished`` is False)."""
        return self._rpc.wait_for(*self._wait_args(task_id, timeout)) or self.get_task(task_id)

    def policy(self) -> QueuePolicy:
        """The queue's policy, the server's defaults filled in."""
        return QueuePolicy.of(self._rpc.call_safe("GetQueuePolicy", pb.GetQueuePolicyRequest(queue=self.name)).policy)

    def set_policy(self, *, succeeded: Retention | None = None, dead: Retention | None = None,
                   retry: RetryPolicy | None = None, max_leased: int | None = None, rate: LeaseRate | None = None,
                   group_max_leased: int | None = None, group_rate: LeaseRate | None = None) -> QueuePolicy:
        """Replaces the queue's policy (None: the default, or no limit): retention for
        tasks that finish from now on, max attempts for tasks put from now on, backoff
        for every retry from now on; flow control (max_leased at once, rate of leases,
        and each group's, unless it sets its own) at once."""
        request = self._policy_request(succeeded, dead, retry, max_leased, rate, group_max_leased, group_rate)
        return QueuePolicy.of(self._rpc.call_safe("SetQueuePolicy", request).policy)

    def set_group(self, group: str, *, max_leased: int | None = None, weight: int | None = None,
                  rate: LeaseRate | None = None) -> Group:
        """Replaces a group's own rules (None: the queue's group_max_leased and
        group_rate, weight 1). A group of weight 3 gets three turns to another's one."""
        return Group.of(self._rpc.call_safe("SetGroupRules", self._group_request(group, max_leased, weight,
                                                                                  rate)).group)

    def group(self, group: str) -> Group:
        return Group.of(self._rpc.call_safe("GetGroup", pb.GetGroupRequest(queue=self.name, group=group)).group)

    def groups(self) -> list[Group]:
        """Every group with ready or leased tasks or rules of its own, by name."""
        found: list[Group] = []
        token = ""
        while True:
            r = self._rpc.call_safe("ListGroups", pb.ListGroupsRequest(queue=self.name, page_size=1000,
                                                                       page_token=token))
            found += [Group.of(g) for g in r.groups]
            token = r.next_page_token
            if not token:
                return found

    def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None,
             retryable: bool = True) -> NackResult:
        """A failed attempt: retried after retry_delay (None: exponential backoff) or dead-lettered."""
        r = self._rpc.call_safe("Nack", _nack_request(task, error, retry_delay, retryable))
        return NackResult(STATE_NAMES.get(r.state, "unknown"), when(r.retry_at))

    def extend(self, task: Task, lease_ttl: float) -> Task:
        """Resets the lease to lease_ttl seconds from now."""
        r = self._rpc.call_safe("ExtendLease",
                                pb.ExtendLeaseRequest(**self._settle(task), lease_ttl=duration(lease_ttl)))
        task.lease_expires_at = when(r.lease_expires_at)
        return task

    def release(self, task: Task) -> None:
        """Hands the task back, ready at once, the attempt not counted."""
        self._rpc.call_safe("Release", pb.ReleaseRequest(**self._settle(task)))

    def watch(self, *, after: str | None = None, from_oldest: bool = False) -> Watch:
        """The queue's task events as they happen, made through any server: after
        the event at position ``after``, else every event the queue keeps
        (``from_oldest``), else from now on."""
        return Watch(self._rpc, self.name, after, from_oldest)

    def consume(self, *, lease_ttl: float = 30.0, prefetch: int = 1) -> Consumer:
        """A stream of tasks pushed by the server, at most ``prefetch`` unsettled at
        once; see :class:`concord.consume.Consumer`."""
        return Consumer(self.client, [self.name], lease_ttl=lease_ttl, prefetch=prefetch)

    def stats(self) -> QueueStats:
        return self._stats(self._rpc.call_safe("Stats", pb.StatsRequest(queue=self.name)))

    def pause(self, group: str = "") -> bool:
        """Stops leasing (of one group's tasks, given a group): get() and consumers
        wait, put() goes on. Returns whether it was paused already. Safe to repeat, so
        retried while UNAVAILABLE."""
        return self._rpc.call_safe("PauseQueue", pb.PauseQueueRequest(queue=self.name, group=group)).was_paused

    def resume(self, group: str = "") -> bool:
        """Leases again, waking waiting workers at once; returns whether it was paused."""
        return self._rpc.call_safe("ResumeQueue", pb.ResumeQueueRequest(queue=self.name, group=group)).was_paused

    def peek(self, state: str = "ready", limit: int = 100) -> list[Task]:
        """Tasks in one state ("ready" in dequeue order, "delayed", "leased"), not leased to you."""
        r = self._rpc.call_safe("Peek", self._peek_request(state, limit))
        return [task_from(t, None) for t in r.tasks]

    def cancel(self, task_id: str) -> None:
        """Cancels a ready or delayed task (kept, cancelled, under the retention) or
        deletes a dead one. TaskNotFound / TaskLeased / TaskFinished otherwise."""
        self._rpc.call("Cancel", pb.CancelRequest(queue=self.name, task_id=task_id))

    def purge(self, *, include_dead: bool = False) -> int:
        """Deletes every ready and delayed task (include_dead: also dead ones and the
        retained succeeded and cancelled ones, and then the queue's events); returns how many."""
        r = self._rpc.call("Purge", pb.PurgeRequest(queue=self.name, include_dead=include_dead))
        return r.deleted

    def dead(self, limit: int = 100, offset: int = 0) -> list[Task]:
        """Dead-lettered tasks, oldest death first, with their last_error."""
        r = self._rpc.call_safe("ListDead", pb.ListDeadRequest(queue=self.name, limit=limit, offset=offset))
        return [task_from(t, None) for t in r.tasks]

    def retry_dead(self, task_ids: Sequence[str] = (), *, limit: int = 1000) -> int:
        """Makes dead tasks ready again with fresh attempts (none named: the oldest ``limit``)."""
        r = self._rpc.call("RetryDead", pb.RetryDeadRequest(queue=self.name, task_ids=list(task_ids), limit=limit))
        return r.retried

    def search(self, *, task_id: str = "", type: str = "", type_prefix: str = "", states: Iterable[str] = (),
               error: str = "", payload: bytes | str = b"", page_size: int = 50, page_token: str = "") -> SearchPage:
        """One page of the tasks that match every filter given, searched by the server over
        the whole queue: a task id, a type (or ``type_prefix``), states ("ready",
        "delayed", "leased", "dead", "succeeded", "cancelled"), text in the last error
        (ASCII letters in either case), bytes in the payload. Pass ``next_page_token``
        back as ``page_token`` to go on; ``search_all`` does that for you."""
        return _search_page(self._rpc.call_safe("SearchTasks", _search_request(
            self.name, task_id, type, type_prefix, states, error, payload, page_size, page_token)))

    def search_all(self, *, limit: int | None = None, **filters: Any) -> Iterator[Task]:
        """Every match of ``search(**filters)``, page after page, up to ``limit`` of them."""
        token, found = "", 0
        while True:
            page = self.search(page_token=token, **filters)
            for task in page.tasks:
                if limit is not None and found >= limit:
                    return
                found += 1
                yield task
            token = page.next_page_token
            if not token or (limit is not None and found >= limit):
                return

    def schedule(self, name: str, *, cron: str | None = None, every: float | timedelta | None = None,
                 tz: str = "UTC", start_at: datetime | None = None, type: str | None = None, payload: Any = b"",
                 priority: int = 0, max_attempts: int = 0, missed: str = "once",
                 grace: float | timedelta | None = None, paused: bool = False) -> Schedule:
        """Creates a recurring schedule: each tick enqueues one task, exactly once
        however many servers run, never before its time on Redis's clock.

        cron: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds
        first, or @hourly/@daily/@weekly/@monthly/@yearly, in time zone ``tz`` (IANA;
        a local time that daylight saving skips runs right after the change, one it
        repeats runs once unless the hour field is *). Or every: seconds (or a
        timedelta, 1 s to a year) from ``start_at`` (default: one interval from now).
        The task: ``type`` (default: the schedule's name), ``payload`` (bytes, str, or
        anything JSON can encode, as put() takes it), priority, max_attempts (0: the
        queue's). A tick up to ``grace`` seconds late (default 10) still runs; ticks
        missed beyond it run once together (missed="once") or are dropped ("skip").
        ScheduleExists if the queue has a schedule of that name."""
        spec = schedule_spec(name, cron, every, tz, start_at, type, payload, priority, max_attempts, missed, grace)
        return Schedule.of(self._rpc.call("CreateSchedule", self._create_schedule(name, paused, spec)).schedule)

    def update_schedule(self, name: str, *, cron: str | None = None, every: float | timedelta | None = None,
                        tz: str = "UTC", start_at: datetime | None = None, type: str | None = None,
                        payload: Any = b"", priority: int = 0, max_attempts: int = 0, missed: str = "once",
                        grace: float | timedelta | None = None, paused: bool | None = None) -> Schedule:
        """Replaces the schedule's whole spec (arguments as for schedule(); paused None
        keeps it as it was); its next tick is reckoned from now. ScheduleNotFound."""
        spec = schedule_spec(name, cron, every, tz, start_at, type, payload, priority, max_attempts, missed, grace)
        return Schedule.of(self._rpc.call_safe("UpdateSchedule", self._update_schedule(name, paused, spec)).schedule)

    def pause_schedule(self, name: str) -> Schedule:
        """Stops its ticks (pausing a paused one changes nothing). ScheduleNotFound."""
        return Schedule.of(self._rpc.call_safe("PauseSchedule", self._named(pb.PauseScheduleRequest, name)).schedule)

    def resume_schedule(self, name: str) -> Schedule:
        """Ticks again from the next tick after now: ticks due while it was paused do not run."""
        return Schedule.of(self._rpc.call_safe("ResumeSchedule",
                                               self._named(pb.ResumeScheduleRequest, name)).schedule)

    def delete_schedule(self, name: str) -> None:
        """Removes the schedule; tasks it enqueued stay. ScheduleNotFound if there is none."""
        self._rpc.call("DeleteSchedule", self._named(pb.DeleteScheduleRequest, name))

    def get_schedule(self, name: str) -> Schedule:
        """The schedule, with its next and last runs. ScheduleNotFound if there is none."""
        return Schedule.of(self._rpc.call_safe("GetSchedule", self._named(pb.GetScheduleRequest, name)).schedule)

    def schedules(self) -> list[Schedule]:
        """Every schedule of the queue, soonest next tick first, paused ones last."""
        found, token = [], ""
        while True:
            page = self._rpc.call_safe("ListSchedules", self._schedules_page(token))
            found += [Schedule.of(m) for m in page.schedules]
            token = page.next_page_token
            if not token:
                return _unique(found)


class AsyncQueue(_QueueBase):
    """A queue name on an :class:`~concord.AsyncClient`: Queue's methods, awaited."""

    async def put(self, type: str, payload: Any = b"", **options: Any) -> AsyncTaskHandle:
        enqueuer = self.client._enqueuers.get(self.name) or self.client._enqueuers.setdefault(
            self.name, AsyncCoalescer(self.put_many))
        return AsyncTaskHandle((await enqueuer.submit(NewTask(type, payload, **options))).task_id, self)

    async def put_many(self, tasks: Iterable[NewTask]) -> list[Enqueued]:
        call, request = self._enqueue(tasks)
        resp = await call("Enqueue", request)
        return [Enqueued(r.task_id, r.duplicate, r.debounced) for r in resp.results]

    async def get(self, max_tasks: int = 1, *, lease_ttl: float = 30.0, timeout: float | None = 0) -> list[Task]:
        return await self.client.dequeue([self.name], max_tasks, lease_ttl=lease_ttl, timeout=timeout)

    async def ack(self, task: Task, result: Any = None) -> None:
        await self._rpc.call_safe("Ack", self._ack_request(task, result))

    async def progress(self, task: Task, value: float | None = None, data: Any = None, *,
                       lease_ttl: float | None = None) -> Task:
        r = await self._rpc.call_safe("ReportProgress", self._progress_request(task, value, data, lease_ttl))
        task.lease_expires_at = when(r.lease_expires_at)
        return task

    async def get_task(self, task_id: str) -> Task:
        return task_from((await self._rpc.call_safe("GetTask", self._task_request(task_id))).task, None)

    async def wait_task(self, task_id: str, timeout: float | None = None) -> Task:
        return await self._rpc.wait_for(*self._wait_args(task_id, timeout)) or await self.get_task(task_id)

    async def policy(self) -> QueuePolicy:
        r = await self._rpc.call_safe("GetQueuePolicy", pb.GetQueuePolicyRequest(queue=self.name))
        return QueuePolicy.of(r.policy)

    async def set_policy(self, *, succeeded: Retention | None = None, dead: Retention | None = None,
                         retry: RetryPolicy | None = None, max_leased: int | None = None,
                         rate: LeaseRate | None = None, group_max_leased: int | None = None,
                         group_rate: LeaseRate | None = None) -> QueuePolicy:
        request = self._policy_request(succeeded, dead, retry, max_leased, rate, group_max_leased, group_rate)
        return QueuePolicy.of((await self._rpc.call_safe("SetQueuePolicy", request)).policy)

    async def set_group(self, group: str, *, max_leased: int | None = None, weight: int | None = None,
                        rate: LeaseRate | None = None) -> Group:
        r = await self._rpc.call_safe("SetGroupRules", self._group_request(group, max_leased, weight, rate))
        return Group.of(r.group)

    async def group(self, group: str) -> Group:
        r = await self._rpc.call_safe("GetGroup", pb.GetGroupRequest(queue=self.name, group=group))
        return Group.of(r.group)

    async def groups(self) -> list[Group]:
        found: list[Group] = []
        token = ""
        while True:
            r = await self._rpc.call_safe("ListGroups", pb.ListGroupsRequest(queue=self.name, page_size=1000,
                                                                             page_token=token))
            found += [Group.of(g) for g in r.groups]
            token = r.next_page_token
            if not token:
                return found

    async def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None,
             retryable: bool = True) -> NackResult:
        r = await self._rpc.call_safe("Nack", _nack_request(task, error, retry_delay, retryable))
        return NackResult(STATE_NAMES.get(r.state, "unknown"), when(r.retry_at))

    async def extend(self, task: Task, lease_ttl: float) -> Task:
        r = await self._rpc.call_safe("ExtendLease",
                                      pb.ExtendLeaseRequest(**self._settle(task), lease_ttl=duration(lease_ttl)))
        task.lease_expires_at = when(r.lease_expires_at)
        return task

    async def release(self, task: Task) -> None:
        await self._rpc.call_safe("Release", pb.ReleaseRequest(**self._settle(task)))

    def watch(self, *, after: str | None = None, from_oldest: bool = False) -> AsyncWatch:
        return AsyncWatch(self._rpc, self.name, after, from_oldest)

    def consume(self, *, lease_ttl: float = 30.0, prefetch: int = 1) -> AsyncConsumer:
        """``async for task in queue.consume():``; see :class:`concord.consume.AsyncConsumer`."""
        return AsyncConsumer(self.client, [self.name], lease_ttl=lease_ttl, prefetch=prefetch)

    async def stats(self) -> QueueStats:
        return self._stats(await self._rpc.call_safe("Stats", pb.StatsRequest(queue=self.name)))

    async def pause(self, group: str = "") -> bool:
        r = await self._rpc.call_safe("PauseQueue", pb.PauseQueueRequest(queue=self.name, group=group))
        return r.was_paused

    async def resume(self, group: str = "") -> bool:
        r = await self._rpc.call_safe("ResumeQueue", pb.ResumeQueueRequest(queue=self.name, group=group))
        return r.was_paused

    async def peek(self, state: str = "ready", limit: int = 100) -> list[Task]:
        r = await self._rpc.call_safe("Peek", self._peek_request(state, limit))
        return [task_from(t, None) for t in r.tasks]

    async def cancel(self, task_id: str) -> None:
        await self._rpc.call("Cancel", pb.CancelRequest(queue=self.name, task_id=task_id))

    async def purge(self, *, include_dead: bool = False) -> int:
        r = await self._rpc.call("Purge", pb.PurgeRequest(queue=self.name, include_dead=include_dead))
        return r.deleted

    async def dead(self, limit: int = 100, offset: int = 0) -> list[Task]:
        r = await self._rpc.call_safe("ListDead", pb.ListDeadRequest(queue=self.name, limit=limit, offset=offset))
        return [task_from(t, None) for t in r.tasks]

    async def retry_dead(self, task_ids: Sequence[str] = (), *, limit: int = 1000) -> int:
        r = await self._rpc.call("RetryDead",
                                 pb.RetryDeadRequest(queue=self.name, task_ids=list(task_ids), limit=limit))
        return r.retried

    async def search(self, *, task_id: str = "", type: str = "", type_prefix: str = "", states: Iterable[str] = (),
                     error: str = "", payload: bytes | str = b"", page_size: int = 50,
                     page_token: str = "") -> SearchPage:
        """As Queue.search."""
        return _search_page(await self._rpc.call_safe("SearchTasks", _search_request(
            self.name, task_id, type, type_prefix, states, error, payload, page_size, page_token)))

    async def search_all(self, *, limit: int | None = None, **filters: Any) -> AsyncIterator[Task]:
        """As Queue.search_all."""
        token, found = "", 0
        while True:
            page = await self.search(page_token=token, **filters)
            for task in page.tasks:
                if limit is not None and found >= limit:
                    return
                found += 1
                yield task
            token = page.next_page_token
            if not token or (limit is not None and found >= limit):
                return

    async def schedule(self, name: str, *, cron: str | None = None, every: float | timedelta | None = None,
                       tz: str = "UTC", start_at: datetime | None = None, type: str | None = None,
                       payload: Any = b"", priority: int = 0, max_attempts: int = 0, missed: str = "once",
                       grace: float | timedelta | None = None, paused: bool = False) -> Schedule:
        spec = schedule_spec(name, cron, every, tz, start_at, type, payload, priority, max_attempts, missed, grace)
        r = await self._rpc.call("CreateSchedule", self._create_schedule(name, paused, spec))
        return Schedule.of(r.schedule)

    async def update_schedule(self, name: str, *, cron: str | None = None, every: float | timedelta | None = None,
                              tz: str = "UTC", start_at: datetime | None = None, type: str | None = None,
                              payload: Any = b"", priority: int = 0, max_attempts: int = 0, missed: str = "once",
                              grace: float | timedelta | None = None, paused: bool | None = None) -> Schedule:
        spec = schedule_spec(name, cron, every, tz, start_at, type, payload, priority, max_attempts, missed, grace)
        r = await self._rpc.call_safe("UpdateSchedule", self._update_schedule(name, paused, spec))
        return Schedule.of(r.schedule)

    async def pause_schedule(self, name: str) -> Schedule:
        r = await self._rpc.call_safe("PauseSchedule", self._named(pb.PauseScheduleRequest, name))
        return Schedule.of(r.schedule)

    async def resume_schedule(self, name: str) -> Schedule:
        r = await self._rpc.call_safe("ResumeSchedule", self._named(pb.ResumeScheduleRequest, name))
        return Schedule.of(r.schedule)

    async def delete_schedule(self, name: str) -> None:
        await self._rpc.call("DeleteSchedule", self._named(pb.DeleteScheduleRequest, name))

    async def get_schedule(self, name: str) -> Schedule:
        r = await self._rpc.call_safe("GetSchedule", self._named(pb.GetScheduleRequest, name))
        return Schedule.of(r.schedule)

    async def schedules(self) -> list[Schedule]:
        found, token = [], ""
        while True:
            page = await self._rpc.call_safe("ListSchedules", self._schedules_page(token))
            found += [Schedule.of(m) for m in page.schedules]
            token = page.next_page_token
            if not token:
                return _unique(found)


def _dequeue_args(client: Any, queues: Sequence[str], max_tasks: int, lease_ttl: float, timeout: float | None
                  ) -> tuple[Any, ...]:
    """Service.wait_for's arguments for a dequeue: done once a response carries tasks."""
    def tasks(resp: pb.DequeueResponse) -> list[Task] | None:
        return [task_from(t, client.queue(t.queue)) for t in resp.tasks] or None

    return "Dequeue", lambda wait: dequeue_request(queues, max_tasks, lease_ttl, wait), timeout, tasks


def dequeue_sync(client: Any, queues: Sequence[str], max_tasks: int, lease_ttl: float, timeout: float | None) -> list[Task]:
    return client._service("queue").wait_for(*_dequeue_args(client, queues, max_tasks, lease_ttl, timeout)) or []


async def dequeue_async(client: Any, queues: Sequence[str], max_tasks: int, lease_ttl: float,
                        timeout: float | None) -> list[Task]:
    return await client._service("queue").wait_for(*_dequeue_args(client, queues, max_tasks, lease_ttl, timeout)) or []


EVENT_KINDS = {pb.QUEUE_EVENT_KIND_ENQUEUED: "enqueued", pb.QUEUE_EVENT_KIND_LEASED: "leased",
               pb.QUEUE_EVENT_KIND_PROGRESS: "progress", pb.QUEUE_EVENT_KIND_SUCCEEDED: "succeeded",
               pb.QUEUE_EVENT_KIND_FAILED: "failed", pb.QUEUE_EVENT_KIND_DEAD: "dead",
               pb.QUEUE_EVENT_KIND_CANCELLED: "cancelled", pb.QUEUE_EVENT_KIND_RELEASED: "released",
               pb.QUEUE_EVENT_KIND_RETRIED: "retried", pb.QUEUE_EVENT_KIND_GAP: "gap",
               pb.QUEUE_EVENT_KIND_CAUGHT_UP: "caught_up", pb.QUEUE_EVENT_KIND_HELD: "held"}


@dataclass(frozen=True)
class QueueEvent:
    """One thing that happened to a task (``kind``: enqueued, leased, progress,
    succeeded, failed, dead, cancelled, released, retried), ``held`` (a group, or the
    whole queue, started holding its ready tasks back: ``group``, ``wait_reason``), or
    a marker: ``gap`` (events after the last one you saw were dropped; the next is the
    oldest kept) or ``caught_up`` (every kept event so far has been sent)."""

    position: str  # pass as watch(after=...) to resume after this event
    kind: str
    task_id: str = ""
    at: datetime | None = None
    attempt: int = 0
    type: str = ""
    ready_at: datetime | None = None
    error: str = ""
    dead_reason: str = ""
    progress: Progress | None = None
    schedule: str = ""
    group: str = ""  # held: the group ("" the whole queue) ...
    wait_reason: str = ""  # ... and the rule now holding its ready tasks back (as Task.wait_reason)

    @classmethod
    def of(cls, m: pb.QueueEvent) -> QueueEvent:
        progress = None
        if m.HasField("progress"):
            p = m.progress
            progress = Progress(p.value if p.HasField("value") else None, json.loads(p.json) if p.json else None,
                                when(p.reported_at))
        return cls(m.position, EVENT_KINDS.get(m.kind, "unknown"), m.task_id, _maybe_when(m, "at"), m.attempt, m.type,
                   _maybe_when(m, "ready_at"), m.error, m.dead_reason, progress, m.schedule, m.group,
                   WAIT_REASONS.get(m.wait_reason, ""))


def _watch_request(queue: str, after: str | None, from_oldest: bool) -> pb.WatchQueueRequest:
    return pb.WatchQueueRequest(queue=queue, after=after or "", from_oldest=from_oldest and not after)


def _watch_args(rpc: Any, queue: str, after: str | None, from_oldest: bool) -> tuple[Any, Any, str | None]:
    def open_after(position: str | None) -> Any:
        return rpc.open("WatchQueue")(_watch_request(queue, position, from_oldest))

    def item(m: pb.WatchQueueResponse) -> tuple[QueueEvent, str]:
        event = QueueEvent.of(m.event)
        return event, event.position

    return open_after, item, after


class Watch(Resuming[QueueEvent, "str | None"]):
    """Iterate for QueueEvents. If the connection drops (a server restarts), it
    resumes after the last event it gave you, so you miss nothing the queue still
    keeps (a ``gap`` says when something was dropped). close() ends it."""

    def __init__(self, rpc: Any, queue: str, after: str | None, from_oldest: bool) -> None:
        super().__init__(*_watch_args(rpc, queue, after, from_oldest))


class AsyncWatch(AsyncResuming[QueueEvent, "str | None"]):
    """Watch for asyncio: ``async for event in queue.watch()``."""

    def __init__(self, rpc: Any, queue: str, after: str | None, from_oldest: bool) -> None:
        super().__init__(*_watch_args(rpc, queue, after, from_oldest))

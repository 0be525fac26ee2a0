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

``get(timeout=...)`` rides out a Redis outage shorter than its timeout, and the
settling calls and reads retry too; ``put`` retries only with a ``dedupe_key``
(see concord._retry).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._convert import duration, seconds, when
from .consume import AsyncConsumer, Consumer
from .queue.v1 import queue_pb2 as pb
from .tasks import STATE_NAMES, STATE_VALUES, Task, task_from, truncate_error


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

    def message(self) -> pb.NewTask:
        m = pb.NewTask(type=self.type, payload=encode_payload(self.payload), priority=self.priority,
                       dedupe_key=self.dedupe_key, max_attempts=self.max_attempts or 0)
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
    duplicate: bool  # the dedupe key matched: task_id is the first task's


@dataclass(frozen=True)
class QueueStats:
    ready: int
    delayed: int
    leased: int
    dead: int
    oldest_ready_age: float  # seconds the longest-waiting ready task has waited
    paused: bool = False  # pause() was called and resume() not since


@dataclass(frozen=True)
class NackResult:
    state: str  # "ready" or "delayed" (to be retried) or "dead"
    retry_at: datetime


def dequeue_request(queues: Sequence[str], max_tasks: int, lease_ttl: float, wait: float) -> pb.DequeueRequest:
    return pb.DequeueRequest(queues=list(queues), max_tasks=max_tasks, lease_ttl=duration(lease_ttl),
                             wait_timeout=duration(wait))


def _nack_request(task: Task, error: str, retry_delay: float | None) -> pb.NackRequest:
    r = pb.NackRequest(queue=task.queue, task_id=task.task_id, lease=task.lease, error=truncate_error(error))
    if retry_delay is not None:
        r.retry_delay.CopyFrom(duration(retry_delay))
    return r


class _QueueBase:
    def __init__(self, client: Any, name: str) -> None:
        self.client = client
        self._rpc = client._service("queue")
        self.name = name

    def _enqueue(self, tasks: Iterable[NewTask]) -> tuple[Any, pb.EnqueueRequest]:
        """The request, and the client method to send it with: retried only when
        every task has a dedupe key, so that a repeat cannot add a second task."""
        request = pb.EnqueueRequest(queue=self.name, tasks=[t.message() for t in tasks])
        safe = all(t.dedupe_key for t in request.tasks)
        return (self._rpc.call_safe if safe else self._rpc.call), request

    def _settle(self, task: Task) -> dict[str, str]:
        return {"queue": task.queue, "task_id": task.task_id, "lease": task.lease}

    def _peek_request(self, state: str, limit: int) -> pb.PeekRequest:
        return pb.PeekRequest(queue=self.name, state=STATE_VALUES[state], limit=limit)

    @staticmethod
    def _stats(r: pb.StatsResponse) -> QueueStats:
        return QueueStats(r.ready, r.delayed, r.leased, r.dead, seconds(r.oldest_ready_age), r.paused)


class Queue(_QueueBase):
    """A queue name on a synchronous :class:`~concord.Client`."""

    def put(self, type: str, payload: Any = b"", **options: Any) -> str:
        """Enqueues one task and returns its id (the first task's id when its
        dedupe_key matched). Options: priority (-1000..1000, higher first),
        delay (seconds) or run_at (datetime), dedupe_key, dedupe_window (seconds),
        max_attempts (default 3). payload: bytes, str, or anything JSON can encode."""
        return self.put_many([NewTask(type, payload, **options)])[0].task_id

    def put_many(self, tasks: Iterable[NewTask]) -> list[Enqueued]:
        """Enqueues a batch atomically: all or none."""
        call, request = self._enqueue(tasks)
        resp = call("Enqueue", request)
        return [Enqueued(r.task_id, r.duplicate) for r in resp.results]

    def get(self, max_tasks: int = 1, *, lease_ttl: float = 30.0, timeout: float | None = 0) -> list[Task]:
        """Leases up to max_tasks ready tasks, waiting up to timeout seconds for one
        (0: try once, None: forever). [] if none became ready."""
        return self.client.dequeue([self.name], max_tasks, lease_ttl=lease_ttl, timeout=timeout)

    def ack(self, task: Task) -> None:
        """Finishes the task. Raises TaskLeaseNotHeld if the lease expired first."""
        self._rpc.call_safe("Ack", pb.AckRequest(**self._settle(task)))

    def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None) -> NackResult:
        """A failed attempt: retried after retry_delay (None: exponential backoff) or dead-lettered."""
        r = self._rpc.call_safe("Nack", _nack_request(task, error, retry_delay))
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

    def consume(self, *, lease_ttl: float = 30.0, prefetch: int = 1) -> Consumer:
        """A stream of tasks pushed by the server, at most ``prefetch`` unsettled at
        once; see :class:`concord.consume.Consumer`."""
        return Consumer(self.client, [self.name], lease_ttl=lease_ttl, prefetch=prefetch)

    def stats(self) -> QueueStats:
        return self._stats(self._rpc.call_safe("Stats", pb.StatsRequest(queue=self.name)))

    def pause(self) -> bool:
        """Stops leasing: get() and consumers wait, put() goes on. Returns whether it
        was paused already. Safe to repeat, so retried while UNAVAILABLE."""
        return self._rpc.call_safe("PauseQueue", pb.PauseQueueRequest(queue=self.name)).was_paused

    def resume(self) -> bool:
        """Leases again, waking waiting workers at once; returns whether it was paused."""
        return self._rpc.call_safe("ResumeQueue", pb.ResumeQueueRequest(queue=self.name)).was_paused

    def peek(self, state: str = "ready", limit: int = 100) -> list[Task]:
        """Tasks in one state ("ready" in dequeue order, "delayed", "leased"), not leased to you."""
        r = self._rpc.call_safe("Peek", self._peek_request(state, limit))
        return [task_from(t, None) for t in r.tasks]

    def cancel(self, task_id: str) -> None:
        """Deletes a ready, delayed or dead task. TaskNotFound / TaskLeased otherwise."""
        self._rpc.call("Cancel", pb.CancelRequest(queue=self.name, task_id=task_id))

    def purge(self, *, include_dead: bool = False) -> int:
        """Deletes every ready and delayed task (and dead ones); returns how many."""
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


class AsyncQueue(_QueueBase):
    """A queue name on an :class:`~concord.AsyncClient`: Queue's methods, awaited."""

    async def put(self, type: str, payload: Any = b"", **options: Any) -> str:
        return (await self.put_many([NewTask(type, payload, **options)]))[0].task_id

    async def put_many(self, tasks: Iterable[NewTask]) -> list[Enqueued]:
        call, request = self._enqueue(tasks)
        resp = await call("Enqueue", request)
        return [Enqueued(r.task_id, r.duplicate) for r in resp.results]

    async def get(self, max_tasks: int = 1, *, lease_ttl: float = 30.0, timeout: float | None = 0) -> list[Task]:
        return await self.client.dequeue([self.name], max_tasks, lease_ttl=lease_ttl, timeout=timeout)

    async def ack(self, task: Task) -> None:
        await self._rpc.call_safe("Ack", pb.AckRequest(**self._settle(task)))

    async def nack(self, task: Task, error: str = "", *, retry_delay: float | None = None) -> NackResult:
        r = await self._rpc.call_safe("Nack", _nack_request(task, error, retry_delay))
        return NackResult(STATE_NAMES.get(r.state, "unknown"), when(r.retry_at))

    async def extend(self, task: Task, lease_ttl: float) -> Task:
        r = await self._rpc.call_safe("ExtendLease",
                                      pb.ExtendLeaseRequest(**self._settle(task), lease_ttl=duration(lease_ttl)))
        task.lease_expires_at = when(r.lease_expires_at)
        return task

    async def release(self, task: Task) -> None:
        await self._rpc.call_safe("Release", pb.ReleaseRequest(**self._settle(task)))

    def consume(self, *, lease_ttl: float = 30.0, prefetch: int = 1) -> AsyncConsumer:
        """``async for task in queue.consume():``; see :class:`concord.consume.AsyncConsumer`."""
        return AsyncConsumer(self.client, [self.name], lease_ttl=lease_ttl, prefetch=prefetch)

    async def stats(self) -> QueueStats:
        return self._stats(await self._rpc.call_safe("Stats", pb.StatsRequest(queue=self.name)))

    async def pause(self) -> bool:
        return (await self._rpc.call_safe("PauseQueue", pb.PauseQueueRequest(queue=self.name))).was_paused

    async def resume(self) -> bool:
        return (await self._rpc.call_safe("ResumeQueue", pb.ResumeQueueRequest(queue=self.name))).was_paused

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

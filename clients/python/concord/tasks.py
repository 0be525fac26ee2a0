"""Task: a task as the server reports it, leased or not, and the state names; shared
by the unary calls (concord.queues) and the Consume stream (concord.consume)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ._convert import when
from .queue.v1 import queue_pb2 as pb

STATE_NAMES = {pb.TASK_STATE_READY: "ready", pb.TASK_STATE_DELAYED: "delayed", pb.TASK_STATE_LEASED: "leased",
               pb.TASK_STATE_DEAD: "dead", pb.TASK_STATE_WAITING: "waiting", pb.TASK_STATE_SUCCEEDED: "succeeded",
               pb.TASK_STATE_CANCELLED: "cancelled"}
STATE_VALUES = {v: k for k, v in STATE_NAMES.items()}
FINISHED = frozenset({"succeeded", "dead", "cancelled"})

JSON = "application/json"
TEXT = "text/plain; charset=utf-8"
BYTES = "application/octet-stream"


def encode_result(value: Any) -> tuple[bytes, str]:
    """A task's result and its type: None as nothing, bytes as they are, str as UTF-8
    text, anything else as JSON; ``Task.value()`` turns it back."""
    if value is None:
        return b"", ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value), BYTES
    if isinstance(value, str):
        return value.encode(), TEXT
    return json.dumps(value, separators=(",", ":")).encode(), JSON


class TaskFailed(Exception):
    """``TaskHandle.result()``: the task died (out of attempts, or its last lease
    ran out) or was cancelled; ``task`` says which and holds its last error."""

    def __init__(self, task: Task) -> None:
        how = "was cancelled" if task.state == "cancelled" else f"died ({task.dead_reason}): {task.last_error}"
        super().__init__(f"task {task.task_id} of {task.queue} {how}")
        self.task = task


@dataclass(frozen=True)
class Progress:
    """What a worker last reported with ``task.progress()``."""

    value: float | None
    data: Any  # the JSON document, decoded; None when none was sent
    reported_at: datetime


@dataclass(eq=False)
class Task:
    """A task; when it came from get/dequeue/consume, it is leased to you until
    ``lease_expires_at``: settle it with ack(), nack(), release(), or extend()."""

    queue: str
    task_id: str
    type: str
    payload: bytes
    priority: int
    state: str
    attempt: int
    max_attempts: int
    lease: str
    lease_expires_at: datetime | None
    enqueued_at: datetime
    ready_at: datetime
    last_error: str
    # Filled in by get_task / wait_task (and TaskHandle):
    last_progress: Progress | None = None  # what task.progress() last reported
    result: bytes = b""
    result_type: str = ""
    leased_at: datetime | None = None
    finished_at: datetime | None = None
    dead_reason: str = ""  # dead: "attempts" or "lease"
    # Set when a schedule enqueued it: the schedule's name
    # and the tick's time (enqueued_at - scheduled_at is how late the tick ran).
    schedule: str = ""
    scheduled_at: datetime | None = None
    group: str = ""  # its group ("" none): groups take turns, under their caps and rates
    # get_task / wait_task, when ready: the rule holding it back ("" none): queue_paused,
    # queue_at_cap, queue_rate_limited, group_paused, group_at_cap, group_rate_limited
    wait_reason: str = ""
    _settler: Any = field(default=None, repr=False)

    @property
    def finished(self) -> bool:
        """Succeeded, dead or cancelled: nothing more will happen to it."""
        return self.state in FINISHED

    def value(self) -> Any:
        """The result as acked: JSON decoded, text as str, bytes as bytes, None if none."""
        if self.result_type == JSON:
            return json.loads(self.result)
        if self.result_type.startswith("text/"):
            return self.result.decode()
        return self.result if self.result or self.result_type else None

    def outcome(self) -> Any:
        """value() when it succeeded; TaskFailed when it died or was cancelled."""
        if self.state == "succeeded":
            return self.value()
        if self.finished:
            raise TaskFailed(self)
        raise TimeoutError(f"task {self.task_id} of {self.queue} has not finished (it is {self.state})")

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    def ack(self, result: Any = None) -> Any:
        """Finishes the task with ``result`` (see encode_result), kept for
        get_task/wait_task under the queue's retention."""
        return self._settler.ack(self, result)

    def progress(self, value: float | None = None, data: Any = None, *, lease_ttl: float | None = None) -> Any:
        """Reports how far the task got: a number and/or a JSON-encodable ``data``;
        with ``lease_ttl`` the lease also ends that many seconds from now."""
        return self._settler.progress(self, value, data, lease_ttl=lease_ttl)

    def nack(self, error: str = "", *, retry_delay: float | None = None, retryable: bool = True) -> Any:
        """A failed attempt: retried per the retry policy (or after retry_delay);
        ``retryable=False`` dead-letters it at once (bad input cannot get better)."""
        return self._settler.nack(self, error, retry_delay=retry_delay, retryable=retryable)

    def extend(self, lease_ttl: float) -> Any:
        return self._settler.extend(self, lease_ttl)

    def release(self) -> Any:
        return self._settler.release(self)


def _maybe_when(m: Any, name: str) -> datetime | None:
    return when(getattr(m, name)) if m.HasField(name) else None


WAIT_REASONS = {pb.WAIT_REASON_QUEUE_PAUSED: "queue_paused", pb.WAIT_REASON_QUEUE_AT_CAP: "queue_at_cap",
                pb.WAIT_REASON_QUEUE_RATE_LIMITED: "queue_rate_limited", pb.WAIT_REASON_GROUP_PAUSED: "group_paused",
                pb.WAIT_REASON_GROUP_AT_CAP: "group_at_cap", pb.WAIT_REASON_GROUP_RATE_LIMITED: "group_rate_limited"}


def task_from(m: pb.Task, settler: Any) -> Task:
    progress = None
    if m.HasField("progress"):
        p = m.progress
        progress = Progress(p.value if p.HasField("value") else None, json.loads(p.json) if p.json else None,
                            when(p.reported_at))
    return Task(m.queue, m.task_id, m.type, m.payload, m.priority, STATE_NAMES.get(m.state, "unknown"), m.attempt,
                m.max_attempts, m.lease, _maybe_when(m, "lease_expires_at"), when(m.enqueued_at), when(m.ready_at),
                m.last_error, progress, m.result, m.result_type, _maybe_when(m, "leased_at"),
                _maybe_when(m, "finished_at"), m.dead_reason, m.schedule, _maybe_when(m, "scheduled_at"), m.group,
                WAIT_REASONS.get(m.wait_reason, ""), settler)


def truncate_error(error: str, limit: int = 4096) -> str:
    """The server keeps at most 4096 bytes of an error; keep the end (a traceback's
    last lines say the most)."""
    data = error.encode()
    return error if len(data) <= limit else data[-limit:].decode(errors="ignore")

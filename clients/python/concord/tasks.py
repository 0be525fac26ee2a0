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
               pb.TASK_STATE_DEAD: "dead"}
STATE_VALUES = {v: k for k, v in STATE_NAMES.items()}


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
    _settler: Any = field(default=None, repr=False)

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.payload)

    def ack(self) -> Any:
        return self._settler.ack(self)

    def nack(self, error: str = "", *, retry_delay: float | None = None) -> Any:
        return self._settler.nack(self, error, retry_delay=retry_delay)

    def extend(self, lease_ttl: float) -> Any:
        return self._settler.extend(self, lease_ttl)

    def release(self) -> Any:
        return self._settler.release(self)


def task_from(m: pb.Task, settler: Any) -> Task:
    return Task(m.queue, m.task_id, m.type, m.payload, m.priority, STATE_NAMES.get(m.state, "unknown"), m.attempt,
                m.max_attempts, m.lease, when(m.lease_expires_at) if m.HasField("lease_expires_at") else None,
                when(m.enqueued_at), when(m.ready_at), m.last_error, settler)


def truncate_error(error: str, limit: int = 4096) -> str:
    """The server keeps at most 4096 bytes of an error; keep the end (a traceback's
    last lines say the most)."""
    data = error.encode()
    return error if len(data) <= limit else data[-limit:].decode(errors="ignore")

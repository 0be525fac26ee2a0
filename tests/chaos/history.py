"""The recorder: an append-only history of every call a campaign makes.

An event is one call (``invoke`` .. ``complete``, both ``time.monotonic()`` of the
calling process) with its outcome:

- ``ok``: the call returned; ``result`` holds what the checker needs of the reply;
- ``fail``: it raised; ``code`` is the gRPC status name (or CLIENT_TIMEOUT,
  CLIENT_CANCELLED, CLIENT_ERROR for what the caller itself gave up on or hit) and
  ``reason`` the google.rpc.ErrorInfo reason;
- ``pending``: it never completed (the checker treats it as indeterminate);
- ``note``: an instant, not a call: a message received on a stream (``parent`` is the
  stream's event), a fault injected, the harness's own event loop running late.

Only acknowledged outcomes are facts. A call that failed UNAVAILABLE, DEADLINE_EXCEEDED,
CANCELLED, INTERNAL, UNKNOWN or on the client's side may or may not have taken effect:
``Event.indeterminate`` says so, and every rule treats such calls as "maybe happened".

Recording is thread safe (one lock around the append); asyncio callers in one loop
never contend for it. Times may be given explicitly (``History.record``), which is how
the checker's tests build histories by hand.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import statistics
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc

# The status a failed call's ErrorInfo reason stands for (the server maps each reason
# to one code; a Consume stream's Settled carries only the reason).
REASON_CODES = {
    "REDIS_UNAVAILABLE": "UNAVAILABLE",
    "DEADLINE_EXCEEDED": "DEADLINE_EXCEEDED",
    "INTERNAL": "INTERNAL",
    "INVALID_ARGUMENT": "INVALID_ARGUMENT",
    "NOT_FOUND": "NOT_FOUND",
    "FAILED_PRECONDITION": "FAILED_PRECONDITION",
    "ALREADY_EXISTS": "ALREADY_EXISTS",
    "PERMISSION_DENIED": "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED": "RESOURCE_EXHAUSTED",
    "UNAUTHENTICATED": "UNAUTHENTICATED",
    "LOCK_NOT_HELD": "FAILED_PRECONDITION",
    "LOCK_WAIT_TIMEOUT": "DEADLINE_EXCEEDED",
    "PERMIT_NOT_HELD": "FAILED_PRECONDITION",
    "PERMITS_EXCEED_LIMIT": "FAILED_PRECONDITION",
    "SEMAPHORE_WAIT_TIMEOUT": "DEADLINE_EXCEEDED",
    "TASK_LEASE_NOT_HELD": "FAILED_PRECONDITION",
    "TASK_NOT_FOUND": "NOT_FOUND",
    "TASK_LEASED": "FAILED_PRECONDITION",
    "CHAT_NOT_FOUND": "NOT_FOUND",
    "CHAT_EXISTS": "ALREADY_EXISTS",
    "NOT_A_MEMBER": "PERMISSION_DENIED",
    "CHAT_FULL": "RESOURCE_EXHAUSTED",
    "NAME_NOT_FOUND": "NOT_FOUND",
}

# Failures after which the call may or may not have taken effect.
INDETERMINATE_CODES = frozenset({
    "UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED", "UNKNOWN", "INTERNAL", "ABORTED", "DATA_LOSS",
    "CLIENT_TIMEOUT", "CLIENT_CANCELLED", "CLIENT_ERROR",
})
# ... except these, which say the thing waited for was not granted.
DEFINITE_REASONS = frozenset({"LOCK_WAIT_TIMEOUT", "SEMAPHORE_WAIT_TIMEOUT"})


@dataclass
class Event:
    id: int
    process: str  # the actor (worker) that made the call
    op: str  # e.g. "lock.acquire", "chat.deliver" (a note)
    args: dict[str, Any]
    invoke: float
    complete: float | None = None
    outcome: str = "pending"  # ok | fail | pending | note
    result: Any = None
    code: str | None = None
    reason: str | None = None
    message: str = ""
    server: int | None = None  # index of the concord-server the call went to
    parent: int | None = None  # the stream (event id) a note belongs to
    raw: Any = field(default=None, repr=False, compare=False)  # the client's return value; not recorded

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"

    @property
    def failed(self) -> bool:
        return self.outcome == "fail"

    @property
    def indeterminate(self) -> bool:
        """May or may not have taken effect."""
        if self.outcome == "pending":
            return True
        return (self.outcome == "fail" and self.code in INDETERMINATE_CODES
                and self.reason not in DEFINITE_REASONS)

    @property
    def maybe(self) -> bool:
        """Took effect, or may have."""
        return self.ok or self.indeterminate

    @property
    def end(self) -> float:
        """The completion time, or +inf for a call that never completed."""
        return self.complete if self.complete is not None else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in JSON_FIELDS}

    def brief(self) -> str:
        """One line for a violation report."""
        when = f"{self.invoke:.3f}" + (f"..{self.complete:.3f}" if self.complete is not None and
                                       self.outcome != "note" else "")
        outcome = {"ok": f"ok {_short(self.result)}", "fail": f"{self.code}/{self.reason or '-'} {self.message[:80]!r}",
                   "pending": "never completed", "note": ""}[self.outcome]
        srv = f" @s{self.server}" if self.server is not None else ""
        par = f" in #{self.parent}" if self.parent is not None else ""
        return f"#{self.id} {when} {self.process}{srv} {self.op}{par} {_short(self.args)} -> {outcome}".rstrip()


JSON_FIELDS = [f.name for f in fields(Event) if f.name != "raw"]


def _short(value: Any, limit: int = 240) -> str:
    text = json.dumps(value, default=str, separators=(",", ":")) if value is not None else ""
    return text if len(text) <= limit else text[:limit] + "..."


def classify(exc: BaseException) -> tuple[str, str | None, str]:
    """(code, reason, message) of an exception a call raised."""
    import concord

    if isinstance(exc, concord.ConcordError):
        code = REASON_CODES.get(exc.reason) or getattr(exc.code, "name", str(exc.code))
        return code, exc.reason or None, exc.message
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        from concord.errors import from_rpc_error

        mapped = from_rpc_error(exc)
        return exc.code().name, mapped.reason or None, mapped.message
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "CLIENT_TIMEOUT", None, "the caller stopped waiting"
    if isinstance(exc, asyncio.CancelledError):
        return "CLIENT_CANCELLED", None, "cancelled on the client's side"
    return "CLIENT_ERROR", None, f"{type(exc).__name__}: {exc}"


def wall_offset() -> float:
    """time.time() - time.monotonic(), the median of a few readings: converts a
    Redis server timestamp (same machine, same wall clock) to this process's
    monotonic clock."""
    readings = []
    for _ in range(5):
        m1 = time.monotonic()
        w = time.time()
        m2 = time.monotonic()
        readings.append(w - (m1 + m2) / 2)
    return statistics.median(readings)


def ts(value: datetime | None) -> float | None:
    """A datetime from the client (a Redis-clock timestamp) as epoch seconds."""
    return value.timestamp() if value is not None else None


class History:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.events: list[Event] = []
        self.wall_offset = wall_offset()  # wall = monotonic + wall_offset
        self._ids = itertools.count()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self):
        return iter(list(self.events))

    def _append(self, event: Event) -> Event:
        with self._lock:
            event.id = next(self._ids)
            self.events.append(event)
        return event

    def invoke(self, process: str, op: str, *, server: int | None = None, parent: int | None = None,
               at: float | None = None, **args: Any) -> Event:
        return self._append(Event(-1, process, op, args, self.clock() if at is None else at, server=server,
                                  parent=parent))

    def ok(self, event: Event, result: Any = None, *, at: float | None = None) -> Event:
        event.complete = self.clock() if at is None else at
        event.outcome = "ok"
        event.result = result
        return event

    def fail(self, event: Event, exc: BaseException | None = None, *, code: str | None = None,
             reason: str | None = None, message: str = "", at: float | None = None) -> Event:
        event.complete = self.clock() if at is None else at
        event.outcome = "fail"
        if exc is not None:
            code, reason, message = classify(exc)
        event.code, event.reason, event.message = code or "UNKNOWN", reason, message
        return event

    def note(self, process: str, op: str, *, server: int | None = None, parent: int | None = None,
             at: float | None = None, **args: Any) -> Event:
        t = self.clock() if at is None else at
        return self._append(Event(-1, process, op, args, t, complete=t, outcome="note", server=server, parent=parent))

    def record(self, process: str, op: str, invoke: float, complete: float | None, *, ok: Any = None,
               code: str | None = None, reason: str | None = None, server: int | None = None,
               parent: int | None = None, **args: Any) -> Event:
        """A whole call at once, with explicit times: ``ok=`` its result, or ``code=``
        (and ``reason=``) its failure; neither and complete=None: never completed."""
        event = self.invoke(process, op, server=server, parent=parent, at=invoke, **args)
        if code is not None:
            return self.fail(event, code=code, reason=reason, at=complete)
        if complete is not None:
            return self.ok(event, ok, at=complete)
        return event

    async def call(self, process: str, op: str, fn: Callable[[], Awaitable[Any]], *,
                   summary: Callable[[Any], Any] = lambda r: None, server: int | None = None,
                   parent: int | None = None, timeout: float | None = None, **args: Any) -> Event:
        """Records ``await fn()``: the event, completed with ``summary(result)`` or the
        failure. Never raises (except the caller's own cancellation, recorded first)."""
        event = self.invoke(process, op, server=server, parent=parent, **args)
        try:
            value = await (asyncio.wait_for(fn(), timeout) if timeout is not None else fn())
        except asyncio.CancelledError as exc:
            self.fail(event, exc)
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            return event
        except Exception as exc:  # noqa: BLE001 - recorded as the call's outcome
            return self.fail(event, exc)
        event.raw = value
        return self.ok(event, summary(value))

    def to_mono(self, wall: float | None) -> float | None:
        """A Redis-clock (wall) timestamp on this history's monotonic clock."""
        return None if wall is None else wall - self.wall_offset

    def dump(self, path: Path) -> None:
        with open(path, "w") as out:
            out.write(json.dumps({"wall_offset": self.wall_offset}) + "\n")
            for e in list(self.events):
                out.write(json.dumps(e.to_json(), default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> History:
        h = cls()
        with open(path) as f:
            h.wall_offset = json.loads(f.readline())["wall_offset"]
            for line in f:
                d = json.loads(line)
                h.events.append(Event(**d))
        h._ids = itertools.count(len(h.events))
        return h


def by_id(events: Iterable[Event]) -> dict[int, Event]:
    return {e.id: e for e in events}

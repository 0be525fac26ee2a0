"""Single calls that share one batched RPC under load (Queue.put over Enqueue).

Nagle's rule: a call that finds no batch in flight goes at once, alone; calls that
arrive while one is in flight wait and go together as the next batch, sent by the
first of them. So a lone put costs one round trip as before, and many threads (or
tasks) putting at once cost the server one Enqueue per round trip instead of one
per task. A batch is all or none on the server, so when one fails INVALID_ARGUMENT
(one bad task) each of its items is sent again alone: the bad one gets its own
error and the others are added as if they had gone alone.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from .errors import Cancelled, InvalidArgument

T = TypeVar("T")
R = TypeVar("R")

MAX_BATCH = 500


class _Slot(Generic[T]):
    __slots__ = ("item", "result", "error", "lead", "done")

    def __init__(self, item: T, done: Any) -> None:
        self.item, self.result, self.error, self.lead, self.done = item, None, None, False, done

    def outcome(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


class _Batches(Generic[T]):
    """What both kinds share: the waiting slots, and who sends next."""

    def __init__(self) -> None:
        self._waiting: list[_Slot[T]] = []
        self._busy = False

    def _join(self, slot: _Slot[T]) -> bool:
        """Queues the slot; True when it must send (nothing was in flight)."""
        self._waiting.append(slot)
        lead, self._busy = not self._busy, True
        return lead

    def _take(self) -> list[_Slot[T]]:
        batch, self._waiting = self._waiting[:MAX_BATCH], self._waiting[MAX_BATCH:]
        return batch

    def _next_leader(self) -> _Slot[T] | None:
        if not self._waiting:
            self._busy = False
            return None
        self._waiting[0].lead = True
        return self._waiting[0]

    @staticmethod
    def _fill(batch: list[_Slot[T]], results: list[Any]) -> None:
        """Each slot's outcome: its result, or the exception its lone resend raised."""
        for s, r in zip(batch, results):
            s.result, s.error = (None, r) if isinstance(r, BaseException) else (r, None)

    @staticmethod
    def _wake(batch: list[_Slot[T]], nxt: _Slot[T] | None) -> None:
        """Wakes the batch's callers, and the one that sends next."""
        for s in batch:
            s.done.set()
        if nxt is not None:
            nxt.done.set()


class Coalescer(_Batches[T], Generic[T, R]):
    """For threads: ``submit(item)`` returns ``send([item, ...])``'s result for it."""

    def __init__(self, send: Callable[[list[T]], list[R]]) -> None:
        super().__init__()
        self._send = send
        self._lock = threading.Lock()

    def submit(self, item: T) -> R:
        slot: _Slot[T] = _Slot(item, threading.Event())
        with self._lock:
            lead = self._join(slot)
        if not lead:
            slot.done.wait()
            if not slot.lead:
                return slot.outcome()
        with self._lock:
            batch = self._take()
        try:
            try:
                results = self._send([s.item for s in batch])
            except InvalidArgument:
                if len(batch) == 1:
                    raise
                results = [self._alone(s.item) for s in batch]
            self._fill(batch, results)
        except Exception as exc:  # noqa: BLE001 - handed to every caller in the batch
            self._fill(batch, [exc] * len(batch))
        finally:
            with self._lock:
                nxt = self._next_leader()
            self._wake(batch, nxt)
        return slot.outcome()

    def _alone(self, item: T) -> R | Exception:
        try:
            return self._send([item])[0]
        except Exception as exc:  # noqa: BLE001 - handed to its caller
            return exc


class AsyncCoalescer(_Batches[T], Generic[T, R]):
    """For one event loop's tasks: ``await submit(item)``."""

    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]]) -> None:
        super().__init__()
        self._send = send

    async def submit(self, item: T) -> R:
        slot: _Slot[T] = _Slot(item, asyncio.Event())
        if not self._join(slot):
            try:
                await slot.done.wait()
            except asyncio.CancelledError:
                if slot in self._waiting:  # never sent; if it was to send next, the next one does
                    self._waiting.remove(slot)
                    if slot.lead and (nxt := self._next_leader()) is not None:
                        nxt.done.set()
                raise
            if not slot.lead:
                return slot.outcome()
        batch = self._take()
        try:
            try:
                results = await self._send([s.item for s in batch])
            except InvalidArgument:
                if len(batch) == 1:
                    raise
                results = [await self._alone(s.item) for s in batch]
            self._fill(batch, results)
        except Exception as exc:  # noqa: BLE001 - handed to every caller in the batch
            self._fill(batch, [exc] * len(batch))
        except asyncio.CancelledError:  # the sender was cancelled: the others learn it too
            for s in batch:
                if s.result is None and s.error is None:
                    s.error = Cancelled("the call sending this put's batch was cancelled")
            raise
        finally:
            self._wake(batch, self._next_leader())
        return slot.outcome()

    async def _alone(self, item: T) -> R | Exception:
        try:
            return (await self._send([item]))[0]
        except Exception as exc:  # noqa: BLE001 - handed to its caller
            return exc

"""Calls waiting for one named thing to finish: WaitTask, until its task finishes.

Unlike a doorbell, a message here names what finished (a task id), so it wakes
only that task's waiters however many others wait on the channel: thousands of
WaitTask calls on one queue cost one subscription and a dict lookup per finish.
The waiter then looks again, in Redis, to read the outcome.

A message may be lost while the bus reconnects, so every waiter wakes when the
subscription is confirmed (fresh or renewed) and looks again; ``*`` (a bulk delete)
wakes them all too. What the clock alone finishes (a leased task whose lease ends on
its last attempt) needs a script to run: the waiter looks again when its task's lease
ends, which runs one (see primitives/queue.py). There is no periodic poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from ..store.notifications import Bus
from .listener import Listener, Listeners

ALL = "*"
_IDLE_BEAT = 3600.0  # nothing to do on a beat: messages and renewals do the waking


class Outcome(Listener):
    """One channel's waiters, by the name each waits for."""

    _registry: Outcomes

    def __init__(self, registry: Outcomes, channel: str) -> None:
        self._waiting: dict[str, set[asyncio.Event]] = {}
        super().__init__(registry, channel)

    def add(self, name: str, event: asyncio.Event) -> None:
        if not self._waiting:
            self.wake()  # ends the idle linger
        self._waiting.setdefault(name, set()).add(event)

    def discard(self, name: str, event: asyncio.Event) -> None:
        events = self._waiting.get(name)
        if events is not None:
            events.discard(event)
            if not events:
                del self._waiting[name]
        if not self._waiting:
            self.idle()

    def waiting(self) -> int:
        return sum(len(events) for events in self._waiting.values())

    def _wake_all(self) -> None:
        for events in self._waiting.values():
            for event in events:
                event.set()

    def on_message(self, data: str) -> None:
        if data == ALL:
            self._wake_all()
        else:
            for event in self._waiting.get(data, ()):
                event.set()

    def on_subscribed(self) -> None:
        self._wake_all()

    def shut(self) -> None:
        self._wake_all()  # each woken waiter finds the registry closed: UNAVAILABLE

    def next_beat(self, now: float) -> float:
        return _IDLE_BEAT

    async def beat(self) -> None:
        pass


class Awaited:
    """One call's wait for a name: arm() before looking, then wait()."""

    def __init__(self, registry: Outcomes) -> None:
        self.event = asyncio.Event()
        self._registry = registry

    def arm(self) -> None:
        self.event.clear()

    async def wait(self, timeout: float) -> bool:
        """True when woken, False when timeout passed first."""
        return await self._registry.wait(self.event, timeout)


class Outcomes(Listeners[Outcome]):
    """The process's outcome listeners, one per channel."""

    def __init__(self, bus: Bus, linger: float = 10.0) -> None:
        super().__init__(bus, _IDLE_BEAT, linger)

    def _new(self, channel: str) -> Outcome:
        return Outcome(self, channel)

    @contextlib.asynccontextmanager
    async def watch(self, channel: str, name: str) -> AsyncIterator[Awaited]:
        """Waits until the channel is subscribed, so a finish after this is never missed."""
        self.check_open()
        awaited = Awaited(self)
        listener = self.listen(channel)
        listener.add(name, awaited.event)
        try:
            await asyncio.shield(listener.subscribed)
            yield awaited
        finally:
            listener.discard(name, awaited.event)

    def waiting(self) -> int:
        """Calls waiting now (metrics)."""
        return sum(listener.waiting() for listener in self.listeners.values())

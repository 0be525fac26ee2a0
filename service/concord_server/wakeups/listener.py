"""One channel's local waiters, and the process's registry of them.

A ``Listener`` owns its channel's subscription and one task. The task subscribes,
then, while anyone waits, runs ``beat()`` whenever it is woken and at least every
``next_beat()`` seconds (the safety net for a lost message, and for changes that
no script makes: a TTL ending, a task falling due). Once nobody has waited for
``linger`` seconds it unsubscribes and ends: a handoff loop that waits again a
moment later reuses the subscription instead of paying for a new one each time.

A subscription's outcome is reported through the ``subscribed`` future, which
blocked calls await, rather than raised in the task: a channel listed while Redis
is unreachable is subscribed by the bus's next connection, and its waits ride the
outage out.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, Generic, TypeVar

from ..errors import ConcordError, Unavailable
from ..store.notifications import Bus


class Listener(ABC):
    def __init__(self, registry: Listeners, channel: str) -> None:
        self._registry = registry
        self.channel = channel
        loop = asyncio.get_running_loop()
        self.subscribed: asyncio.Future[None] = loop.create_future()
        self.subscribed.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._wake = asyncio.Event()
        self._beat_now = False  # wake() asked for a beat; reschedule() only for a new next_beat()
        self._idle_since = loop.time()
        self.task = asyncio.create_task(self._run(), name=f"{type(self).__name__} {channel}")

    @abstractmethod
    def waiting(self) -> int:
        """Calls waiting on this channel now."""

    @abstractmethod
    def on_message(self, data: str) -> None:
        """A script published on the channel."""

    @abstractmethod
    def on_subscribed(self) -> None:
        """The subscription was confirmed (fresh, or renewed after a reconnect):
        anything published before may have been missed."""

    @abstractmethod
    def next_beat(self, now: float) -> float:
        """Seconds until beat() is due, while anyone waits."""

    @abstractmethod
    async def beat(self) -> None:
        """Woken, or next_beat() came, while someone waits."""

    @abstractmethod
    def shut(self) -> None:
        """The server is shutting down: end every wait here with UNAVAILABLE."""

    def wake(self) -> None:
        """Run beat() now."""
        self._beat_now = True
        self._wake.set()

    def reschedule(self) -> None:
        """next_beat() may now be sooner: the task looks at it again, without a beat
        before it is due (one arrival's recheck time must not cost a poll each)."""
        self._wake.set()

    def idle(self) -> None:
        """The last waiter left: the linger starts now."""
        self._idle_since = asyncio.get_running_loop().time()

    def stopping(self) -> None:
        """The task is ending: drop timers."""

    async def _run(self) -> None:
        registry, loop = self._registry, asyncio.get_running_loop()
        try:
            await registry.bus.subscribe(self.channel, self.on_message, self.on_subscribed)
        except BaseException as exc:
            self.subscribed.set_exception(exc if isinstance(exc, ConcordError) else ConcordError(str(exc)))
            registry.forget(self)
            return
        self.subscribed.set_result(None)
        try:
            while True:
                now = loop.time()
                if self.waiting():
                    timeout = self.next_beat(now)
                else:
                    idle = now - self._idle_since
                    if idle >= registry.linger:
                        break
                    timeout = registry.linger - idle
                due = False
                try:
                    async with asyncio.timeout(timeout):
                        await self._wake.wait()
                except TimeoutError:
                    due = True
                self._wake.clear()
                due, self._beat_now = due or self._beat_now, False
                if due and self.waiting():
                    await self.beat()
        finally:
            self.stopping()
            registry.forget(self)
            await registry.bus.unsubscribe(self.channel)


L = TypeVar("L", bound=Listener)


class Listeners(ABC, Generic[L]):
    """The process's listeners of one kind, one per channel.

    ``interval``: the longest a waiter goes without a look while anyone waits (and,
    for waiters, the heartbeat that proves this process alive). ``linger``: how long
    an idle listener keeps its subscription."""

    def __init__(self, bus: Bus, interval: float, linger: float) -> None:
        self.bus = bus
        self.interval = interval
        self.linger = linger
        self.listeners: dict[str, L] = {}
        self.closed = False

    @abstractmethod
    def _new(self, channel: str, *args: Any) -> L:
        """A listener for the channel (its task starts at once)."""

    def listen(self, channel: str, *args: Any) -> L:
        """The channel's listener, started (with args) if there was none."""
        listener = self.listeners.get(channel)
        if listener is None:
            listener = self.listeners[channel] = self._new(channel, *args)
        return listener

    def check_open(self) -> None:
        if self.closed:
            raise Unavailable("server is shutting down")

    async def wait(self, event: asyncio.Event, timeout: float) -> bool:
        """One call's wait for its event: True when it is set, False when timeout
        passed first; UNAVAILABLE if it was set because the server is shutting down."""
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                await event.wait()
        except TimeoutError:
            return False
        self.check_open()
        return True

    def forget(self, listener: Listener) -> None:
        if self.listeners.get(listener.channel) is listener:
            del self.listeners[listener.channel]

    def close(self) -> None:
        """Ends every blocked call with UNAVAILABLE so its client can retry elsewhere."""
        self.closed = True
        for listener in list(self.listeners.values()):
            listener.shut()

    async def aclose(self) -> None:
        """Stops every listener's task (and so its subscription); after close()."""
        tasks = [listener.task for listener in self.listeners.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

"""Blocked calls that nobody grants anything by name wait on in-process doorbells.

Queues: a task goes to whoever claims it first, so a script that makes tasks ready
publishes only how many, and each process rings that many of its own waiters on
the queue, longest-waiting first; a woken waiter runs the claim script and, if
someone else was faster, goes back to waiting in its place. Chat (``broadcast``):
every subscriber wants every message, so a message rings all of a chat's local
subscribers, and each Watch records which channels rang so a subscriber re-reads
only those chats. Per process, one subscription and one task per channel, however
many calls wait.

Pub/sub may drop a message, and some changes need no script to happen (a delayed
task falls due, a lease expires), so a doorbell also rings:

- every waiter when its subscription is confirmed (fresh, or renewed after a reconnect),
- one waiter at the moment the queue's scripts said the clock will change it
  (``recheck_in``): in a claim's reply, or published as ``due <ms>`` when a task is
  enqueued or retried with a delay,
- one waiter (broadcast: all) every ``interval`` seconds while anyone waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import random
from collections.abc import AsyncIterator, Sequence

from .errors import Unavailable
from .notifications import NotificationBus

log = logging.getLogger(__name__)


class Doorbell:
    def __init__(self, registry: Doorbells, channel: str) -> None:
        self._registry = registry
        self.channel = channel
        self._waiting: dict[int, Watch] = {}  # arrival order
        loop = asyncio.get_running_loop()
        self.subscribed: asyncio.Future[None] = loop.create_future()
        self.subscribed.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._timer: asyncio.Handle | None = None
        self._timer_at: float | None = None  # loop time the timer rings at
        self._changed = asyncio.Event()
        self._idle_since = loop.time()
        self._task = asyncio.create_task(self._run(), name=f"doorbell {channel}")

    def add(self, waiter: int, watch: Watch) -> None:
        if not self._waiting:
            self._changed.set()  # ends the idle linger: safety rings start
        self._waiting[waiter] = watch

    def discard(self, waiter: int) -> None:
        self._waiting.pop(waiter, None)
        if not self._waiting:
            self._idle_since = asyncio.get_running_loop().time()

    def ring(self, n: int = 1) -> None:
        """Wakes the n longest-waiting calls that are not awake already."""
        for watch in self._waiting.values():
            if n <= 0:
                return
            if not watch.event.is_set():
                watch.rang(self.channel)
                n -= 1

    def ring_all(self) -> None:
        for watch in self._waiting.values():
            watch.rang(self.channel)

    def _on_message(self, data: str) -> None:
        if self._registry.broadcast:
            self.ring_all()
            return
        try:
            if data.startswith("due "):
                self.recheck_in(int(data[4:]) / 1000)
            else:
                self.ring(int(data))
        except ValueError:
            log.warning("unexpected message on %s: %r", self.channel, data)

    def recheck_in(self, seconds: float) -> None:
        """Ring one waiter when the clock changes the queue (a task falls due).

        ``seconds`` comes from the Redis clock's whole milliseconds, measured before
        the reply travelled here, so it is never early by more than a fraction of a
        millisecond; a floor of 0.5 ms keeps a too-early ring from spinning."""
        loop = asyncio.get_running_loop()
        at = loop.time() + max(seconds, 0.0005)
        if self._timer_at is not None and loop.time() < self._timer_at <= at:
            return  # an earlier ring is still to come
        if self._timer is not None:
            self._timer.cancel()
        self._timer_at = at
        # uvloop returns a plain Handle (no .when()) for times already due: keep our own.
        self._timer = loop.call_at(at, self._due)

    def _due(self) -> None:
        self._timer_at = None
        self.ring()

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        if not await self._registry.bus.subscribe_reporting(self.channel, self._on_message, self.ring_all,
                                                            self.subscribed, wanted=lambda: bool(self._waiting)):
            self._registry.forget(self)
            return
        interval = self._registry.interval

        def beat() -> float:  # jittered, so the process's doorbells do not all ring at once
            return loop.time() + interval * random.uniform(0.75, 1.25)

        next_ring = beat()
        try:
            while True:
                now = loop.time()
                if self._waiting:
                    # The safety ring, on a fixed beat however often waiters come and
                    # go: a lost message cannot strand a waiter for long.
                    if now >= next_ring:
                        self.ring_all() if self._registry.broadcast else self.ring()
                        next_ring = beat()
                    timeout = next_ring - now
                else:
                    idle = now - self._idle_since
                    if idle >= self._registry.linger:
                        break
                    timeout = self._registry.linger - idle
                self._changed.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):
                        await self._changed.wait()  # a waiter arrived after an idle spell
                        if next_ring < loop.time():
                            next_ring = beat()
        finally:
            if self._timer is not None:
                self._timer.cancel()
            self._registry.forget(self)
            await self._registry.bus.unsubscribe(self.channel)


class Watch:
    """One blocked call's place at the doorbells of the channels it waits on."""

    def __init__(self, registry: Doorbells) -> None:
        self.bells: list[Doorbell] = []
        self.event = asyncio.Event()
        self.rung: set[str] = set()  # channels that rang since arm()
        self._registry = registry

    def rang(self, channel: str) -> None:
        self.rung.add(channel)
        self.event.set()

    def arm(self) -> set[str]:
        """Call before looking at the resources: a ring from then on is not missed.
        Returns the channels that rang since the last arm()."""
        rung, self.rung = self.rung, set()
        self.event.clear()
        return rung

    async def wait(self, timeout: float) -> bool:
        """True when rung, False when timeout passed first."""
        try:
            async with asyncio.timeout(timeout):
                await self.event.wait()
        except TimeoutError:
            return False
        if self._registry.closed:
            raise Unavailable("server is shutting down")
        return True


class Doorbells:
    """The process's doorbells, one per wake-up channel.

    ``broadcast`` doorbells ring every waiter on each message (chat: every subscriber
    wants every message); the others ring as many waiters as the message says
    (queues: n tasks ready, n claimants)."""

    def __init__(self, bus: NotificationBus, interval: float = 1.0, linger: float = 10.0,
                 broadcast: bool = False) -> None:
        self.bus = bus
        self.broadcast = broadcast
        self.interval = interval
        self.linger = linger
        self.bells: dict[str, Doorbell] = {}
        self.closed = False
        self._ids = itertools.count()

    @contextlib.asynccontextmanager
    async def watch(self, channels: Sequence[str]) -> AsyncIterator[Watch]:
        """Registers a waiter at each channel's doorbell and waits until all of them
        are subscribed, so a task that becomes ready after this is never missed."""
        if self.closed:
            raise Unavailable("server is shutting down")
        waiter, watch = next(self._ids), Watch(self)
        for channel in channels:
            bell = self.bells.get(channel)
            if bell is None:
                bell = self.bells[channel] = Doorbell(self, channel)
            bell.add(waiter, watch)
            watch.bells.append(bell)
        try:
            for bell in watch.bells:
                await asyncio.shield(bell.subscribed)
            yield watch
        finally:
            for bell in watch.bells:
                bell.discard(waiter)

    def waiting(self) -> int:
        """Calls waiting now at any of the doorbells, each counted once (metrics)."""
        return len({id(w) for bell in self.bells.values() for w in bell._waiting.values()})

    def bell(self, channel: str) -> Doorbell | None:
        return self.bells.get(channel)

    def close(self) -> None:
        """Wakes every blocked call; each then ends with UNAVAILABLE."""
        self.closed = True
        for bell in list(self.bells.values()):
            bell.ring_all()

    async def aclose(self) -> None:
        tasks = [b._task for b in self.bells.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def forget(self, bell: Doorbell) -> None:
        if self.bells.get(bell.channel) is bell:
            del self.bells[bell.channel]

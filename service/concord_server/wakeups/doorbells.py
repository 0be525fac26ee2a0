"""Blocked calls that nobody grants anything by name wait on in-process doorbells.

Queues: a task goes to whoever claims it first, so a script that makes tasks ready
publishes only how many, and each process rings that many of its own waiters on
the queue, longest-waiting first; a woken waiter runs the claim script and, if
someone else was faster, goes back to waiting in its place. Chat (``broadcast``):
every subscriber wants every message, so a message rings all of a chat's local
subscribers, and each Watch records which channels rang so a subscriber re-reads
only those chats; a watch may look at the message first (``hear``) and keep it, when
the message carries what the waiter wants (a chat message that travels whole). Per
process, one subscription and one task per channel, however many calls wait.

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
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from ..store.notifications import Bus
from .listener import Listener, Listeners

log = logging.getLogger(__name__)

# A broadcast watch's look at a message before it rings: (channel, data) -> True (kept:
# wake), None (ignore), False (ring). Chat streams keep messages that travel whole.
Hear = Callable[[str, str], "bool | None"]


class Doorbell(Listener):
    """The local watches on one channel, in arrival order; a message rings some or all."""

    _registry: Doorbells

    def __init__(self, registry: Doorbells, channel: str) -> None:
        self._waiting: dict[int, Watch] = {}  # arrival order
        self._timer: asyncio.Handle | None = None
        self._timer_at: float | None = None  # loop time the timer rings at
        super().__init__(registry, channel)
        self._next_ring = self._beat_after()

    def add(self, waiter: int, watch: Watch) -> None:
        if not self._waiting:
            # The safety rings start a beat from now, not from before an idle spell.
            self._next_ring = self._beat_after()
            self.wake()  # ends the idle linger
        self._waiting[waiter] = watch

    def discard(self, waiter: int) -> None:
        self._waiting.pop(waiter, None)
        if not self._waiting:
            self.idle()

    def waiting(self) -> int:
        return len(self._waiting)

    def watches(self) -> Iterable[Watch]:
        return self._waiting.values()

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

    def shut(self) -> None:
        self.ring_all()  # each woken watch finds the registry closed: UNAVAILABLE

    def on_subscribed(self) -> None:
        self.ring_all()

    def on_message(self, data: str) -> None:
        if self._registry.broadcast:
            for watch in self._waiting.values():
                watch.heard(self.channel, data)
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

    def _beat_after(self) -> float:
        """Jittered, so the process's doorbells do not all ring at once."""
        return asyncio.get_running_loop().time() + self._registry.interval * random.uniform(0.75, 1.25)

    def next_beat(self, now: float) -> float:
        return max(0.0, self._next_ring - now)

    async def beat(self) -> None:
        # The safety ring, on a fixed beat however often waiters come and go: a lost
        # message cannot strand a waiter for long.
        if asyncio.get_running_loop().time() >= self._next_ring:
            self.ring_all() if self._registry.broadcast else self.ring()
            self._next_ring = self._beat_after()

    def stopping(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class Watch:
    """One blocked call's place at the doorbells of the channels it waits on."""

    def __init__(self, registry: Doorbells, hear: Hear | None = None) -> None:
        self.bells: list[Doorbell] = []
        self.event = asyncio.Event()
        self.rung: set[str] = set()  # channels that rang since arm()
        self._registry = registry
        self._hear = hear

    def rang(self, channel: str) -> None:
        self.rung.add(channel)
        self.event.set()

    def heard(self, channel: str, data: str) -> None:
        """A message on a broadcast channel: rings, unless the watch's ``hear`` takes it."""
        if self._hear is None:
            self.rang(channel)
        elif (took := self._hear(channel, data)) is None:
            return
        elif took:
            self.event.set()
        else:
            self.rang(channel)

    def arm(self) -> set[str]:
        """Call before looking at the resources: a ring from then on is not missed.
        Returns the channels that rang since the last arm()."""
        rung, self.rung = self.rung, set()
        self.event.clear()
        return rung

    async def wait(self, timeout: float) -> bool:
        """True when rung, False when timeout passed first."""
        return await self._registry.wait(self.event, timeout)


class Doorbells(Listeners[Doorbell]):
    """The process's doorbells, one per wake-up channel.

    ``broadcast`` doorbells ring every waiter on each message (chat: every subscriber
    wants every message); the others ring as many waiters as the message says
    (queues: n tasks ready, n claimants)."""

    def __init__(self, bus: Bus, interval: float = 1.0, linger: float = 10.0,
                 broadcast: bool = False) -> None:
        super().__init__(bus, interval, linger)
        self.broadcast = broadcast
        self._ids = itertools.count()

    def _new(self, channel: str) -> Doorbell:
        return Doorbell(self, channel)

    @contextlib.asynccontextmanager
    async def watch(self, channels: Sequence[str], hear: Hear | None = None) -> AsyncIterator[Watch]:
        """Registers a waiter at each channel's doorbell and waits until all of them
        are subscribed, so a task that becomes ready after this is never missed.

        ``hear`` (broadcast only) sees each message's data first: it returns True when
        it kept what it needs (the watch wakes, no channel is marked rung), None when
        the message is nothing to this waiter, False to ring as usual. Subscription
        confirmations, safety rings and shutdown always ring."""
        self.check_open()
        waiter, watch = next(self._ids), Watch(self, hear)
        for channel in channels:
            bell = self.listen(channel)
            bell.add(waiter, watch)
            watch.bells.append(bell)
        try:
            for bell in watch.bells:
                await asyncio.shield(bell.subscribed)
            yield watch
        finally:
            for bell in watch.bells:
                bell.discard(waiter)

    def after_claim(self, ready: Iterable[str] = (), changes: Iterable[tuple[str, float]] = ()) -> None:
        """What a claim learned, for this process's other waiters: each channel in
        ``ready`` still has ready tasks (ring its next waiter); each (channel, seconds)
        in ``changes`` changes by itself that soon (ring one waiter then)."""
        for channel in ready:
            if (bell := self.listeners.get(channel)) is not None:
                bell.ring()
        for channel, seconds in changes:
            if (bell := self.listeners.get(channel)) is not None:
                bell.recheck_in(seconds)

    def waiting(self) -> int:
        """Calls waiting now at any of the doorbells, each counted once (metrics)."""
        return len({id(w) for bell in self.listeners.values() for w in bell.watches()})

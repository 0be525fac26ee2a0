"""Blocked calls wait on in-process futures, never by polling Redis in a loop.

A caller that must wait registers a *ticket* (its token) with the resource's
``WaitGroup``: the process-wide set of local waiters on one wake-up channel. The
group holds the channel's subscription and one task that wakes the right ticket
when a script publishes ``"<token> <payload>"``. Because pub/sub may drop a message,
the task also runs the resource's *poll* (one script) when:

- the subscription is confirmed (fresh, or renewed after a reconnect),
- a group is made after its first ticket's script ran (a grant may have raced it),
- the resource could change by itself (a holder's TTL ends: ``recheck_in``; the
  earliest such time is kept, and a later arrival's only reschedules the beat),
- and every ``interval`` seconds, which also proves this process is alive so its
  waiters are not skipped as dead.

So ten thousand blocked calls on one resource cost one subscription, one task and
one small script call per interval, not ten thousand of anything: a ticket's own
cost is a dict entry and its timer.

A process that could not heartbeat for its liveness window (cut off from Redis, or
its loop stalled) finds, once it can poll again, that its waiters may have been
passed over as dead and dropped from the queue. A poll names queued tokens and
learns which it no longer finds there (or which failed: a semaphore's lowered
limit); their tickets raise ``Dropped`` so the caller queues again. A healthy
process's poll names at most ``CHECK_BATCH`` of them, in turn (a lost message is
found within ``N / CHECK_BATCH`` intervals), so a poll's cost does not grow with
the number of waiters. Only when *suspect* (the last poll failed, or came more
than ``2 * interval`` after the one before, or the subscription was renewed, which
is when messages are lost) does it name every queued token, in batches of
``CHECK_BATCH`` (liveness windows must exceed ``2 * interval``: 5 s against 1 s by
default).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from ..errors import ConcordError, Unavailable
from ..store.notifications import Bus
from .listener import Listener, Listeners

log = logging.getLogger(__name__)

CHECK_BATCH = 256  # queued tokens one poll names: each script call stays short


class Dropped(Exception):
    """A queued ticket is no longer in the resource's queue, nor granted: it was
    passed over as dead while its process could not heartbeat."""


@dataclass(frozen=True)
class PollResult:
    granted: dict[str, str]  # token -> payload, for grants the poll can see
    recheck_in: float | None  # seconds until the resource may change by itself
    dropped: Collection[str] = ()  # of the tokens asked about: neither queued nor granted


# Called with the tokens its scripts have queued, to learn which were dropped.
Poll = Callable[[Collection[str]], Awaitable[PollResult]]


class WaitGroup(Listener):
    """The local tickets on one channel; a message names the token it grants."""

    _registry: Waiters

    def __init__(self, registry: Waiters, channel: str, poll: Poll) -> None:
        self._poll = poll
        self._futures: dict[str, asyncio.Future[str]] = {}
        # Tokens waiting now, which the queue in Redis must hold, in the order the polls
        # name them (a dict keeps order and removes in O(1)).
        self._queued: dict[str, None] = {}
        self._recheck_at: float | None = None
        self._polled_at: float | None = None  # when the last poll that succeeded was sent
        self._suspect = False  # whether the next poll must name every queued token
        super().__init__(registry, channel)

    def add(self, token: str, future: asyncio.Future[str]) -> None:
        self._futures[token] = future

    def queued(self, token: str, waiting: bool) -> None:
        """Whether the token's ticket is waiting (its script queued it) or not."""
        if waiting:
            self._queued.setdefault(token)
        else:
            self._queued.pop(token, None)

    def discard(self, token: str) -> None:
        self._futures.pop(token, None)
        self._queued.pop(token, None)
        if not self._futures:
            self.idle()

    def recheck_in(self, seconds: float) -> None:
        at = asyncio.get_running_loop().time() + seconds
        if self._recheck_at is None or at < self._recheck_at:
            self._recheck_at = at
            self.reschedule()

    def waiting(self) -> int:
        return len(self._futures)

    def _next_checks(self) -> list[str]:
        """The next CHECK_BATCH queued tokens in turn (each goes to the back again)."""
        batch = list(itertools.islice(self._queued, CHECK_BATCH))
        for token in batch:
            del self._queued[token]
            self._queued[token] = None
        return batch

    def shut(self) -> None:
        for fut in self._futures.values():
            if not fut.done():
                fut.set_exception(Unavailable("server is shutting down"))

    def _resolve(self, token: str, payload: str) -> bool:
        fut = self._futures.get(token)
        if fut is None:
            return False
        if fut.cancelled():
            # The ticket's last wait timed out (cancelling its future) and its next has
            # not begun: keep the payload for it (Ticket.rearm takes it up).
            fut = self._futures[token] = asyncio.get_running_loop().create_future()
        if fut.done():
            return False
        fut.set_result(payload)
        return True

    def kept(self, token: str, stale: asyncio.Future[str]) -> asyncio.Future[str] | None:
        """The future _resolve put in place of ``stale`` for the token, if any."""
        fut = self._futures.get(token)
        return fut if fut is not None and fut is not stale else None

    def on_message(self, data: str) -> bool:
        """Wakes the ticket the message names; whether one was waiting here."""
        token, _, payload = data.partition(" ")
        return self._resolve(token, payload)

    def on_subscribed(self) -> None:
        self._suspect = True  # a renewed subscription may have lost a grant or a failure
        self.wake()

    def next_beat(self, now: float) -> float:
        if self._recheck_at is None:
            return self._registry.interval
        return max(0.0, min(self._registry.interval, self._recheck_at - now))

    async def beat(self) -> None:
        loop = asyncio.get_running_loop()
        self._recheck_at = None
        sent = loop.time()
        # A poll soon after the last good one (or a fresh group's first, right after its
        # tickets' scripts heartbeat) has nothing to suspect.
        suspect = self._suspect or (self._polled_at is not None
                                    and sent - self._polled_at > 2 * self._registry.interval)
        batches = _batches(list(self._queued), CHECK_BATCH) if suspect else [self._next_checks()]
        self._suspect = False
        recheck_in: float | None = None
        for batch in batches:
            try:
                result = await self._poll(batch)
            except ConcordError as exc:
                log.debug("poll of %s failed: %s", self.channel, exc)
                self._suspect = True
                return
            for token, payload in result.granted.items():
                self._resolve(token, payload)
            for token in result.dropped:
                fut = self._futures.get(token)
                if token in self._queued and fut is not None and not fut.done():
                    fut.set_exception(Dropped(token))
            recheck_in = result.recheck_in
        self._polled_at = sent
        if recheck_in is not None:
            self._recheck_at = loop.time() + recheck_in


def _batches(tokens: list[str], size: int) -> list[list[str]]:
    return [tokens[i:i + size] for i in range(0, len(tokens), size)] or [[]]


class Ticket:
    """One blocked call's place in the WaitGroups of the channels it waits on (one;
    several for a waiter for several locks, woken by any of them); use as a context
    manager. One future serves every channel: a wake-up costs the call one future and
    one timer however many channels it waits on."""

    def __init__(self, registry: Waiters, channels: Sequence[tuple[str, Poll]], token: str) -> None:
        self._registry = registry
        self._channels = channels
        self._token = token
        registry.check_open()
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        # Join existing groups now, before the caller's script runs, so a grant
        # published right after it cannot slip past.
        self._groups: list[WaitGroup | None] = [registry.listeners.get(channel) for channel, _ in channels]
        for group in self._groups:
            if group is not None:
                group.add(token, self.future)

    async def wait(self, timeout: float, recheck_in: float | None) -> str | None:
        """The grant's payload, or None when timeout passes first. Call it after the
        script queued the token; raises Dropped if the queue dropped it meanwhile
        (queue again, then wait again)."""
        if self.future.cancelled() or (self.future.done() and isinstance(self.future.exception(), Dropped)):
            self.rearm()  # the last wait timed out, or this token was queued again since it was dropped
        groups: list[WaitGroup] = []
        for i, group in enumerate(self._groups):
            if group is None:
                channel, poll = self._channels[i]
                group = self._groups[i] = self._registry.listen(channel, poll)
                group.add(self._token, self.future)
                group.wake()  # the script ran before we joined: look once
            if recheck_in is not None:
                group.recheck_in(recheck_in)
            group.queued(self._token, True)
            groups.append(group)
        try:
            async with asyncio.timeout(timeout):
                for group in groups:
                    if not group.subscribed.done():
                        await asyncio.shield(group.subscribed)
                    elif group.subscribed.exception() is not None:
                        raise group.subscribed.exception()
                # Awaited directly, not through a shield: a grant then resumes the caller
                # one loop step after it is delivered, not two (the releaser relies on
                # that: Locks.release). A timeout cancels the future; a grant that comes
                # before the next wait is kept for it (WaitGroup._resolve, rearm).
                return await self.future
        except TimeoutError:
            return self.future.result() if self.future.done() and not self.future.cancelled() else None
        finally:
            for group in groups:
                group.queued(self._token, False)

    def rearm(self) -> None:
        """After a wait that timed out, a wake-up that granted nothing (a waiter for
        several locks told to try again) or a drop, waits for the next one; a grant that
        came while no wait ran (WaitGroup._resolve kept it) is taken up at once."""
        if not self.future.done():
            return
        stale = self.future
        kept = next((f for g in self._groups if g is not None and (f := g.kept(self._token, stale)) is not None), None)
        self.future = kept or asyncio.get_running_loop().create_future()
        for group in self._groups:
            if group is not None:
                group.add(self._token, self.future)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc: object) -> None:
        for group in self._groups:
            if group is not None:
                group.discard(self._token)


class Waiters(Listeners[WaitGroup]):
    """The process's WaitGroups, one per wake-up channel."""

    def __init__(self, bus: Bus, interval: float = 1.0, linger: float = 10.0) -> None:
        super().__init__(bus, interval, linger)
        # Told (primitive, seconds) when a queued acquire is granted (metrics.py).
        self.on_handoff: Callable[[str, float], None] | None = None

    def waiting(self) -> int:
        """Tickets waiting now, in all groups (metrics)."""
        return sum(g.waiting() for g in self.listeners.values())

    def deliver(self, channel: str, message: str) -> bool:
        """A grant this process's own script made (a release's reply names it): wakes
        the local ticket it is for at once, instead of after the pub/sub copy's round
        trip (which then finds the ticket done). Returns whether a ticket here woke
        (False when the waiter is elsewhere); its caller resumes at the next loop step."""
        group = self.listeners.get(channel)
        return group is not None and group.on_message(message)

    def ticket(self, channel: str, token: str, poll: Poll) -> Ticket:
        return Ticket(self, [(channel, poll)], token)

    def tickets(self, channels: Sequence[tuple[str, Poll]], token: str) -> Ticket:
        """One ticket for a waiter on several channels (its token in each group)."""
        return Ticket(self, channels, token)

    def _new(self, channel: str, poll: Poll) -> WaitGroup:
        return WaitGroup(self, channel, poll)

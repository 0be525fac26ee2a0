"""Blocked calls wait on in-process futures, never by polling Redis in a loop.

A caller that must wait registers a *ticket* (its token) with the resource's
``WaitGroup``: the process-wide set of local waiters on one wake-up channel. The
group holds the channel's subscription and one task that wakes the right ticket
when a script publishes ``"<token> <payload>"``. Because pub/sub may drop a message,
the task also runs the resource's *poll* (one script) when:

- the subscription is confirmed (fresh, or renewed after a reconnect),
- a ticket joins a group that already existed (a grant may have raced the join),
- the resource could change by itself (a holder's TTL ends: ``recheck_in``),
- and every ``interval`` seconds, which also proves this process is alive so its
  waiters are not skipped as dead.

So ten thousand blocked calls on one resource cost one subscription, one task and
one script call per interval, not ten thousand of anything.

A process that could not heartbeat for its liveness window (cut off from Redis)
finds, once it can poll again, that its waiters may have been passed over as dead
and dropped from the queue. The poll names the queued tokens it no longer finds
there; their tickets raise ``Dropped`` so the caller queues again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass

from .errors import ConcordError, Unavailable
from .notifications import NotificationBus

log = logging.getLogger(__name__)


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


class WaitGroup:
    def __init__(self, registry: Waiters, channel: str, poll: Poll) -> None:
        self._registry = registry
        self.channel = channel
        self._poll = poll
        self._futures: dict[str, asyncio.Future[str]] = {}
        self._queued: set[str] = set()  # tokens waiting now, which the queue in Redis must hold
        loop = asyncio.get_running_loop()
        self.subscribed: asyncio.Future[None] = loop.create_future()
        self.subscribed.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._wake = asyncio.Event()
        self._recheck_at: float | None = None
        self._idle_since = loop.time()
        self._task = asyncio.create_task(self._run(), name=f"waitgroup {channel}")

    def add(self, token: str, future: asyncio.Future[str]) -> None:
        self._futures[token] = future

    def queued(self, token: str, waiting: bool) -> None:
        """Whether the token's ticket is waiting (its script queued it) or not."""
        if waiting:
            self._queued.add(token)
        else:
            self._queued.discard(token)

    def discard(self, token: str) -> None:
        self._futures.pop(token, None)
        self._queued.discard(token)
        if not self._futures:
            self._idle_since = asyncio.get_running_loop().time()

    def poke(self) -> None:
        self._wake.set()

    def recheck_in(self, seconds: float) -> None:
        at = asyncio.get_running_loop().time() + seconds
        if self._recheck_at is None or at < self._recheck_at:
            self._recheck_at = at
            self._wake.set()

    def fail_all(self, exc: Exception) -> None:
        for fut in self._futures.values():
            if not fut.done():
                fut.set_exception(exc)

    def _resolve(self, token: str, payload: str) -> None:
        fut = self._futures.get(token)
        if fut is not None and not fut.done():
            fut.set_result(payload)

    def _on_message(self, data: str) -> None:
        token, _, payload = data.partition(" ")
        self._resolve(token, payload)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        if not await self._registry.bus.subscribe_reporting(self.channel, self._on_message, self.poke, self.subscribed,
                                                            wanted=lambda: bool(self._futures)):
            self._registry.forget(self)
            return
        try:
            while True:
                now = loop.time()
                if not self._futures:
                    if now - self._idle_since >= self._registry.linger:
                        break
                    timeout = self._registry.linger - (now - self._idle_since)
                else:
                    timeout = self._registry.interval
                    if self._recheck_at is not None:
                        timeout = max(0.0, min(timeout, self._recheck_at - now))
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout)
                except TimeoutError:
                    pass
                self._wake.clear()
                if self._futures:
                    await self._poll_once(loop)
        finally:
            self._registry.forget(self)
            await self._registry.bus.unsubscribe(self.channel)

    async def _poll_once(self, loop: asyncio.AbstractEventLoop) -> None:
        self._recheck_at = None
        try:
            result = await self._poll(list(self._queued))
        except ConcordError as exc:
            log.debug("poll of %s failed: %s", self.channel, exc)
            return
        for token, payload in result.granted.items():
            self._resolve(token, payload)
        for token in result.dropped:
            fut = self._futures.get(token)
            if token in self._queued and fut is not None and not fut.done():
                fut.set_exception(Dropped(token))
        if result.recheck_in is not None:
            self._recheck_at = loop.time() + result.recheck_in


class Ticket:
    """One blocked call's place in its WaitGroup; use as a context manager."""

    def __init__(self, registry: Waiters, channel: str, token: str, poll: Poll) -> None:
        self._registry = registry
        self._channel = channel
        self._token = token
        self._poll = poll
        if registry.closed:
            raise Unavailable("server is shutting down")
        self.future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        # Join an existing group now, before the caller's script runs, so a grant
        # published right after it cannot slip past.
        self._group = registry.groups.get(channel)
        if self._group is not None:
            self._group.add(token, self.future)

    async def wait(self, timeout: float, recheck_in: float | None) -> str | None:
        """The grant's payload, or None when timeout passes first. Call it after the
        script queued the token; raises Dropped if the queue dropped it meanwhile
        (queue again, then wait again)."""
        group = self._group
        if group is None:
            group = self._group = self._registry.join(self._channel, self._poll)
            group.add(self._token, self.future)
            group.poke()  # the script ran before we joined: look once
        elif self.future.done() and isinstance(self.future.exception(), Dropped):  # queued again since
            self.future = asyncio.get_running_loop().create_future()
            group.add(self._token, self.future)
        if recheck_in is not None:
            group.recheck_in(recheck_in)
        group.queued(self._token, True)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(group.subscribed)
                return await asyncio.shield(self.future)
        except TimeoutError:
            return self.future.result() if self.future.done() else None
        finally:
            group.queued(self._token, False)

    def __enter__(self) -> Ticket:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._group is not None:
            self._group.discard(self._token)


class Waiters:
    """The process's registry of WaitGroups, one per wake-up channel."""

    def __init__(self, bus: NotificationBus, interval: float = 1.0, linger: float = 10.0) -> None:
        self.bus = bus
        self.interval = interval  # heartbeat and safety re-check period
        self.linger = linger  # keep an idle subscription this long: handoff loops reuse it
        self.groups: dict[str, WaitGroup] = {}
        self.closed = False
        # Told (primitive, seconds) when a queued acquire is granted (metrics.py).
        self.on_handoff: Callable[[str, float], None] | None = None

    def waiting(self) -> int:
        """Tickets waiting now, in all groups (metrics)."""
        return sum(len(g._futures) for g in self.groups.values())

    def close(self) -> None:
        """Ends every blocked call with UNAVAILABLE so its client can retry elsewhere."""
        self.closed = True
        for group in list(self.groups.values()):
            group.fail_all(Unavailable("server is shutting down"))

    async def aclose(self) -> None:
        """Stops every group's task (and so its subscription); after close()."""
        tasks = [g._task for g in self.groups.values()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def ticket(self, channel: str, token: str, poll: Poll) -> Ticket:
        return Ticket(self, channel, token, poll)

    def join(self, channel: str, poll: Poll) -> WaitGroup:
        group = self.groups.get(channel)
        if group is None:
            group = self.groups[channel] = WaitGroup(self, channel, poll)
        return group

    def forget(self, group: WaitGroup) -> None:
        if self.groups.get(group.channel) is group:
            del self.groups[group.channel]

"""FIFO waiting for locks and semaphores, and keeping what was granted.

One script tries to take the resource and, failing that, joins its FIFO queue: the
uncontended path is that one round trip. A queued caller then waits on a ticket
(wakeups/waiters.py) for the grant's notification. On timeout it leaves the queue,
keeping a grant that raced the timeout. If the caller goes away or Redis fails
mid-way, it lets go in the background (letting_go.py): leaves the queue or passes
on whatever reached it. A caller dropped from the queue as dead while its process
could not reach Redis queues again (at the back) for the rest of its wait.

A primitive takes part as a ``FifoPrimitive`` and through a ``Claim``: one caller's
claim, which runs the primitive's scripts; ``acquire_queued`` drives it the same
way for every primitive.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, NamedTuple, Protocol, TypeVar

from .. import tallies
from ..errors import Unavailable
from ..keys import KeySpace, seen_marker
from ..store.client import confirm_seen
from ..store.scripts import Commands
from ..wakeups.waiters import Dropped, PollResult, Waiters
from .deadlocks import Deadlocks, deadlock_error, watching
from .letting_go import LATE, Releaser, answer_within


# Seconds past its wait a call's give-up (leaving the queue, keeping a grant that raced
# it) may take; past that the call answers "not acquired" and lets go in the background
# (so a loaded Redis or loop costs the caller a raced grant, not the answer's bound).
GIVE_UP_WITHIN = 0.1


class Held(Protocol):
    @property
    def expires_at_ms(self) -> int: ...  # Redis clock


G = TypeVar("G", bound=Held)
T = TypeVar("T")


class Attempt(NamedTuple, Generic[G]):
    """The outcome of one run of the acquire script."""

    grant: G | None  # None: queued
    recheck_ms: int  # ms until the resource may free itself by the clock (a TTL ends), or -1
    now_ms: int  # the Redis clock when it ran


class FifoPrimitive:
    """What a primitive whose callers queue in Redis keeps (Locks, Semaphores).

    ``process_id`` names this process in the queues it joins; it proves it is alive
    by polling every ``waiters.interval`` seconds while it has waiters, and its
    waiters are skipped once it has been silent for ``liveness_ms``."""

    def __init__(self, redis: Commands, keyspace: KeySpace, waiters: Waiters, *, process_id: str,
                 liveness_ms: int = 5000) -> None:
        self._redis = redis
        self._keys = keyspace
        self._waiters = waiters
        self._process_id = process_id
        self._liveness_ms = liveness_ms
        self._releaser = Releaser()

    def _waiting_args(self, wait_ms: int) -> tuple[int, str, int]:
        """An acquire script's last ARGV: wait ms (0 = try once), this process, its liveness window."""
        return max(wait_ms, 0), self._process_id, self._liveness_ms if wait_ms > 0 else 0

    async def confirm_seen(self, channel: str) -> None:
        """With replica acks, returns once the replicas have a grant another connection
        wrote and announced on ``channel``; raises Unavailable if they do not."""
        await confirm_seen(self._redis, seen_marker(channel))

    @abstractmethod
    def let_go(self, name: str, token: str, within_ms: int) -> None:
        """Releases or leaves the queue in the background (letting_go.Releaser)."""

    @abstractmethod
    async def _poll(self, k: Any, queued: Collection[str]) -> PollResult:
        """The resource's poll script (waiters.Poll)."""

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for background releases to reach Redis; used at shutdown."""
        await self._releaser.drain(timeout)


@dataclass
class Claim(ABC, Generic[G]):
    """One caller's claim on a lock or semaphore: what acquire_queued needs of it.
    The primitive implements the three steps that run its own scripts."""

    primitive: ClassVar[str]  # "lock", "semaphore": the handoff metric's label
    of: FifoPrimitive
    name: str
    k: Any  # the resource's keys
    channel: str  # the resource's wake-up channel
    token: str  # names the caller in the resource's queue and in grant notifications
    ttl_ms: int
    wait_ms: int
    owner: str
    noted = False  # whether the listing index has this claim's names (primitives/listing.py)

    def to_note(self, names: list[str]) -> list[str]:
        """The names an attempt notes: all on the first, none after (while the claim is
        queued or holds, its resource is live, so no listing drops it)."""
        if self.noted:
            return []
        self.noted = True
        return names

    @abstractmethod
    async def attempt(self) -> Attempt[G]:
        """Runs the acquire script: granted, or queued (waiting only if wait_ms > 0)."""

    @abstractmethod
    def granted(self, payload: str) -> G:
        """The grant a notification (or the poll) carried; may raise the primitive's
        error when the payload says the wait failed."""

    @abstractmethod
    async def give_up(self) -> G | None:
        """Leaves the queue at the wait's end; returns a grant that raced it."""

    def let_go(self) -> None:
        """Leaves the queue or releases, in the background (the call is going away)."""
        self.of.let_go(self.name, self.token, max(self.wait_ms, 0) + self.ttl_ms)

    def poll(self, queued: Collection[str]) -> Awaitable[PollResult]:
        return self.of._poll(self.k, queued)

    async def give_up_by(self, until: float) -> G | None:
        """give_up(), answered by loop time ``until``: past it, None, and the claim
        lets go in the background of whatever reached it."""
        try:
            async with asyncio.timeout_at(until):
                return await self.give_up()
        except TimeoutError:
            self.let_go()
            return None


async def acquire_queued(waiters: Waiters, claim: Claim[G], wait_ms: int, deadlocks: Deadlocks | None = None) -> G | None:
    """The grant, or None if the resource was not free within wait_ms (0 = try once).
    With ``deadlocks``, a wait that closes a cycle of lock holders (and is its
    youngest) gives up and raises Deadlock (primitives/deadlocks.py)."""
    if wait_ms <= 0:
        async with answer_within(0, claim.let_go):
            return (await claim.attempt()).grant
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_ms / 1000
    with waiters.ticket(claim.channel, claim.token, claim.poll) as ticket:
        async with answer_within(wait_ms, claim.let_go) as bound, \
                watching(deadlocks, claim.owner, claim.token, [claim.name], claim.wait_ms) as watch:
            while True:
                # Only a script in flight is bounded by answer_within (Redis away: UNAVAILABLE);
                # the wait, the looks and the give-up bound themselves, so a loop that runs
                # behind under load answers late "not acquired", never UNAVAILABLE.
                bound.reschedule(deadline + LATE)
                grant, recheck_ms, queued_ms = await claim.attempt()
                if grant is not None:
                    return grant
                bound.reschedule(None)
                queued_at = loop.time()
                watch.queued(queued_ms)
                cycle = None
                try:
                    while True:
                        left = deadline - loop.time()
                        payload = await ticket.wait(watch.wait_for(left),
                                                    recheck_in=(recheck_ms + 1) / 1000 if recheck_ms > 0 else None)
                        if payload is not None or loop.time() >= deadline:
                            break
                        if (cycle := await watch.look(deadline)) is not None:
                            break
                except Dropped:
                    if loop.time() < deadline:
                        continue
                    payload = None
                if cycle is not None:
                    kept = await claim.give_up_by(max(loop.time(), deadline) + GIVE_UP_WITHIN)
                    if kept is not None:
                        return kept
                    raise deadlock_error(claim.name, cycle)
                if payload is None:
                    return await claim.give_up_by(deadline + GIVE_UP_WITHIN)
                grant = claim.granted(payload)
                # Another connection (a release, maybe on another server) wrote this grant,
                # so this call's own WAITs do not cover it: with replica acks it is given
                # only once the replicas have it (else let go: UNAVAILABLE).
                bound.reschedule(max(loop.time(), deadline) + LATE)
                await claim.of.confirm_seen(claim.channel)
                tallies.count(claim.primitive)  # the console's handoffs per second (tallies.py)
                if waiters.on_handoff is not None:
                    granted_ms = grant.expires_at_ms - claim.ttl_ms
                    waiters.on_handoff(claim.primitive, _handoff(queued_ms, queued_at, granted_ms, loop.time()))
                return grant


async def hand_on_first() -> None:
    """Called by a release that has just woken a waiter of this process
    (Waiters.deliver): steps aside for one loop step, in which the waiter resumes
    and answers its client, before the release answers its own. The grant is what
    the next holder waits for, the release's answer nobody: sent first, its socket
    write (and the wake-up of the client it goes to) would delay the grant."""
    await asyncio.sleep(0)


def _handoff(queued_ms: int, queued_at: float, granted_ms: int, resumed_at: float) -> float:
    """Seconds from the grant in Redis to the waiter resuming here, without comparing
    two machines' clocks: the time waited here less the time Redis kept the waiter
    queued (both clocks measure only an interval). Redis whole ms make it +-1 ms;
    the acquire reply's travel time is not counted."""
    return max(0.0, (resumed_at - queued_at) - (granted_ms - queued_ms) / 1000)


async def _never_lost(within: float) -> bool:
    await asyncio.sleep(within)
    return False


async def keep_alive(refresh: Callable[[], Awaitable[T]], not_held: type[Exception], ttl_ms: int,
                     lost: Callable[[float], Awaitable[bool]] = _never_lost) -> AsyncIterator[T]:
    """Calls refresh() every ttl/3 and yields each result; returns when the hold is
    lost: refresh raised ``not_held``, or Redis could not confirm a refresh before the
    TTL, counted from before the last confirmed one was sent, ran out, or ``lost``
    (which waits up to the time given until the next refresh) found it gone sooner."""
    loop = asyncio.get_running_loop()
    period = ttl_ms / 3000
    valid_until = loop.time() + ttl_ms / 1000
    delay = period
    while True:
        if await lost(delay):
            return
        sent = loop.time()
        try:
            renewed = await refresh()
        except not_held:
            return
        except Unavailable:
            if loop.time() >= valid_until:
                return
            delay = min(period, max(0.01, (valid_until - loop.time()) / 4))
            continue
        valid_until = sent + ttl_ms / 1000
        delay = period
        yield renewed

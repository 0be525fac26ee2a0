"""Distributed locks: exclusive, expiring, fenced, with a FIFO queue of waiters.

Every state change is one Lua script (lua/lock_*.lua) on the Redis server clock, and
all of a lock's keys share one hash tag. Acquiring a free lock is one round trip.
A contended acquire joins the lock's queue in the same script and then waits on an
in-process future: the script that frees the lock (release, withdraw, or a poll
after the holder's TTL ran out) hands it straight to the queue's live head and
publishes the grant, so a handoff costs no extra round trip and nobody polls.

Imports no grpc: api/lock.py maps its errors to status codes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from functools import partial
from typing import NamedTuple

from ..errors import LockNotHeld
from ..keys import KeySpace, LockKeys
from ..reply_shapes import ANY, Codes, INT, STR, Seq, Tagged, Tup
from ..scripts import Commands, script
from ..statuses import ACQUIRE, HELD, WITHDRAW
from ..wakeups.waiters import PollResult, Waiters
from .fifo_acquire import Attempt, Claim, FifoPrimitive, acquire_queued, keep_alive
from .listing import scan_names

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class AcquireReply(NamedTuple):
    status: int  # ACQUIRE.*
    fence: int
    ms: int  # ACQUIRED: the lock's TTL; else the holder's remaining TTL
    now_ms: int


class RefreshReply(NamedTuple):
    status: int  # HELD.*
    fence: int = 0
    now_ms: int = 0


class WithdrawReply(NamedTuple):
    status: int  # WITHDRAW.*
    fence: int = 0  # KEPT: the grant's fence, remaining TTL and the clock
    pttl_ms: int = 0
    now_ms: int = 0


class PollReply(NamedTuple):
    holder: str  # the holder's lease, or ''
    fence: int
    pttl_ms: int
    now_ms: int
    dropped: list[str]  # the leases asked about that are neither queued nor holding


class DescribeReply(NamedTuple):
    held: int  # 0/1
    owner: str
    fence: int
    pttl_ms: int
    waiters: int
    now_ms: int


class ForceReleaseReply(NamedTuple):
    status: int  # HELD.*
    fence: int = 0  # HELD: the removed holder's
    owner: str = ""


_ACQUIRE = script("lock_acquire.lua", Tup(Codes(*ACQUIRE.codes()), INT, INT, INT), decode=AcquireReply._make)
_RELEASE = script("lock_release.lua", Codes(*HELD.codes()))
_REFRESH = script("lock_refresh.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(INT, INT)}),
                  decode=lambda r: RefreshReply(*r))
_WITHDRAW = script("lock_withdraw.lua",
                   Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.NOT_WAITING: Tup(), WITHDRAW.PASSED_ON: Tup(),
                           WITHDRAW.KEPT: Tup(INT, INT, INT)}),
                   decode=lambda r: WithdrawReply(*r))
_POLL = script("lock_poll.lua", Seq(STR, INT, INT, INT, each=(STR,)), decode=lambda r: PollReply(*r[:4], r[4:]))
_DESCRIBE = script("lock_describe.lua", Tup(Codes(0, 1), STR, INT, INT, INT, INT), decode=DescribeReply._make)
_FORCE_RELEASE = script("lock_force_release.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(ANY, ANY)}),
                        decode=lambda r: ForceReleaseReply(*r))

SCRIPTS = (_ACQUIRE, _RELEASE, _REFRESH, _WITHDRAW, _POLL, _DESCRIBE, _FORCE_RELEASE)


@dataclass(frozen=True)
class Grant:
    lease: str
    fencing_token: int
    expires_at_ms: int  # Redis server clock, ms since the epoch


@dataclass(frozen=True)
class LockState:
    held: bool
    owner: str
    fencing_token: int
    ttl_remaining_ms: int
    waiters: int
    now_ms: int


class Locks(FifoPrimitive):
    """The lock primitive of one server process (see FifoPrimitive for process_id and
    liveness_ms).

    ``fence_retention_ms`` is how long the last fencing token is remembered after the
    lock's last grant; past it, tokens still increase because they are at least the
    Redis clock in microseconds.
    """

    def __init__(self, redis: Commands, keyspace: KeySpace, waiters: Waiters, *, process_id: str,
                 liveness_ms: int = 5000, fence_retention_ms: int = 7 * 86_400_000) -> None:
        super().__init__(redis, keyspace, waiters, process_id=process_id, liveness_ms=liveness_ms)
        self._fence_retention_ms = fence_retention_ms

    def _run(self, s, k: LockKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, self._fence_retention_ms, *args])

    async def acquire(self, name: str, ttl_ms: int, wait_ms: int, owner: str) -> Grant | None:
        """The lock's grant, or None if it was not free within wait_ms (0 = try once)."""
        k = self._keys.lock(name)
        claim = _LockClaim(self, name, k, k.channel, secrets.token_hex(16), ttl_ms, wait_ms, owner)
        return await acquire_queued(self._waiters, claim, wait_ms)

    async def release(self, name: str, lease: str) -> None:
        k = self._keys.lock(name)
        if await self._run(_RELEASE, k, lease) != HELD.HELD:
            raise LockNotHeld(f"lock {name!r} is not held by this lease", name=name)

    async def refresh(self, name: str, lease: str, ttl_ms: int) -> Grant:
        k = self._keys.lock(name)
        reply = await self._run(_REFRESH, k, lease, ttl_ms)
        if reply.status != HELD.HELD:
            raise LockNotHeld(f"lock {name!r} is not held by this lease", name=name)
        return Grant(lease, reply.fence, reply.now_ms + ttl_ms)

    async def describe(self, name: str) -> LockState:
        r = await self._run(_DESCRIBE, self._keys.lock(name))
        return LockState(r.held == 1, r.owner, r.fence, max(r.pttl_ms, 0), r.waiters, r.now_ms)

    async def force_release(self, name: str) -> tuple[str, int] | None:
        """An operator's release, whoever holds the lock: (owner, fencing token) of the
        holder removed, or None when nobody held it. The next waiter gets it."""
        reply = await self._run(_FORCE_RELEASE, self._keys.lock(name))
        return (reply.owner, reply.fence) if reply.status == HELD.HELD else None

    async def names(self, page_token: str, count: int) -> tuple[list[str], str]:
        """A page of the locks that are held or have waiters (listing.scan_names)."""
        return await scan_names(self._redis, self._keys, "lock", ("holder", "queue"), page_token, count)

    def keep_alive(self, name: str, grant: Grant, ttl_ms: int) -> AsyncIterator[Grant]:
        """Refreshes the lock every ttl/3 and yields each renewed grant; ends when the
        lock is lost (see fifo_acquire.keep_alive)."""
        return keep_alive(partial(self.refresh, name, grant.lease, ttl_ms), LockNotHeld, ttl_ms)

    def let_go(self, name: str, lease: str, within_ms: int) -> None:
        """Releases the lock or leaves its queue in the background, retrying while
        Redis is unreachable for up to within_ms (after which Redis forgets it anyway)."""
        k = self._keys.lock(name)
        self._releaser.let_go(lambda: self._run(_WITHDRAW, k, lease, 1), within_ms, k.holder)

    async def _poll(self, k: LockKeys, queued: Collection[str]) -> PollResult:
        r = await self._run(_POLL, k, self._process_id, self._liveness_ms, *queued)
        granted = {r.holder: f"{r.fence} {r.now_ms + r.pttl_ms}"} if r.holder else {}
        return PollResult(granted, (r.pttl_ms + 1) / 1000 if r.pttl_ms > 0 else None, r.dropped)


class _LockClaim(Claim[Grant]):
    """One Acquire's claim on a lock; its token is the lease."""

    primitive = "lock"
    of: Locks

    async def attempt(self) -> Attempt[Grant]:
        r = await self.of._run(_ACQUIRE, self.k, self.token, self.ttl_ms, self.owner,
                               *self.of._waiting_args(self.wait_ms))
        return Attempt(self._grant(r.fence, r.now_ms + r.ms) if r.status == ACQUIRE.ACQUIRED else None,
                       r.ms, r.now_ms)

    def granted(self, payload: str) -> Grant:
        fence, expires_ms = payload.split()
        return self._grant(int(fence), int(expires_ms))

    async def give_up(self) -> Grant | None:
        kept = await self.of._run(_WITHDRAW, self.k, self.token, 0)
        return self._grant(kept.fence, kept.now_ms + kept.pttl_ms) if kept.status == WITHDRAW.KEPT else None

    def _grant(self, fence: int, expires_at_ms: int) -> Grant:
        return Grant(self.token, fence, expires_at_ms)

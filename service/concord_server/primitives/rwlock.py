"""Read-write locks: readers share, a writer excludes everyone; FIFO-fair, each holder
with its own TTL and fencing token.

Every state change is one Lua script (lua/rwlock_*.lua) on the Redis server clock, and
all of a lock's keys share one hash tag. The holders are a zset of leases scored by
their expiry (swept by every script, as the semaphore's are), each with its mode,
fencing token and owner beside it; the fencing counter is one per name, so tokens
strictly increase over every grant, readers' and writers' alike.

Taking a free (or read-held, for a reader) lock with nobody queued is one round trip.
Otherwise the caller joins the FIFO queue in the same script (waiting.lua, with its
process liveness) and waits on a future (primitives/fifo_acquire.py). ``grant_next``
(lua/include/rwlock_common.lua) admits waiters from the head while the head fits
beside the holders: the head blocks everyone behind it, so a writer queued behind
readers is not overtaken by readers that came later, and the readers queued behind a
writer enter together once it is gone.

Imports no grpc: api/rwlock.py maps its errors to status codes.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from ..errors import LockNotHeld
from ..keys import KeySpace, RWLockKeys
from ..store.reply_shapes import INT, STR, Codes, Seq, Tagged, Tup
from ..store.scripts import Commands, script
from ..statuses import ACQUIRE, HELD, WITHDRAW
from ..wakeups.waiters import PollResult, Waiters
from .fifo_acquire import Attempt, Claim, FifoPrimitive, acquire_queued, keep_alive
from .listing import noting, scan_summaries

LISTED = "rw"  # the listing index's kind (primitives/listing.py): the keys' tag

READ, WRITE = 1, 2  # the proto's Mode values, as the scripts store them
MODES = (READ, WRITE)

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class AcquireReply(NamedTuple):
    status: int  # ACQUIRE.*
    fence: int  # ACQUIRED: the hold's; else 0
    ms: int  # ACQUIRED: the hold's remaining TTL; else until the first holder expires (-1: none)
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
    next_ms: int  # until the first holder expires (-1: none)
    now_ms: int
    leases: list[Any]  # lease, state (1 holds, 0 dropped), fence, expires ms, ... for leases not queued


class DescribeReply(NamedTuple):
    now_ms: int
    holders: int  # how many of the groups are holders; the rest are waiters
    groups: list[Any]  # mode, owner, fence (0 for waiters), ms left (TTL, or wait), ...


_ACQUIRE = script("rwlock_acquire.lua", Tup(Codes(*ACQUIRE.codes()), INT, INT, INT), decode=AcquireReply._make)
_RELEASE = script("rwlock_release.lua", Codes(*HELD.codes()))
_REFRESH = script("rwlock_refresh.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(INT, INT)}),
                  decode=lambda r: RefreshReply(*r))
_WITHDRAW = script("rwlock_withdraw.lua",
                   Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.NOT_WAITING: Tup(), WITHDRAW.PASSED_ON: Tup(),
                           WITHDRAW.KEPT: Tup(INT, INT, INT)}),
                   decode=lambda r: WithdrawReply(*r))
_POLL = script("rwlock_poll.lua", Seq(INT, INT, each=(STR, Codes(0, 1), INT, INT)),
               decode=lambda r: PollReply(r[0], r[1], r[2:]))
class SummaryReply(NamedTuple):
    write_held: int  # 0/1
    owner: str  # the writer's, or ''
    fence: int
    ms_left: int
    readers: int
    waiters: int  # entries in the queue


_SUMMARY = script("rwlock_summary.lua", Tup(Codes(0, 1), STR, INT, INT, INT, INT), decode=SummaryReply._make)
_DESCRIBE = script("rwlock_describe.lua", Seq(INT, INT, each=(Codes(*MODES), STR, INT, INT)),
                   decode=lambda r: DescribeReply(r[0], r[1], r[2:]))
_WAITERS = script("rwlock_waiters.lua", Seq(INT, each=(Codes(*MODES), STR, INT)))

SCRIPTS = (_ACQUIRE, _RELEASE, _REFRESH, _WITHDRAW, _POLL, _DESCRIBE, _SUMMARY, _WAITERS)


@dataclass(frozen=True)
class Grant:
    lease: str
    mode: int  # READ or WRITE
    fencing_token: int
    expires_at_ms: int  # Redis server clock, ms since the epoch


@dataclass(frozen=True)
class Holder:
    mode: int
    owner: str
    fencing_token: int
    ttl_remaining_ms: int


@dataclass(frozen=True)
class Waiter:
    mode: int
    owner: str


@dataclass(frozen=True)
class RWLockState:
    writer: Holder | None
    readers: list[Holder]  # in grant order
    waiters: list[Waiter]  # live ones, first in line first
    now_ms: int


@dataclass(frozen=True)
class RWLockSummary:
    """One read-write lock as a listing shows it."""

    name: str
    writer: Holder | None
    readers: int
    waiters: int  # entries in its queue (waiters of dead servers too, until skipped)


class RWLocks(FifoPrimitive):
    """The read-write lock primitive of one server process (see FifoPrimitive for
    process_id and liveness_ms; Locks for fence_retention_ms)."""

    def __init__(self, redis: Commands, keyspace: KeySpace, waiters: Waiters, *, process_id: str,
                 liveness_ms: int = 5000, fence_retention_ms: int = 7 * 86_400_000) -> None:
        super().__init__(redis, keyspace, waiters, process_id=process_id, liveness_ms=liveness_ms)
        self._fence_retention_ms = fence_retention_ms

    def _run(self, s, k: RWLockKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, self._fence_retention_ms, *args])

    async def acquire(self, name: str, mode: int, ttl_ms: int, wait_ms: int, owner: str) -> Grant | None:
        """The grant in ``mode`` (READ or WRITE), or None if it did not fit within
        wait_ms (0 = try once)."""
        if mode not in MODES:
            raise ValueError(f"mode must be READ or WRITE, not {mode!r}")
        k = self._keys.rwlock(name)
        claim = _RWClaim(self, name, k, k.channel, secrets.token_hex(16), ttl_ms, wait_ms, owner, mode)
        return await acquire_queued(self._waiters, claim, wait_ms)

    async def release(self, name: str, lease: str) -> None:
        if await self._run(_RELEASE, self._keys.rwlock(name), lease) != HELD.HELD:
            raise LockNotHeld(f"read-write lock {name!r} is not held by this lease", name=name)

    async def refresh(self, name: str, lease: str, ttl_ms: int, mode: int = 0) -> Grant:
        """Resets the hold's TTL; the Grant's mode is the one given (the script does not
        report it)."""
        reply = await self._run(_REFRESH, self._keys.rwlock(name), lease, ttl_ms)
        if reply.status != HELD.HELD:
            raise LockNotHeld(f"read-write lock {name!r} is not held by this lease", name=name)
        return Grant(lease, mode, reply.fence, reply.now_ms + ttl_ms)

    async def describe(self, name: str) -> RWLockState:
        r = await self._run(_DESCRIBE, self._keys.rwlock(name))
        g = r.groups
        groups = [(g[i], g[i + 1], g[i + 2], g[i + 3]) for i in range(0, len(g), 4)]
        holders = sorted((Holder(mode, owner, fence, max(ms, 0)) for mode, owner, fence, ms in groups[:r.holders]),
                         key=lambda h: h.fencing_token)
        writer = next((h for h in holders if h.mode == WRITE), None)
        return RWLockState(writer, [h for h in holders if h.mode == READ],
                           [Waiter(mode, owner) for mode, owner, _, _ in groups[r.holders:]], r.now_ms)

    async def summaries(self, page_token: str, count: int) -> tuple[list[RWLockSummary], str]:
        """A page of the read-write locks that are held or have waiters, each read
        by one bounded script (listing.scan_summaries)."""
        return await scan_summaries(self._redis, self._keys, LISTED, page_token, count, self._summary)

    async def waiters(self, name: str, limit: int = 50) -> tuple[int, list[tuple[int, str, int]]]:
        """The lock's first live waiters in FIFO order (of its first ``limit`` queue
        entries, at most 50): (Redis clock ms, [(mode, owner, waiting since ms)]). One
        bounded script (Describe walks the whole queue); the web console's read."""
        r = await self._run(_WAITERS, self._keys.rwlock(name), limit)
        return r[0], [(r[i], r[i + 1], r[i + 2]) for i in range(1, len(r), 3)]

    async def _summary(self, name: str) -> RWLockSummary | None:
        r = await self._run(_SUMMARY, self._keys.rwlock(name))
        writer = Holder(WRITE, r.owner, r.fence, max(r.ms_left, 0)) if r.write_held else None
        if writer is None and not r.readers and not r.waiters:
            return None  # freed since the listing found it live, or only expired holders are left
        return RWLockSummary(name, writer, r.readers, r.waiters)

    def keep_alive(self, name: str, grant: Grant, ttl_ms: int) -> AsyncIterator[Grant]:
        """Refreshes the hold every ttl/3 and yields each renewed grant; ends when it is
        lost (see fifo_acquire.keep_alive)."""
        return keep_alive(partial(self.refresh, name, grant.lease, ttl_ms, grant.mode), LockNotHeld, ttl_ms)

    def let_go(self, name: str, lease: str, within_ms: int) -> None:
        """Releases the hold or leaves the queue in the background, retrying while Redis
        is unreachable for up to within_ms (after which Redis forgets it anyway)."""
        k = self._keys.rwlock(name)
        self._releaser.let_go(lambda: self._run(_WITHDRAW, k, lease, 1), within_ms, k.holders)

    async def _poll(self, k: RWLockKeys, queued: Collection[str]) -> PollResult:
        r = await self._run(_POLL, k, self._process_id, self._liveness_ms, *queued)
        flat = r.leases
        granted, dropped = {}, []
        for i in range(0, len(flat), 4):
            lease, holds, fence, expires_ms = flat[i:i + 4]
            if holds:
                granted[lease] = f"{fence} {expires_ms}"
            else:
                dropped.append(lease)
        return PollResult(granted, (r.next_ms + 1) / 1000 if r.next_ms > 0 else None, dropped)


@dataclass
class _RWClaim(Claim[Grant]):
    """One Acquire's claim on a read-write lock; its token is the lease."""

    primitive = "rwlock"
    of: RWLocks
    mode: int

    async def attempt(self) -> Attempt[Grant]:
        r = await noting(self.of._run(_ACQUIRE, self.k, self.token, self.mode, self.ttl_ms, self.owner,
                                      *self.of._waiting_args(self.wait_ms)),
                         self.of._redis, self.of._keys, LISTED, self.to_note([self.name]))  # held or queued: listed
        if r.status == ACQUIRE.ACQUIRED:
            return Attempt(self._grant(r.fence, r.now_ms + r.ms), 0, r.now_ms)
        return Attempt(None, r.ms, r.now_ms)

    def granted(self, payload: str) -> Grant:
        fence, expires_ms = payload.split()
        return self._grant(int(fence), int(expires_ms))

    async def give_up(self) -> Grant | None:
        kept = await self.of._run(_WITHDRAW, self.k, self.token, 0)
        return self._grant(kept.fence, kept.now_ms + kept.pttl_ms) if kept.status == WITHDRAW.KEPT else None

    def _grant(self, fence: int, expires_at_ms: int) -> Grant:
        return Grant(self.token, self.mode, fence, expires_at_ms)

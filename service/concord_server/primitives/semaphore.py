"""Counting semaphores: at most ``limit`` permits held at any instant, FIFO-fair,
each holder with its own TTL, all-or-none grants of several permits.

Every state change is one Lua script (lua/semaphore_*.lua) on the Redis server
clock, and all of a semaphore's keys share one hash tag. Taking free permits is one
round trip; a caller that must wait joins the FIFO queue in the same script and
waits on a future (primitives/fifo_acquire.py), woken when a release, an expiry or a
raised limit admits it. The book's three semaphores (basic, fair, fair with a lock)
collapse into this one: counting and queueing happen in one atomic script, so it
cannot overshoot, and it reads only the Redis clock, so host clock skew is moot.

Limits: a semaphore's limit is stored in Redis, set by ``set_limit`` (kept for good)
or by the first acquire that finds none (it then expires with the semaphore's other
keys, never before its last holder or waiter), and changed only by ``set_limit``. An
acquire whose limit disagrees raises SemaphoreLimitMismatch and changes nothing; limit
0 takes the stored one (NotFound when there is none). A lower limit evicts nobody;
new grants wait until the held permits fit under it, and a queued request for more
permits than it fails with PermitsExceedLimit. A higher one admits waiters at once.
``limit_from_acquire=True`` (the deprecated --semaphore-limit-from-acquire) restores
the rule before set_limit: the limit passed by the latest acquire is the one in force.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..errors import NotFound, PermitNotHeld, PermitsExceedLimit, SemaphoreLimitMismatch
from ..keys import SemaphoreKeys
from ..store.reply_shapes import Codes, Either, INT, STR, Seq, Tagged, Tup
from ..store.scripts import script
from ..statuses import ACQUIRE, HELD, LIMIT, WITHDRAW
from ..wakeups.waiters import PollResult
from .fifo_acquire import Attempt, Claim, FifoPrimitive, acquire_queued, hand_on_first, keep_alive
from .listing import noting, scan_names

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class AcquireReply(NamedTuple):
    status: int  # ACQUIRE.*, or LIMIT.* (refused, nothing changed)
    ms: int = 0  # ACQUIRED: the permit's remaining TTL; else until the first holder expires (-1: none)
    now_ms: int = 0
    limit: int = 0  # LIMIT.MISMATCH, LIMIT.BELOW_PERMITS: the stored limit


def _acquire_reply(r: list[Any]) -> AcquireReply:
    return AcquireReply(*r) if r[0] in ACQUIRE.codes() else AcquireReply(r[0], limit=r[1] if len(r) > 1 else 0)


class RefreshReply(NamedTuple):
    status: int  # HELD.*
    expires_at_ms: int = 0


class WithdrawReply(NamedTuple):
    status: int  # WITHDRAW.*
    pttl_ms: int = 0  # KEPT: the permit's remaining TTL and the clock
    now_ms: int = 0


class PollReply(NamedTuple):
    next_ms: int  # until the first holder expires
    now_ms: int
    dropped: list[str]  # the ids asked about that are neither queued nor holding
    granted: list[Any]  # id, expires ms (or -1: a lowered limit failed it), ...


class DescribeReply(NamedTuple):
    limit: int
    now_ms: int
    waiters: int
    holders: list[Any]  # id, owner, permits, ttl ms, ...


_ACQUIRE = script("semaphore_acquire.lua",
                  Tagged({**{code: Tup(INT, INT) for code in ACQUIRE.codes()},
                          LIMIT.MISMATCH: Tup(INT), LIMIT.UNSET: Tup(), LIMIT.BELOW_PERMITS: Tup(INT)}),
                  decode=_acquire_reply)
_RELEASE = script("semaphore_release.lua", Either(Tup(Codes(HELD.NOT_HELD)), Seq(Codes(HELD.HELD), each=(STR,))))
_REFRESH = script("semaphore_refresh.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(INT)}),
                  decode=lambda r: RefreshReply(*r))
_WITHDRAW = script("semaphore_withdraw.lua",
                   Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.NOT_WAITING: Tup(), WITHDRAW.FAILED: Tup(),
                           WITHDRAW.PASSED_ON: Tup(), WITHDRAW.KEPT: Tup(INT, INT)}),
                   decode=lambda r: WithdrawReply(*r))
_POLL = script("semaphore_poll.lua", Seq(INT, INT, INT, each=(Either(STR, INT),)),
               decode=lambda r: PollReply(r[0], r[1], r[3:3 + r[2]], r[3 + r[2]:]))
_DESCRIBE = script("semaphore_describe.lua", Seq(INT, INT, INT, each=(STR, STR, INT, INT)),
                   decode=lambda r: DescribeReply(*r[:3], r[3:]))
_SET_LIMIT = script("semaphore_set_limit.lua", INT)  # the limit stored before (0: none)

SCRIPTS = (_ACQUIRE, _RELEASE, _REFRESH, _WITHDRAW, _POLL, _DESCRIBE, _SET_LIMIT)


@dataclass(frozen=True)
class Permit:
    permit_id: str
    permits: int
    expires_at_ms: int  # Redis server clock


@dataclass(frozen=True)
class Holder:
    permit_id: str
    owner: str
    permits: int
    ttl_remaining_ms: int


@dataclass(frozen=True)
class SemaphoreState:
    limit: int
    holders: list[Holder]
    waiters: int
    now_ms: int

    @property
    def held(self) -> int:
        return sum(h.permits for h in self.holders)


class Semaphores(FifoPrimitive):
    """The semaphore primitive of one server process (see FifoPrimitive for
    process_id and liveness_ms). ``limit_from_acquire``: the deprecated rule under
    which every acquire puts its limit in force (--semaphore-limit-from-acquire)."""

    def __init__(self, *args: Any, limit_from_acquire: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limit_from_acquire = limit_from_acquire

    def _run(self, s, k: SemaphoreKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, *args])

    async def acquire(
        self, name: str, limit: int, permits: int, ttl_ms: int, wait_ms: int, owner: str
    ) -> Permit | None:
        """The permit, or None if ``permits`` did not fit within wait_ms (0 = try once).
        ``limit`` must be the stored one (SemaphoreLimitMismatch), or 0 to take it
        (NotFound when none is stored); the first acquire stores it."""
        k = self._keys.semaphore(name)
        claim = _PermitClaim(self, name, k, k.channel, secrets.token_hex(16), ttl_ms, wait_ms, owner, limit, permits)
        return await acquire_queued(self._waiters, claim, wait_ms)

    async def set_limit(self, name: str, limit: int) -> int:
        """Stores ``limit`` (kept for good) and applies it at once; returns the limit
        stored before (0: none)."""
        return await self._run(_SET_LIMIT, self._keys.semaphore(name), limit)

    async def release(self, name: str, permit_id: str) -> None:
        k = self._keys.semaphore(name)
        reply = await self._run(_RELEASE, k, permit_id)
        if reply[0] != HELD.HELD:
            raise PermitNotHeld(f"semaphore {name!r}: permit is not held", name=name)
        woke = [self._waiters.deliver(k.channel, message) for message in reply[1:]]  # waiters of this process
        if any(woke):
            await hand_on_first()

    async def refresh(self, name: str, permit_id: str, ttl_ms: int) -> int:
        """Resets the permit's TTL; returns its new expiry (Redis clock, ms)."""
        reply = await self._run(_REFRESH, self._keys.semaphore(name), permit_id, ttl_ms)
        if reply.status != HELD.HELD:
            raise PermitNotHeld(f"semaphore {name!r}: permit is not held", name=name)
        return reply.expires_at_ms

    async def describe(self, name: str) -> SemaphoreState:
        r = await self._run(_DESCRIBE, self._keys.semaphore(name))
        flat = r.holders
        holders = [Holder(flat[i], flat[i + 1], flat[i + 2], flat[i + 3]) for i in range(0, len(flat), 4)]
        return SemaphoreState(r.limit, holders, r.waiters, r.now_ms)

    async def names(self, page_token: str, count: int) -> tuple[list[str], str]:
        """A page of the semaphores that have holders or waiters (listing.scan_names)."""
        return await scan_names(self._redis, self._keys, "sem", page_token, count)

    def keep_alive(self, name: str, permit: Permit, ttl_ms: int) -> AsyncIterator[Permit]:
        """Refreshes every ttl/3 and yields each renewed permit; ends when the permit is
        lost (see fifo_acquire.keep_alive)."""

        async def refresh() -> Permit:
            return Permit(permit.permit_id, permit.permits, await self.refresh(name, permit.permit_id, ttl_ms))

        return keep_alive(refresh, PermitNotHeld, ttl_ms)

    def let_go(self, name: str, permit_id: str, within_ms: int) -> None:
        """Releases the permit or leaves the queue in the background (see Releaser)."""
        k = self._keys.semaphore(name)
        self._releaser.let_go(lambda: self._run(_WITHDRAW, k, permit_id, 1), within_ms, k.holders)

    async def _poll(self, k: SemaphoreKeys, queued: Collection[str]) -> PollResult:
        r = await self._run(_POLL, k, self._process_id, self._liveness_ms, *queued)
        # flat: the holders, then the queued ids a lowered limit failed ("-1", as notified)
        flat = r.granted
        granted = {flat[i]: str(int(float(flat[i + 1]))) for i in range(0, len(flat), 2)}
        return PollResult(granted, (r.next_ms + 1) / 1000 if r.next_ms > 0 else None, r.dropped)


@dataclass
class _PermitClaim(Claim[Permit]):
    """One Acquire's claim on a semaphore; its token is the permit id."""

    primitive = "semaphore"
    of: Semaphores
    limit: int  # 0: the stored one
    permits: int
    refused: bool = False  # the script refused the limit: it took nothing, and there is nothing to let go

    async def attempt(self) -> Attempt[Permit]:
        r = await noting(self.of._run(_ACQUIRE, self.k, self.token, self.permits, self.limit, self.ttl_ms,
                                      self.owner, *self.of._waiting_args(self.wait_ms),
                                      int(self.of.limit_from_acquire)),
                         self.of._redis, self.of._keys, "sem", self.to_note([self.name]))  # held or queued: listed
        if r.status in LIMIT.codes():
            self.refused = True  # (a retry after Dropped is refused only once its queue entry is gone)
            raise self._refusal(r)
        if r.status == ACQUIRE.ACQUIRED:
            return Attempt(self._permit(r.now_ms + r.ms), 0, r.now_ms)
        return Attempt(None, r.ms, r.now_ms)

    def _refusal(self, r: AcquireReply) -> Exception:
        name, asked = self.name, str(self.limit)
        if r.status == LIMIT.MISMATCH:
            return SemaphoreLimitMismatch(
                f"semaphore {name!r} has the limit {r.limit}, not {self.limit}: only SetLimit changes it "
                f"(pass {r.limit}, or 0 for the stored limit)", name=name, limit=str(r.limit), requested=asked)
        if r.status == LIMIT.UNSET:
            return NotFound(f"semaphore {name!r} has no limit: pass one (the first Acquire stores it) or set it "
                            f"with SetLimit", name=name)
        return PermitsExceedLimit(f"semaphore {name!r}: its limit {r.limit} is below the {self.permits} permits "
                                  f"asked for", name=name, limit=str(r.limit), permits=str(self.permits))

    def let_go(self) -> None:
        if not self.refused:
            super().let_go()

    def granted(self, payload: str) -> Permit:
        expires = int(payload)
        if expires < 0:
            raise PermitsExceedLimit(
                f"semaphore {self.name!r}: the limit in force was lowered below the {self.permits} permits asked for",
                name=self.name,
            )
        return self._permit(expires)

    async def give_up(self) -> Permit | None:
        kept = await self.of._run(_WITHDRAW, self.k, self.token, 0)
        if kept.status == WITHDRAW.FAILED:  # failed before the timeout, though neither notice reached us
            return self.granted("-1")
        return self._permit(kept.now_ms + kept.pttl_ms) if kept.status == WITHDRAW.KEPT else None

    def _permit(self, expires_at_ms: int) -> Permit:
        return Permit(self.token, self.permits, expires_at_ms)

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
import asyncio
import contextlib
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, NamedTuple

from ..errors import LockNotHeld
from redis.crc import key_slot

from ..store.cluster import ClusterCommands
from ..keys import KeySpace, LockKeys
from ..store.reply_shapes import ANY, Codes, Either, INT, STR, Seq, Tagged, Tup
from ..store.scripts import Commands, script
from ..statuses import ACQUIRE, HELD, WITHDRAW
from ..wakeups.waiters import Dropped, PollResult, Waiters
from .fifo_acquire import (GIVE_UP_WITHIN, Attempt, Claim, FifoPrimitive, acquire_queued, hand_on_first,
                           keep_alive)
from .deadlocks import Deadlocks, deadlock_error, watching
from .letting_go import LATE, answer_within
from .listing import noting, scan_names

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


class AcquireManyReply(NamedTuple):
    status: int  # ACQUIRE.*
    ms: int  # ACQUIRED: the TTL; else until the first holder's TTL ends (-1: none)
    now_ms: int
    fences: list[int]  # ACQUIRED: one per lock


class ForceReleaseReply(NamedTuple):
    status: int  # HELD.*
    fence: int = 0  # HELD: the removed holder's
    owner: str = ""


_ACQUIRE = script("lock_acquire.lua", Tup(Codes(*ACQUIRE.codes()), INT, INT, INT), decode=AcquireReply._make)
_RELEASE = script("lock_release.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(STR)}))
_REFRESH = script("lock_refresh.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(INT, INT)}),
                  decode=lambda r: RefreshReply(*r))
_WITHDRAW = script("lock_withdraw.lua",
                   Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.NOT_WAITING: Tup(), WITHDRAW.PASSED_ON: Tup(),
                           WITHDRAW.KEPT: Tup(INT, INT, INT)}),
                   decode=lambda r: WithdrawReply(*r))
_POLL = script("lock_poll.lua", Seq(STR, INT, INT, INT, each=(STR,)), decode=lambda r: PollReply(*r[:4], r[4:]))
_DESCRIBE = script("lock_describe.lua", Tup(Codes(0, 1), STR, INT, INT, INT, INT), decode=DescribeReply._make)
VIEW_BATCH = 50  # locks a lock_waiters.lua call reads (up to 50 queue entries each)
VIEW_SCRIPTS_AT_ONCE = 64  # of them in flight for one views() call
_WAITERS = script("lock_waiters.lua", Seq(INT, each=(Seq(INT, Codes(0, 1), STR, INT, INT, each=(STR, INT)),)))
_WAITERS_PAGE = script("lock_waiters_page.lua", Seq(INT, INT, each=(INT, STR, INT)))
_FORCE_RELEASE = script("lock_force_release.lua", Tagged({HELD.NOT_HELD: Tup(), HELD.HELD: Tup(ANY, ANY)}),
                        decode=lambda r: ForceReleaseReply(*r))

_ACQUIRE_MANY = script("lock_acquire_many.lua", Seq(Codes(*ACQUIRE.codes()), INT, INT, each=(INT,)),
                       decode=lambda r: AcquireManyReply(*r[:3], r[3:]))
_RELEASE_MANY = script("lock_release_many.lua", Seq(each=(INT,)))
_REFRESH_MANY = script("lock_refresh_many.lua", Either(Tup(Codes(HELD.HELD), INT), Seq(Codes(HELD.NOT_HELD), each=(INT,))))
_WITHDRAW_MANY = script("lock_withdraw_many.lua",
                        Tagged({WITHDRAW.LEFT_QUEUE: Tup(), WITHDRAW.PASSED_ON: Tup(),
                                WITHDRAW.KEPT: Seq(INT, INT, each=(INT,))}))

SCRIPTS = (_ACQUIRE, _RELEASE, _REFRESH, _WITHDRAW, _POLL, _DESCRIBE, _WAITERS, _WAITERS_PAGE, _FORCE_RELEASE,
           _ACQUIRE_MANY, _RELEASE_MANY, _REFRESH_MANY, _WITHDRAW_MANY)


@dataclass(frozen=True)
class Grant:
    lease: str
    fencing_token: int
    expires_at_ms: int  # Redis server clock, ms since the epoch


@dataclass(frozen=True)
class ManyGrant:
    """Several locks held by one lease, each with its own fencing token."""

    lease: str
    fencing_tokens: list[int]  # in the order the names were given
    expires_at_ms: int


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
                 liveness_ms: int = 5000, fence_retention_ms: int = 7 * 86_400_000,
                 deadlocks: Deadlocks | None = None) -> None:
        super().__init__(redis, keyspace, waiters, process_id=process_id, liveness_ms=liveness_ms)
        self._fence_retention_ms = fence_retention_ms
        self._deadlocks = deadlocks

    def _run(self, s, k: LockKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, self._fence_retention_ms, *args])

    async def acquire(self, name: str, ttl_ms: int, wait_ms: int, owner: str, *, detect: bool = False) -> Grant | None:
        """The lock's grant, or None if it was not free within wait_ms (0 = try once).
        ``detect``: owner names the caller, whose wait is checked for deadlocks
        (when this process looks for them: primitives/deadlocks.py)."""
        k = self._keys.lock(name)
        claim = _LockClaim(self, name, k, k.channel, secrets.token_hex(16), ttl_ms, wait_ms, owner)
        return await acquire_queued(self._waiters, claim, wait_ms, self._deadlocks if detect else None)

    async def release(self, name: str, lease: str) -> None:
        k = self._keys.lock(name)
        reply = await self._run(_RELEASE, k, lease, self._process_id)
        if reply[0] != HELD.HELD:
            raise LockNotHeld(f"lock {name!r} is not held by this lease", name=name)
        if reply[1] and self._waiters.deliver(k.channel, reply[1]):
            await hand_on_first()

    async def refresh(self, name: str, lease: str, ttl_ms: int) -> Grant:
        k = self._keys.lock(name)
        reply = await self._run(_REFRESH, k, lease, ttl_ms)
        if reply.status != HELD.HELD:
            raise LockNotHeld(f"lock {name!r} is not held by this lease", name=name)
        return Grant(lease, reply.fence, reply.now_ms + ttl_ms)

    async def describe(self, name: str) -> LockState:
        r = await self._run(_DESCRIBE, self._keys.lock(name))
        return LockState(r.held == 1, r.owner, r.fence, max(r.pttl_ms, 0), r.waiters, r.now_ms)

    async def views(self, names: Sequence[str], limit: int = 50) -> list[tuple[LockState, list[tuple[str, int]]]]:
        """Each lock's state (as ``describe``) and its first live waiters in FIFO order
        (of its first ``limit`` queue entries, at most 50): [(owner, waiting since
        ms)]. The web console's read of the locks it lists: one bounded script per
        VIEW_BATCH locks of a slot (on one Redis any locks share a script), in parallel:
        the scripts stay short for Redis's other clients, and the Python per lock
        small."""
        groups = [g[at:at + VIEW_BATCH] for g in self._slot_groups(names) for at in range(0, len(g), VIEW_BATCH)]
        replies: list[Any] = []
        for wave in range(0, len(groups), VIEW_SCRIPTS_AT_ONCE):  # a cluster's locks: a slot each, mostly
            replies += await asyncio.gather(*(_WAITERS.run(self._redis, [key for i in group for key in self._keys.lock(
                names[i]).keys], ["", 0, limit]) for group in groups[wave:wave + VIEW_SCRIPTS_AT_ONCE]))
        found: list[tuple[LockState, list[tuple[str, int]]] | None] = [None] * len(names)
        for group, r in zip(groups, replies):
            for i, (waiters, held, owner, fence, pttl_ms, *queue) in zip(group, r[1:]):
                found[i] = (LockState(held == 1, owner, fence, max(pttl_ms, 0), waiters, r[0]),
                            list(zip(queue[::2], queue[1::2])))
        return [f for f in found if f is not None]

    async def waiters_page(self, name: str, offset: int, limit: int) -> tuple[int, int, list[tuple[int, str, int]]]:
        """One page of the lock's waiters in FIFO order: the live ones among the ``limit``
        (at most 100) queue entries from position ``offset``: (Redis clock ms, entries
        queued, [(position, owner, waiting since ms)]). One bounded script that writes
        nothing; the web console's pager, so a queue of any length can be walked."""
        r = await self._run(_WAITERS_PAGE, self._keys.lock(name), offset, limit)
        return r[0], r[1], [(r[i], r[i + 1], r[i + 2]) for i in range(2, len(r), 3)]

    async def force_release(self, name: str) -> tuple[str, int] | None:
        """An operator's release, whoever holds the lock: (owner, fencing token) of the
        holder removed, or None when nobody held it. The next waiter gets it."""
        reply = await self._run(_FORCE_RELEASE, self._keys.lock(name))
        return (reply.owner, reply.fence) if reply.status == HELD.HELD else None

    async def names(self, page_token: str, count: int) -> tuple[list[str], str]:
        """A page of the locks that are held or have waiters (listing.scan_names)."""
        return await scan_names(self._redis, self._keys, "lock", page_token, count)

    async def acquire_many(self, names: Sequence[str], ttl_ms: int, wait_ms: int, owner: str, *,
                           detect: bool = False) -> ManyGrant | None:
        """All the locks or none: the grant, or None if they were not all free within
        wait_ms (0 = try once). Names in one slot (any name on one Redis) are taken in
        one script; on a Cluster the slots' groups are taken one after another in slot
        order, holding the earlier ones while waiting for the next."""
        token = secrets.token_hex(16)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(wait_ms, 0) / 1000
        fences: dict[int, int] = {}
        expires = 0
        try:
            for group in self._slot_groups(names):
                left_ms = max(0, int((deadline - loop.time()) * 1000)) if wait_ms > 0 else 0
                claim = _ManyClaim(self, [names[i] for i in group], [self._keys.lock(names[i]) for i in group],
                                   token, ttl_ms, left_ms, owner)
                got = await claim.acquire(self._waiters, self._deadlocks if detect else None)
                if got is None:
                    if fences:
                        self.let_go_many(names, token, ttl_ms)
                    return None
                fences.update(zip(group, got.fencing_tokens))
                expires = got.expires_at_ms if not expires else min(expires, got.expires_at_ms)
        except BaseException:
            if fences:
                self.let_go_many(names, token, ttl_ms)
            raise
        return ManyGrant(token, [fences[i] for i in range(len(names))], expires)

    async def release_many(self, names: Sequence[str], lease: str) -> None:
        """Releases every named lock the lease holds; LockNotHeld names the others."""
        missing: list[str] = []
        for group in self._slot_groups(names):
            ks = [self._keys.lock(names[i]) for i in group]
            lost = await _RELEASE_MANY.run(self._redis, _many_keys(ks), ["", self._fence_retention_ms, lease,
                                                                           *(k.channel for k in ks)])
            missing += [names[group[p - 1]] for p in lost]
        if missing:
            raise LockNotHeld(f"locks {missing!r} are not held by this lease", names=",".join(missing))

    async def refresh_many(self, names: Sequence[str], lease: str, ttl_ms: int) -> int:
        """Resets every named lock's TTL; LockNotHeld (naming them) if any is not
        held. Returns the new expiry (Redis clock, ms)."""
        now_ms = 0
        for group in self._slot_groups(names):
            ks = [self._keys.lock(names[i]) for i in group]
            r = await _REFRESH_MANY.run(self._redis, _many_keys(ks), ["", self._fence_retention_ms, lease, ttl_ms])
            if r[0] != HELD.HELD:
                missing = [names[group[p - 1]] for p in r[1:]]
                raise LockNotHeld(f"locks {missing!r} are not held by this lease", names=",".join(missing))
            now_ms = r[1]
        return now_ms + ttl_ms

    def keep_alive_many(self, names: Sequence[str], lease: str, ttl_ms: int) -> AsyncIterator[int]:
        """refresh_many every ttl/3, yielding each new expiry; ends when one is lost."""
        return keep_alive(partial(self.refresh_many, names, lease, ttl_ms), LockNotHeld, ttl_ms)

    def let_go_many(self, names: Sequence[str], lease: str, within_ms: int) -> None:
        """Releases the locks or leaves their queues in the background."""
        for group in self._slot_groups(names):
            ks = [self._keys.lock(names[i]) for i in group]
            self._releaser.let_go(partial(self._withdraw_many, ks, lease, 1), within_ms, ks[0].holder)

    def _withdraw_many(self, ks: list[LockKeys], lease: str, pass_on: int):
        return _WITHDRAW_MANY.run(self._redis, _many_keys(ks), ["", self._fence_retention_ms, lease, pass_on,
                                                                 *(k.channel for k in ks)])

    def _slot_groups(self, names: Sequence[str]) -> list[list[int]]:
        """The names' positions grouped by Cluster slot, in slot order; one group on one Redis."""
        if not isinstance(self._redis, ClusterCommands):
            return [list(range(len(names)))]
        slots: dict[int, list[int]] = {}
        for i, n in enumerate(names):
            slots.setdefault(key_slot(self._keys.lock(n).holder.encode()), []).append(i)
        return [slots[s] for s in sorted(slots)]

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
        r = await noting(self.of._run(_ACQUIRE, self.k, self.token, self.ttl_ms, self.owner,
                                      *self.of._waiting_args(self.wait_ms)),
                         self.of._redis, self.of._keys, "lock", self.to_note([self.name]))  # held or queued: listed
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


def _many_keys(ks: list[LockKeys]) -> list[str]:
    return [key for k in ks for key in k.keys]


class _ManyClaim(Claim[ManyGrant]):
    """One AcquireMany's claim on the locks of one slot: queued in each lock's queue
    as one waiter, woken by any of them, it takes them all in its own script."""

    primitive = "lock"
    of: Locks

    def __init__(self, of: Locks, names: list[str], ks: list[LockKeys], token: str, ttl_ms: int,
                 wait_ms: int, owner: str) -> None:
        super().__init__(of, ",".join(names), ks[0], "", token, ttl_ms, wait_ms, owner)
        self.names = names
        self.ks = ks

    async def attempt(self) -> Attempt[ManyGrant]:
        r = await noting(_ACQUIRE_MANY.run(self.of._redis, _many_keys(self.ks),
                                           ["", self.of._fence_retention_ms, self.token, self.ttl_ms, self.owner,
                                            *self.of._waiting_args(self.wait_ms), *(k.channel for k in self.ks)]),
                         self.of._redis, self.of._keys, "lock", self.to_note(self.names))
        if r.status == ACQUIRE.ACQUIRED:
            return Attempt(ManyGrant(self.token, r.fences, r.now_ms + r.ms), 0, r.now_ms)
        return Attempt(None, r.ms, r.now_ms)

    def granted(self, payload: str) -> ManyGrant:
        raise AssertionError("a waiter for several locks takes them in its own script")

    async def give_up(self) -> ManyGrant | None:
        r = await self.of._withdraw_many(self.ks, self.token, 0)
        if r[0] == WITHDRAW.KEPT:
            return ManyGrant(self.token, list(r[3:]), r[2] + r[1])
        return None

    def let_go(self) -> None:
        self.of._releaser.let_go(partial(self.of._withdraw_many, self.ks, self.token, 1),
                                 max(self.wait_ms, 0) + self.ttl_ms, self.ks[0].holder)

    async def acquire(self, waiters: Waiters, deadlocks: Deadlocks | None) -> ManyGrant | None:
        """Like fifo_acquire.acquire_queued, with a ticket on every lock's channel: any
        wake-up (a grant, or a "try" as a lock frees) runs the script again."""
        if self.wait_ms <= 0:
            async with answer_within(0, self.let_go):
                return (await self.attempt()).grant
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait_ms / 1000
        channels = [(k.channel, partial(self.of._poll, k)) for k in self.ks]
        with waiters.tickets(channels, self.token) as ticket:
            async with answer_within(self.wait_ms, self.let_go) as bound, \
                    watching(deadlocks, self.owner, self.token, self.names, self.wait_ms) as watch:
                while True:
                    bound.reschedule(deadline + LATE)  # only the script is bounded (fifo_acquire.acquire_queued)
                    grant, recheck_ms, now_ms = await self.attempt()
                    if grant is not None:
                        return grant
                    bound.reschedule(None)
                    watch.queued(now_ms)
                    recheck = (recheck_ms + 1) / 1000 if recheck_ms > 0 else None
                    while True:  # still queued: wait for a wake-up, looking for deadlocks meanwhile
                        if (cycle := await watch.look(deadline)) is not None:
                            if (kept := await self.give_up_by(max(loop.time(), deadline) + GIVE_UP_WITHIN)) is not None:
                                return kept
                            raise deadlock_error(self.name, cycle)
                        try:
                            woken = await ticket.wait(watch.wait_for(deadline - loop.time()), recheck) is not None
                        except Dropped:  # queue again
                            woken = True
                        if loop.time() >= deadline:
                            return await self.give_up_by(deadline + GIVE_UP_WITHIN)
                        if woken:  # a grant or a "try": run the script again
                            break
                        recheck = None
                    ticket.rearm()

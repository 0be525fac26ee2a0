"""Rate limits: whether ``hits`` units may pass under a key's limit, decided by one
Lua script on the Redis clock (lua/ratelimit_check.lua), so every server agrees
exactly and no host clock is read.

Six limiters share the script (lua/include/ratelimit_common.lua): GCRA (the
default; one timestamp per key), token bucket, sliding log (exact, one entry per
hit), sliding window (two counters, approximate), fixed window, and a concurrency
limit (units held at once, each allowed call's as a permit until ``release`` or its
period passes). A key's limit
travels with the call or is stored by ``set_limit`` and then changed only there: a
call whose limit disagrees is refused (RateLimitMismatch) and changes nothing, the
rule semaphores follow. A key's counting state expires by itself once it would be
full again; the stored limit stays until deleted.

``check_many`` decides several keys in one script when they share a Redis (one
node, or one hash slot of a cluster); on a cluster the checks are grouped by slot
and decided slot after slot, and with ``all_or_none`` a slot's hits are given back
(lua/ratelimit_refund.lua) when a later slot refuses.
"""

from __future__ import annotations

import asyncio
import enum
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from redis.crc import key_slot

from ..errors import InvalidArgument, RateLimitMismatch, RateLimitNotFound
from ..keys import KeySpace, RateLimitKeys
from ..statuses import LIMIT, RATE
from ..store.client import command
from ..store.reply_shapes import INT, STR, Seq, Tup, Either
from ..store.scripts import Commands, script
from ..wakeups.doorbells import Doorbells
from .letting_go import LATE, Releaser, answer_within
from .listing import noting, scan_summaries

MAX_RATE = 1_000_000_000
MAX_LOG_RATE = 100_000  # the sliding log keeps one entry per hit
MAX_PERIOD_MS = 86_400_000
MAX_CHECKS = 1000  # per CheckMany
RECENT_KEYS = 4096  # keys whose script KEYS a process remembers


class Algorithm(enum.IntEnum):  # ratelimit.proto's Algorithm; lua's ALGO
    GCRA = 1
    TOKEN_BUCKET = 2
    SLIDING_LOG = 3
    SLIDING_WINDOW = 4
    FIXED_WINDOW = 5
    CONCURRENCY = 6


BURSTY = (Algorithm.GCRA, Algorithm.TOKEN_BUCKET)  # the ones with a burst
# Each algorithm's state keys (RateLimitKeys fields; lua STATE_KEYS): a check that
# carries its limit sends only these beside the limit key, not all eight.
STATE_KEYS = {Algorithm.GCRA: ("gcra",), Algorithm.TOKEN_BUCKET: ("bucket",), Algorithm.SLIDING_LOG: ("log",),
              Algorithm.SLIDING_WINDOW: ("window",), Algorithm.FIXED_WINDOW: ("fixed",),
              Algorithm.CONCURRENCY: ("permits", "held")}


@dataclass(frozen=True)
class Limit:
    algorithm: Algorithm
    rate: int  # units per period
    period_ms: int
    burst: int  # GCRA, token bucket: units at once from idle (0 given: rate); else 0
    drain: bool = False  # a refused check takes what room is left

    @classmethod
    def of(cls, algorithm: int, rate: int, period_ms: int, burst: int, drain: bool) -> Limit:
        """A checked limit (InvalidArgument says what is wrong), burst 0 meaning rate."""
        try:
            algo = Algorithm(algorithm or Algorithm.GCRA)
        except ValueError:
            raise InvalidArgument(f"unknown rate limit algorithm {algorithm}", field="algorithm") from None
        if not 1 <= rate <= (MAX_LOG_RATE if algo is Algorithm.SLIDING_LOG else MAX_RATE):
            top = MAX_LOG_RATE if algo is Algorithm.SLIDING_LOG else MAX_RATE
            raise InvalidArgument(f"rate must be 1 to {top:,} units per period (got {rate})", field="rate")
        if not 1 <= period_ms <= MAX_PERIOD_MS:
            raise InvalidArgument(f"period must be 1ms to 1 day (got {period_ms} ms)", field="period")
        if algo in BURSTY:
            if burst > MAX_RATE:
                raise InvalidArgument(f"burst must be at most {MAX_RATE:,} (got {burst})", field="burst")
            burst = burst or rate
        elif burst:
            raise InvalidArgument(f"burst applies to GCRA and TOKEN_BUCKET only, not {algo.name}", field="burst")
        if drain and algo is Algorithm.CONCURRENCY:
            raise InvalidArgument("drain_over_limit does not apply to CONCURRENCY: units come back by Release",
                                  field="drain_over_limit")
        return cls(algo, rate, period_ms, burst, drain)

    def args(self) -> list[int]:
        return [int(self.algorithm), self.rate, self.period_ms, self.burst, int(self.drain)]


class Decision(NamedTuple):  # a tuple: 100 of them per CheckMany, made cheaply
    allowed: bool
    remaining: int
    rate: int
    burst: int
    reset_ms: int
    retry_ms: int  # 0 when allowed; -1: the hits exceed what ever passes at once
    permit: str = ""  # CONCURRENCY, allowed: the permit holding the hits until release()


class LimitSummary(NamedTuple):
    """A key with a stored limit, as a listing shows it."""

    key: str
    limit: Limit
    remaining: int  # units that could pass now
    reset_ms: int  # until the key is full again
    waiters: int  # Wait callers queued on it


class Check(NamedTuple):
    key: str
    limit: Limit | None  # None: the stored one
    hits: int


_CHECK = script("ratelimit_check.lua", Seq(INT, each=(INT, INT, INT, INT, INT, INT, STR)))
_SET_LIMIT = script("ratelimit_set_limit.lua", Either(Tup(), Tup(INT, INT, INT, INT, INT)))
_REFUND = script("ratelimit_refund.lua", INT)
_WAIT = script("ratelimit_wait.lua", Tup(INT, INT, INT, INT, INT, INT, STR))
_RELEASE = script("ratelimit_release.lua", INT)
_DELETE_LIMIT = script("ratelimit_delete_limit.lua", Either(Tup(), Tup(INT, INT, INT, INT, INT)))

SCRIPTS = (_CHECK, _SET_LIMIT, _REFUND, _WAIT, _RELEASE, _DELETE_LIMIT)
LISTED = "rl"  # the listing index of the keys with a stored limit (listing.py)

_NO_LIMIT = [0, 0, 0, 0, 0, 0]  # has_limit 0: the stored limit decides
QUEUED = -2  # ratelimit_wait.lua's retry ms for a waiter behind another: told when its turn comes
NEVER = -1  # the hits exceed what ever passes at once


def _stored(r: list[Any]) -> Limit:
    return Limit(Algorithm(int(r[0])), int(r[1]), int(r[2]), int(r[3]), bool(int(r[4])))


class RateLimits:
    """The rate-limit primitive of one server process. ``cluster``: the checks of one
    call are grouped by hash slot (a script touches one slot)."""

    def __init__(self, redis: Commands, keyspace: KeySpace, doorbells: Doorbells | None = None, *,
                 cluster: bool = False, clock_us: Callable[[], int] | None = None) -> None:
        self._redis = redis
        self._keys = keyspace
        self._doorbells = doorbells  # Wait's wake-ups: a key's channel says how many waiters to ring
        self._releaser = Releaser()
        self._cluster = cluster
        self._clock_us = clock_us  # tests only: decide at this time instead of the Redis clock
        self._recent_keys: dict[tuple[str, Algorithm | None], list[str]] = {}

    def keys(self, key: str) -> RateLimitKeys:
        return self._keys.ratelimit(key)

    def _check_keys(self, key: str, limit: Limit | None) -> list[str]:
        """The key's KEYS for the check script: all eight when the stored limit
        decides, else the limit key and the carried algorithm's state keys (the
        script refuses a disagreeing limit before it touches state). Remembered for
        the most recent keys (a CheckMany of 100 would otherwise build hundreds of
        names; bounded, cleared when full)."""
        algo = None if limit is None else limit.algorithm
        got = self._recent_keys.get((key, algo))
        if got is None:
            if len(self._recent_keys) >= RECENT_KEYS:
                self._recent_keys.clear()
            k = self.keys(key)
            got = k.keys if algo is None else [k.limit, *(getattr(k, name) for name in STATE_KEYS[algo])]
            self._recent_keys[(key, algo)] = got
        return got

    async def check(self, key: str, limit: Limit | None, hits: int) -> Decision:
        return (await self.check_many([Check(key, limit, hits)], all_or_none=False))[1][0]

    async def check_many(self, checks: list[Check], all_or_none: bool) -> tuple[bool, list[Decision]]:
        """Every check decided (in order); whether all were allowed. A limit mismatch or
        a missing one raises (for the first such check) and takes nothing."""
        groups = self._groups(checks)
        decisions: list[Decision | None] = [None] * len(checks)
        taken: list[list[int]] = []  # groups that took hits, for a refund
        every = True
        for group in groups:
            allowed, got = await self._decide([checks[i] for i in group], all_or_none)
            for i, d in zip(group, got):
                decisions[i] = d
            if allowed and all_or_none:
                taken.append(group)
            every = every and allowed
            if all_or_none and not allowed:
                break
        if all_or_none and not every:
            for group in taken:
                await self._refund([checks[i] for i in group], [decisions[i] for i in group])
            for group in groups:  # the slots not reached: nothing taken, decided as refused
                for i in group:
                    if decisions[i] is None:
                        decisions[i] = await self._peek(checks[i])
        return every, [d for d in decisions if d is not None]

    def _groups(self, checks: list[Check]) -> list[list[int]]:
        if not self._cluster:
            return [list(range(len(checks)))]
        by_slot: dict[int, list[int]] = {}
        for i, c in enumerate(checks):
            by_slot.setdefault(key_slot(self.keys(c.key).limit.encode()), []).append(i)
        return list(by_slot.values())

    async def _decide(self, checks: list[Check], all_or_none: bool) -> tuple[bool, list[Decision]]:
        keys: list[str] = []
        carried: dict[Limit, int] = {}  # each limit the checks carry, sent once: its number
        per_check: list[int] = []
        for c in checks:
            mine = self._check_keys(c.key, c.limit)
            keys += mine
            per_check += (c.hits, 0 if c.limit is None else carried.setdefault(c.limit, len(carried) + 1), len(mine))
        args: list[Any] = [int(all_or_none), str(self._clock_us()) if self._clock_us else "",
                           secrets.token_hex(12), len(carried)]  # the permit prefix: concurrency's
        for limit in carried:
            args += limit.args()
        reply = await _CHECK.run(self._redis, keys, args + per_check)
        out = []
        for c, at in zip(checks, range(1, len(reply), 7)):
            status, a, b, d, e, f, permit = reply[at:at + 7]
            if status == LIMIT.MISMATCH or status == LIMIT.UNSET:
                self._refuse(status, c.key, [a, b, d, e, f])
            out.append(Decision(status == RATE.ALLOWED, a, b, d, e, f, permit))
        return reply[0] == RATE.ALLOWED, out

    @staticmethod
    def _refuse(status: int, key: str, stored: list[Any]) -> None:
        """A script's LIMIT.MISMATCH (with the stored limit) or LIMIT.UNSET, raised."""
        if status == LIMIT.UNSET:
            raise RateLimitNotFound(f"key {key!r} has no stored rate limit and the call gave none", key=key)
        limit = _stored(stored)
        raise RateLimitMismatch(
            f"rate limit of key {key!r} is {limit.algorithm.name} {limit.rate} per {limit.period_ms} ms "
            f"(burst {limit.burst}), set by SetLimit; this call asked for another",
            key=key, algorithm=limit.algorithm.name, rate=str(limit.rate), period_ms=str(limit.period_ms),
            burst=str(limit.burst))

    async def _refund(self, checks: list[Check], decisions: list[Decision | None]) -> None:
        keys: list[str] = []
        args: list[int] = []
        for c, d in zip(checks, decisions):
            limit = c.limit or await self.get_limit(c.key)
            if limit is None or d is None or not d.allowed:
                continue
            keys += self.keys(c.key).keys
            args += [c.hits, int(limit.algorithm), limit.rate, limit.period_ms, limit.burst, d.permit]
        if keys:
            await _REFUND.run(self._redis, keys, args)

    async def refund(self, key: str, limit: Limit, hits: int, decision: Decision) -> None:
        """Gives back the hits an allowed check took (lua/ratelimit_refund.lua), as when
        what they counted turned out not to count (the console's login throttle: a
        login that succeeded)."""
        await self._refund([Check(key, limit, hits)], [decision])

    async def _peek(self, c: Check) -> Decision:
        _, (d,) = await self._decide([Check(c.key, c.limit, 0)], all_or_none=False)
        return Decision(False, d.remaining, d.rate, d.burst, d.reset_ms, d.retry_ms)

    async def wait(self, key: str, limit: Limit | None, hits: int, wait_ms: int) -> Decision:
        """Takes ``hits`` once the limit allows, waiting up to wait_ms behind the key's
        earlier waiters (FIFO across servers, lua/ratelimit_wait.lua). The head of the
        queue sleeps exactly until its limit allows; the others until the head tells
        them it is done (or the doorbell's safety beat). Not allowed in time: refused,
        nothing taken. The call is bounded by wait_ms + LATE like every blocking call;
        a waiter cut short leaves the queue in the background."""
        if wait_ms <= 0:
            return await self.check(key, limit, hits)
        assert self._doorbells is not None, "Wait needs the process's doorbells"
        k, token = self.keys(key), secrets.token_hex(12)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        async with answer_within(wait_ms, lambda: self._leave_later(k, token, wait_ms)) as bound, \
                self._doorbells.watch([k.channel]) as watch:
            while True:
                watch.arm()
                left_ms = max(1, int((deadline - loop.time()) * 1000))
                d = await self._wait_step(key, k, token, limit, hits, left_ms)
                if d.allowed or d.retry_ms == NEVER:
                    return d
                left = deadline - loop.time()
                if left <= 0:
                    break
                bound.reschedule(deadline + LATE)
                await watch.wait(left if d.retry_ms == QUEUED else min(left, d.retry_ms / 1000))
            await self._wait_step(key, k, token, limit, hits, 0)  # leave the queue
            return Decision(False, d.remaining, d.rate, d.burst, d.reset_ms, max(d.retry_ms, 0))

    async def _wait_step(self, key: str, k: RateLimitKeys, token: str, limit: Limit | None, hits: int,
                         left_ms: int) -> Decision:
        args = [token, str(self._clock_us()) if self._clock_us else "", left_ms, k.channel, hits,
                *([1, *limit.args()] if limit else _NO_LIMIT)]
        status, a, b, c, d, e, permit = await _WAIT.run(self._redis, k.wait_keys, args)
        if status in (LIMIT.MISMATCH, LIMIT.UNSET):
            self._refuse(status, key, [a, b, c, d, e])
        return Decision(status == RATE.ALLOWED, a, b, c, d, e, permit)

    def _leave_later(self, k: RateLimitKeys, token: str, wait_ms: int) -> None:
        async def leave() -> None:
            await _WAIT.run(self._redis, k.wait_keys, [token, "", 0, k.channel, 0, 0, 0, 0, 0, 0, 0])

        self._releaser.let_go(leave, wait_ms, f"the rate limit wait queue {k.queue}")

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for background leaves to reach Redis; used at shutdown."""
        await self._releaser.drain(timeout)

    async def set_limit(self, key: str, limit: Limit) -> Limit | None:
        """Stores the key's limit (and notes the key in the listing index); the one
        before (None: none)."""
        before = await noting(_SET_LIMIT.run(self._redis, self.keys(key).keys, limit.args()),
                              self._redis, self._keys, LISTED, [key])
        return _stored(before) if before else None

    async def delete_limit(self, key: str) -> Limit | None:
        """Forgets the key's stored limit and what it counted; the limit it had (None:
        none). The listing index drops the key at its next look."""
        before = await _DELETE_LIMIT.run(self._redis, self.keys(key).keys, [])
        return _stored(before) if before else None

    async def summaries(self, page_token: str, count: int) -> tuple[list[LimitSummary], str]:
        """A page of the keys with a stored limit (listing.scan_summaries), each read by
        a peek (the check script with 0 hits: it writes nothing) and a ZCARD of its
        Wait queue, pipelined."""
        return await scan_summaries(self._redis, self._keys, LISTED, page_token, count, self._summary)

    async def _summary(self, key: str) -> LimitSummary | None:
        k = self.keys(key)
        limit, peeked, waiters = await asyncio.gather(self.get_limit(key), self._decide([Check(key, None, 0)], False),
                                                      command(self._redis, "ZCARD", k.queue), return_exceptions=True)
        if isinstance(limit, RateLimitNotFound) or isinstance(peeked, RateLimitNotFound) or limit is None:
            return None  # deleted since the listing found it live
        for got in (limit, peeked, waiters):
            if isinstance(got, BaseException):
                raise got
        d = peeked[1][0]
        return LimitSummary(key, limit, d.remaining, max(d.reset_ms, 0), int(waiters))

    async def get_limit(self, key: str) -> Limit | None:
        got = await command(self._redis, "HMGET", self.keys(key).limit, "a", "r", "p", "b", "d")
        return _stored(got) if got and got[0] is not None else None

    async def release(self, key: str, permit: str) -> bool:
        """Gives a concurrency permit's units back (waking the key's waiters); False if
        it was not held (released already, or expired: its units came back then)."""
        k = self.keys(key)
        now = str(self._clock_us()) if self._clock_us else ""
        return await _RELEASE.run(self._redis, [*k.keys, k.queue], [permit, k.channel, now]) == 1

    async def reset(self, key: str) -> None:
        """Forgets what the key counted; its stored limit stays."""
        await command(self._redis, "DEL", *self.keys(key).state)

"""Rate limits for the Python client.

    api = client.rate_limit("api:acme", rate=100, per=1.0, burst=20)
    if api.check().allowed:          # one unit now, or not
        call_the_api()
    with api:                        # waits until one unit may pass, then runs the block
        call_the_api()

    @api                             # the same around every call of a function
    def call_the_api(): ...

The server decides on the Redis clock (concord.ratelimit.v1.RateLimitService), so
every process sharing the key shares the limit exactly. A refused check says how
long until the same units would pass (``retry_after``); ``wait()`` sleeps exactly that
long and asks again (no polling), so waiters in several processes each take the room
as it comes back. ``algorithm``: "gcra" (the default), "token_bucket",
"sliding_log", "sliding_window" or "fixed_window" (see the README's Rate limit API).

Leave ``rate`` out to use the limit ``set_limit`` stored for the key (only
set_limit changes a stored limit: a handle whose limit disagrees raises
RateLimitMismatch). ``check``, ``get_limit`` (a peek is ``check(0)``) and the waits
are retried on UNAVAILABLE like other safe calls; a check that took units is not
repeated when its reply was lost: it may have counted (check is retried only when
it is a peek).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

from ._convert import duration, seconds
from .errors import DeadlineExceeded
from .ratelimit.v1 import ratelimit_pb2 as pb

ALGORITHMS = {"gcra": pb.ALGORITHM_GCRA, "token_bucket": pb.ALGORITHM_TOKEN_BUCKET,
              "sliding_log": pb.ALGORITHM_SLIDING_LOG, "sliding_window": pb.ALGORITHM_SLIDING_WINDOW,
              "fixed_window": pb.ALGORITHM_FIXED_WINDOW}
_NAMES = {v: k for k, v in ALGORITHMS.items()}
F = TypeVar("F", bound=Callable[..., Any])


class RateLimitTimeout(DeadlineExceeded):
    """wait() could not have its units within its timeout (decided by the client: the
    next retry_after would end past it, so it does not sleep in vain)."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int  # units that could pass now, after this decision
    limit: int  # the rate
    burst: int
    reset_after: float  # seconds until the key is full again
    retry_after: float | None  # refused: seconds until the same units would pass; None: they never pass at once


@dataclass(frozen=True)
class Limit:
    rate: int
    per: float  # seconds
    burst: int = 0
    algorithm: str = "gcra"
    drain: bool = False


def _limit_message(limit: Limit) -> pb.Limit:
    if limit.algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALGORITHMS)}")
    return pb.Limit(algorithm=ALGORITHMS[limit.algorithm], rate=limit.rate, period=duration(limit.per),
                    burst=limit.burst, drain_over_limit=limit.drain)


def _limit(m: pb.Limit) -> Limit:
    return Limit(m.rate, seconds(m.period), m.burst, _NAMES.get(m.algorithm, "gcra"), m.drain_over_limit)


def _decision(r: pb.CheckResponse) -> Decision:
    return Decision(r.allowed, r.remaining, r.limit, r.burst, seconds(r.reset_after),
                    seconds(r.retry_after) if r.HasField("retry_after") or r.allowed else None)


class _Base:
    def __init__(self, client: Any, key: str, limit: Limit | None, timeout: float | None) -> None:
        self._client = client
        self.key = key
        self.limit = limit
        self.timeout = timeout  # for with / the decorator: None waits as long as it takes
        self._rpc = client._service("ratelimit")

    def _request(self, hits: int) -> pb.CheckRequest:
        return pb.CheckRequest(key=self.key, hits=hits, limit=_limit_message(self.limit) if self.limit else None)

    def _next(self, d: Decision, hits: int, deadline: float | None) -> float:
        """How long to sleep before asking again; RateLimitTimeout when past the deadline."""
        if d.retry_after is None:
            raise ValueError(f"{hits} units never pass {self.key!r} at once (its burst is {d.burst or d.limit})")
        pause = max(d.retry_after, 0.001)
        if deadline is not None and time.monotonic() + pause > deadline:
            raise RateLimitTimeout(f"rate limit {self.key!r}: {hits} units not allowed within the timeout "
                                   f"(next in {d.retry_after:.3f}s)")
        return pause


class RateLimit(_Base):
    """A key's limit on a Client (see the module's docstring)."""

    def check(self, hits: int = 1) -> Decision:
        """The decision now; ``hits`` units are taken when allowed (0 peeks)."""
        call = self._rpc.call_safe if hits == 0 else self._rpc.call
        return _decision(call("Check", self._request(hits)))

    def wait(self, hits: int = 1, timeout: float | None = None) -> Decision:
        """Blocks until ``hits`` units are taken (sleeping each refusal's retry_after);
        RateLimitTimeout when they cannot be within ``timeout`` seconds (None: no bound)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            d = self.check(hits)
            if d.allowed:
                return d
            time.sleep(self._next(d, hits, deadline))

    def set_limit(self, limit: Limit) -> Limit | None:
        """Stores the key's limit (admin role); the one before, or None."""
        r = self._rpc.call_safe("SetLimit", pb.SetLimitRequest(key=self.key, limit=_limit_message(limit)))
        return _limit(r.previous) if r.HasField("previous") else None

    def get_limit(self) -> Limit:
        """The stored limit (RateLimitNotFound when none)."""
        return _limit(self._rpc.call_safe("GetLimit", pb.GetLimitRequest(key=self.key)).limit)

    def reset(self) -> None:
        """Forgets what the key counted (admin role); its stored limit stays."""
        self._rpc.call_safe("Reset", pb.ResetRequest(key=self.key))

    def __enter__(self) -> Decision:
        return self.wait(1, self.timeout)

    def __exit__(self, *exc: object) -> None:
        return None

    def __call__(self, fn: F) -> F:
        """As a decorator: each call of ``fn`` first waits for one unit."""
        @functools.wraps(fn)
        def limited(*args: Any, **kwargs: Any) -> Any:
            self.wait(1, self.timeout)
            return fn(*args, **kwargs)

        return limited  # type: ignore[return-value]


class AsyncRateLimit(_Base):
    """A key's limit on an AsyncClient: the same, awaited (``async with``, and the
    decorator on coroutine functions)."""

    async def check(self, hits: int = 1) -> Decision:
        call = self._rpc.call_safe if hits == 0 else self._rpc.call
        return _decision(await call("Check", self._request(hits)))

    async def wait(self, hits: int = 1, timeout: float | None = None) -> Decision:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            d = await self.check(hits)
            if d.allowed:
                return d
            await asyncio.sleep(self._next(d, hits, deadline))

    async def set_limit(self, limit: Limit) -> Limit | None:
        r = await self._rpc.call_safe("SetLimit", pb.SetLimitRequest(key=self.key, limit=_limit_message(limit)))
        return _limit(r.previous) if r.HasField("previous") else None

    async def get_limit(self) -> Limit:
        return _limit((await self._rpc.call_safe("GetLimit", pb.GetLimitRequest(key=self.key))).limit)

    async def reset(self) -> None:
        await self._rpc.call_safe("Reset", pb.ResetRequest(key=self.key))

    async def __aenter__(self) -> Decision:
        return await self.wait(1, self.timeout)

    async def __aexit__(self, *exc: object) -> None:
        return None

    def __call__(self, fn: F) -> F:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError("an AsyncClient's rate limit decorates coroutine functions")

        @functools.wraps(fn)
        async def limited(*args: Any, **kwargs: Any) -> Any:
            await self.wait(1, self.timeout)
            return await fn(*args, **kwargs)

        return limited  # type: ignore[return-value]

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
long until the same units would pass (``retry_after``). ``wait()`` waits in the
server (RateLimitService.Wait): a key's waiters, in every process, are served in
the order they came, each woken at the time its limit allows (no polling). A wait
whose reply was lost (the server or Redis failed) is asked again: it may have taken
its units the first time, so a retry can spend them twice, never more than the
limit allows. ``algorithm``: "gcra" (the default), "token_bucket",
"sliding_log", "sliding_window", "fixed_window" (see the README's Rate limit API), or
"concurrency": at most ``rate`` units held at once, each allowed check's or wait's as a
``permit`` until ``release(permit)`` or ``per`` seconds pass; ``with`` and the decorator
release it when the block or call ends.

Leave ``rate`` out to use the limit ``set_limit`` stored for the key (only
set_limit changes a stored limit, and delete_limit removes it: a handle whose limit
disagrees raises RateLimitMismatch); ``client.list_rate_limits()`` lists the stored
ones. ``check``, ``get_limit`` (a peek is ``check(0)``) and the waits
are retried on UNAVAILABLE like other safe calls; a check that took units is not
repeated when its reply was lost: it may have counted (check is retried only when
it is a peek).
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, TypeVar

from ._convert import duration, seconds
from .errors import DeadlineExceeded
from .ratelimit.v1 import ratelimit_pb2 as pb

ALGORITHMS = {"gcra": pb.ALGORITHM_GCRA, "token_bucket": pb.ALGORITHM_TOKEN_BUCKET,
              "sliding_log": pb.ALGORITHM_SLIDING_LOG, "sliding_window": pb.ALGORITHM_SLIDING_WINDOW,
              "fixed_window": pb.ALGORITHM_FIXED_WINDOW, "concurrency": pb.ALGORITHM_CONCURRENCY}
_NAMES = {v: k for k, v in ALGORITHMS.items()}
F = TypeVar("F", bound=Callable[..., Any])


class RateLimitTimeout(DeadlineExceeded):
    """wait() could not have its units within its timeout."""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    remaining: int  # units that could pass now, after this decision
    limit: int  # the rate
    burst: int
    reset_after: float  # seconds until the key is full again
    retry_after: float | None  # refused: seconds until the same units would pass; None: they never pass at once
    permit: str = ""  # concurrency, allowed: what release() takes to give the units back


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


@dataclass(frozen=True)
class LimitSummary:
    """A key with a stored limit, as list_rate_limits() shows it."""

    key: str
    limit: Limit
    remaining: int  # units that could pass now (a peek: nothing was taken)
    reset_after: float  # seconds until the key is full again
    waiters: int  # wait() callers queued on the key


# For _listing.every_page: ListLimits, a page at a time.
LISTING = ("ListLimits", pb.ListLimitsRequest, "limits", "key",
           lambda m: LimitSummary(m.key, _limit(m.limit), m.remaining, seconds(m.reset_after), m.waiters))


def _decision(r: pb.CheckResponse | pb.WaitResponse) -> Decision:
    return Decision(r.allowed, r.remaining, r.limit, r.burst, seconds(r.reset_after),
                    seconds(r.retry_after) if r.HasField("retry_after") or r.allowed else None, r.permit)


class _Base:
    def __init__(self, client: Any, key: str, limit: Limit | None, timeout: float | None) -> None:
        self._client = client
        self.key = key
        self.limit = limit
        self.timeout = timeout  # for with / the decorator: None waits as long as it takes
        self._rpc = client._service("ratelimit")
        # The permits `with` blocks hold (concurrency), innermost last, per thread or task.
        self._held: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(f"held:{key}", default=())

    def _release_request(self, permit: str) -> pb.ReleaseRequest:
        return pb.ReleaseRequest(key=self.key, permit=permit)

    def _push(self, d: Decision) -> Decision:
        self._held.set((*self._held.get(), d.permit))
        return d

    def _pop(self) -> str:
        *rest, permit = self._held.get()
        self._held.set(tuple(rest))
        return permit

    def _request(self, hits: int) -> pb.CheckRequest:
        return pb.CheckRequest(key=self.key, hits=hits, limit=_limit_message(self.limit) if self.limit else None)

    def _wait_request(self, hits: int, wait: float) -> pb.WaitRequest:
        return pb.WaitRequest(key=self.key, hits=hits, wait_timeout=duration(wait),
                              limit=_limit_message(self.limit) if self.limit else None)

    @staticmethod
    def _allowed(r: pb.WaitResponse) -> Decision | None:
        """A Wait's answer: the decision once allowed; None to wait on (or time out)."""
        d = _decision(r)
        if not d.allowed and d.retry_after is None:
            raise ValueError(f"the units never pass at once (the burst is {d.burst or d.limit})")
        return d if d.allowed else None

    def _taken(self, d: Decision | None, hits: int) -> Decision:
        if d is None:
            raise RateLimitTimeout(f"rate limit {self.key!r}: {hits} units not allowed within the timeout")
        return d


class RateLimit(_Base):
    """A key's limit on a Client (see the module's docstring)."""

    def check(self, hits: int = 1) -> Decision:
        """The decision now; ``hits`` units are taken when allowed (0 peeks)."""
        call = self._rpc.call_safe if hits == 0 else self._rpc.call
        return _decision(call("Check", self._request(hits)))

    def wait(self, hits: int = 1, timeout: float | None = None) -> Decision:
        """Blocks until ``hits`` units are taken, served in turn with the key's other
        waiters; RateLimitTimeout when they are not within ``timeout`` seconds (None:
        no bound); ValueError when they never pass at once (more than the burst)."""
        return self._taken(self._rpc.wait_for("Wait", partial(self._wait_request, hits), timeout, self._allowed),
                           hits)

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

    def delete_limit(self) -> Limit | None:
        """Forgets the stored limit and what the key counted (admin role); the limit
        it had, or None."""
        r = self._rpc.call_safe("DeleteLimit", pb.DeleteLimitRequest(key=self.key))
        return _limit(r.previous) if r.HasField("previous") else None

    def release(self, permit: str) -> bool:
        """Gives a concurrency permit's units back now; False if it was not held
        (released already, or its period passed). Safe to repeat."""
        if not permit:
            return False
        return self._rpc.call_safe("Release", self._release_request(permit)).released

    def __enter__(self) -> Decision:
        return self._push(self.wait(1, self.timeout))

    def __exit__(self, *exc: object) -> None:
        self.release(self._pop())

    def __call__(self, fn: F) -> F:
        """As a decorator: each call of ``fn`` first waits for one unit (and, for a
        concurrency limit, gives it back when the call ends)."""
        @functools.wraps(fn)
        def limited(*args: Any, **kwargs: Any) -> Any:
            with self:
                return fn(*args, **kwargs)

        return limited  # type: ignore[return-value]


class AsyncRateLimit(_Base):
    """A key's limit on an AsyncClient: the same, awaited (``async with``, and the
    decorator on coroutine functions)."""

    async def check(self, hits: int = 1) -> Decision:
        call = self._rpc.call_safe if hits == 0 else self._rpc.call
        return _decision(await call("Check", self._request(hits)))

    async def wait(self, hits: int = 1, timeout: float | None = None) -> Decision:
        return self._taken(await self._rpc.wait_for("Wait", partial(self._wait_request, hits), timeout,
                                                    self._allowed), hits)

    async def set_limit(self, limit: Limit) -> Limit | None:
        r = await self._rpc.call_safe("SetLimit", pb.SetLimitRequest(key=self.key, limit=_limit_message(limit)))
        return _limit(r.previous) if r.HasField("previous") else None

    async def get_limit(self) -> Limit:
        return _limit((await self._rpc.call_safe("GetLimit", pb.GetLimitRequest(key=self.key))).limit)

    async def reset(self) -> None:
        await self._rpc.call_safe("Reset", pb.ResetRequest(key=self.key))

    async def delete_limit(self) -> Limit | None:
        r = await self._rpc.call_safe("DeleteLimit", pb.DeleteLimitRequest(key=self.key))
        return _limit(r.previous) if r.HasField("previous") else None

    async def release(self, permit: str) -> bool:
        if not permit:
            return False
        return (await self._rpc.call_safe("Release", self._release_request(permit))).released

    async def __aenter__(self) -> Decision:
        return self._push(await self.wait(1, self.timeout))

    async def __aexit__(self, *exc: object) -> None:
        await self.release(self._pop())

    def __call__(self, fn: F) -> F:
        if not inspect.iscoroutinefunction(fn):
            raise TypeError("an AsyncClient's rate limit decorates coroutine functions")

        @functools.wraps(fn)
        async def limited(*args: Any, **kwargs: Any) -> Any:
            async with self:
                return await fn(*args, **kwargs)

        return limited  # type: ignore[return-value]

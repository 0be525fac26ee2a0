"""Per-tenant and per-connection limits: a request rate (token bucket), calls that
may block (lock/semaphore Acquire, Dequeue) and open streams at once, and the size
of each request message.

A limit reached is ``LimitReached`` (RESOURCE_EXHAUSTED) with a RetryInfo: when the
bucket will hold a token again, or a fixed hint for the concurrency limits. A request
over the size limit gets no RetryInfo: sending it again cannot succeed.

A tenant's request rate holds across every replica (SharedRate: one GCRA decision
in Redis per call, through the rate-limit service's limiter) unless the server runs
with --tenant-rate-per-process: then each process keeps its own token bucket (no
Redis call; N replicas admit up to N times the rate). Every other limit is per
process: a connection lives in one process anyway, and a tenant's blocked calls and
streams are counted where they wait. The local buckets use the host's monotonic
clock, which is fine for a local admission decision (nothing about it is shared or
stored); the shared one, Redis's. The calls a stream carries (sub_calls.py) are
counted locally. Health and reflection are never limited.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from concord.error.v1.error_pb2 import (
    REASON_RATE_LIMITED,
    REASON_REQUEST_TOO_LARGE,
    REASON_TOO_MANY_BLOCKED_CALLS,
    REASON_TOO_MANY_STREAMS,
)

from .. import sub_calls
from ..errors import LimitReached
from ..primitives.ratelimit import Algorithm, Limit, RateLimits
from ..tenants import current as current_tenant
from .guard import wrap
from .methods import BLOCKING_METHODS, is_open_method

CONCURRENCY_RETRY_DELAY = 1.0  # seconds: a hint; blocked calls and streams end at unknown times
_PRUNE_AT = 1024  # peers remembered before idle ones (full bucket, nothing open) are forgotten


@dataclass(frozen=True)
class Quota:
    """One subject's limits; 0 means unlimited."""

    rate: float = 0.0  # requests per second, refilled continuously
    burst: int = 0  # bucket size; 0: max(1, rate)
    max_blocked: int = 0
    max_streams: int = 0
    max_request_bytes: int = 0
    storage_bytes: int = 0  # task payload bytes the tenant may store (quotas.py)

    def overridden(self, values: dict[str, Any]) -> Quota:
        """This quota with a token file's per-tenant values (unknown names rejected)."""
        fields = {"rate": float, "burst": int, "max_blocked": int, "max_streams": int, "max_request_bytes": int,
                  "storage_bytes": int}
        unknown = set(values) - set(fields)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}; known: {sorted(fields)}")
        changed = {k: fields[k](v) for k, v in values.items()}
        if any(v < 0 for v in changed.values()):
            raise ValueError("limits must not be negative")
        return Quota(**{**self.__dict__, **changed})


class SharedRate:
    """A tenant's request rate across every replica: the rate-limit service's GCRA on
    the key ``tenant:<name>`` of a key space of the server's own, which no tenant can
    reach (the RateLimits given)."""

    PERIOD_MS = 1_000_000  # a rate in calls per second becomes whole units per 1000 s

    def __init__(self, limits: RateLimits) -> None:
        self._limits = limits

    async def admit(self, tenant: str, quota: Quota) -> None:
        """One call's unit of the tenant's rate; LimitReached when it has none left."""
        burst = quota.burst or max(1, math.ceil(quota.rate))
        limit = Limit(Algorithm.GCRA, max(1, round(quota.rate * 1000)), self.PERIOD_MS, burst)
        d = await self._limits.check(f"tenant:{tenant}", limit, 1)
        if not d.allowed:
            raise LimitReached(f"tenant request rate limit reached ({quota.rate:g}/s, across every replica)",
                               REASON_RATE_LIMITED, max(d.retry_ms, 1) / 1000, subject="tenant")


class _Usage:
    """What one subject (a tenant or a connection) is doing now."""

    __slots__ = ("tokens", "stamp", "blocked", "streams")

    def __init__(self, burst: float) -> None:
        self.tokens = burst
        self.stamp = time.monotonic()
        self.blocked = 0
        self.streams = 0

    def token_delay(self, quota: Quota) -> float:
        """Refills the bucket; 0 if it holds a token now, else seconds until it will."""
        if quota.rate <= 0:
            return 0.0
        now = time.monotonic()
        self.tokens = min(quota.burst or max(1.0, quota.rate), self.tokens + (now - self.stamp) * quota.rate)
        self.stamp = now
        return 0.0 if self.tokens >= 1.0 else (1.0 - self.tokens) / quota.rate

    def idle(self, quota: Quota) -> bool:
        full = quota.rate <= 0 or self.tokens + (time.monotonic() - self.stamp) * quota.rate >= (
            quota.burst or max(1.0, quota.rate))
        return full and not self.blocked and not self.streams


class Limiter:
    """Admits calls against the tenant's and the connection's quotas.

    ``tenant_quota(tenant)`` gives a tenant's quota (flags, overridden by the token
    file); with auth off every call is the tenant "" (one shared budget).
    """

    def __init__(self, tenant_quota: Callable[[str], Quota], peer_quota: Quota,
                 shared: SharedRate | None = None) -> None:
        self._tenant_quota = tenant_quota
        self._peer_quota = peer_quota
        self.shared = shared  # the tenant rate across replicas; None: per process
        self._tenants: dict[str, _Usage] = {}
        self._peers: dict[str, _Usage] = {}

    def quota_of(self, tenant: str) -> Quota:
        """The tenant's limits now (the token file's, else the server's defaults)."""
        return self._tenant_quota(tenant)

    def _subjects(self, peer: str) -> list[tuple[str, str, Quota, _Usage]]:
        tenant = current_tenant.get() or ""
        tq = self._tenant_quota(tenant)
        if peer not in self._peers and len(self._peers) >= _PRUNE_AT:
            for p in [p for p, u in self._peers.items() if u.idle(self._peer_quota)]:
                del self._peers[p]
        t = self._tenants.setdefault(tenant, _Usage(tq.burst or max(1.0, tq.rate)))
        pq = self._peer_quota
        p = self._peers.setdefault(peer, _Usage(pq.burst or max(1.0, pq.rate)))
        return [("tenant", tenant, tq, t), ("connection", peer, pq, p)]

    async def admit_shared(self) -> None:
        """The tenant's unit of its shared rate (nothing without one)."""
        if self.shared is not None:
            tenant = current_tenant.get() or ""
            quota = self._tenant_quota(tenant)
            if quota.rate > 0:
                await self.shared.admit(tenant, quota)

    @contextlib.contextmanager
    def admit(self, method: str, peer: str, streaming: bool, shared_paid: bool = False):
        """Counts the call for its lifetime; raises LimitReached if any limit is reached.
        ``shared_paid``: admit_shared took the tenant's rate unit, so the local tenant
        bucket is not asked."""
        subjects = self._subjects(peer)
        blocking = method in BLOCKING_METHODS
        for kind, _, quota, usage in subjects:
            if streaming and quota.max_streams and usage.streams >= quota.max_streams:
                raise LimitReached(f"{kind} has {usage.streams} open streams, its limit",
                                   REASON_TOO_MANY_STREAMS, CONCURRENCY_RETRY_DELAY, limit=str(quota.max_streams),
                                   subject=kind)
            if blocking and quota.max_blocked and usage.blocked >= quota.max_blocked:
                raise LimitReached(f"{kind} has {usage.blocked} calls waiting, its limit",
                                   REASON_TOO_MANY_BLOCKED_CALLS, CONCURRENCY_RETRY_DELAY,
                                   limit=str(quota.max_blocked), subject=kind)
        rated = subjects[1:] if shared_paid else subjects
        for kind, _, quota, usage in rated:
            delay = usage.token_delay(quota)
            if delay:
                raise LimitReached(f"{kind} request rate limit reached ({quota.rate:g}/s)", REASON_RATE_LIMITED,
                                   delay, subject=kind)
        for _, _, quota, usage in subjects:  # taken only once every limit lets the call in
            usage.streams += streaming
            usage.blocked += blocking
        for _, _, quota, usage in rated:
            usage.tokens -= quota.rate > 0
        try:
            yield
        finally:
            for _, _, _, usage in subjects:
                usage.streams -= streaming
                usage.blocked -= blocking

    def check_size(self, message: Any) -> None:
        """A request message against the tenant's max_request_bytes."""
        limit = self._tenant_quota(current_tenant.get() or "").max_request_bytes
        if limit and message.ByteSize() > limit:
            raise LimitReached(f"request of {message.ByteSize()} bytes is over the tenant's limit of {limit}",
                               REASON_REQUEST_TOO_LARGE, None, limit=str(limit))


async def sized(limiter: Limiter, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A request stream whose every message is checked against the size limit."""
    async for message in requests:
        if hasattr(message, "ByteSize"):  # not an Undecodable marker (api/decoding.py)
            limiter.check_size(message)
        yield message


def peer_of(context: grpc.aio.ServicerContext) -> str:
    return context.peer() or "unknown"


class _LimitGuard:
    def __init__(self, limiter: Limiter, method: str, streaming: bool) -> None:
        self._limiter = limiter
        self._method = method
        self._streaming = streaming

    async def check(self) -> None:
        await self._limiter.admit_shared()

    def open(self, context: grpc.aio.ServicerContext, request: Any | None) -> contextlib.AbstractContextManager[Any]:
        if request is not None and hasattr(request, "ByteSize"):  # not an Undecodable marker
            self._limiter.check_size(request)
        peer = peer_of(context)
        if self._streaming:  # the calls a stream carries (sub_calls.py), admitted one by one
            sub_calls.admit.set(lambda method: self._limiter.admit(method, peer, False))
        return self._limiter.admit(self._method, peer, self._streaming, shared_paid=self._limiter.shared is not None)

    def requests(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        return sized(self._limiter, requests)


class LimitInterceptor(grpc.aio.ServerInterceptor):
    """Applies a Limiter to every call but health and reflection. Runs after auth.py's
    interceptor, so the call's tenant is known."""

    def __init__(self, limiter: Limiter) -> None:
        self.limiter = limiter

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or is_open_method(details.method):
            return handler
        streaming = handler.request_streaming or handler.response_streaming
        return wrap(handler, _LimitGuard(self.limiter, details.method, streaming))

"""concord.ratelimit.v1.RateLimitService: validates requests, calls
primitives.ratelimit, maps its decisions to replies."""

from __future__ import annotations

from typing import Any

from concord.ratelimit.v1 import ratelimit_pb2 as pb
from concord.ratelimit.v1 import ratelimit_pb2_grpc

from ..errors import InvalidArgument, RateLimitNotFound
from ..primitives.ratelimit import MAX_CHECKS, MAX_PERIOD_MS, MAX_RATE, Check, Decision, Limit, RateLimits
from . import validation as v
from ..config import Settings
from .convert import duration, wait_budget_ms
from .status import rpc


# Limits already checked, by what the message said: the checks of a CheckMany mostly
# carry one limit, and validating it once instead of 100 times is most of a check's
# CPU here. Bounded: cleared when full. Only valid limits are kept.
_checked: dict[tuple[int, int, int, int, int, bool], Limit] = {}
CHECKED_LIMITS = 1024


def limit_of(message: pb.Limit, field: str = "limit") -> Limit:
    d = message.period
    said = (message.algorithm, message.rate, d.seconds, d.nanos, message.burst, message.drain_over_limit)
    limit = _checked.get(said) if message.HasField("period") else None
    if limit is None:
        period = v.duration_ms(message, "period", minimum_ms=1, maximum_ms=MAX_PERIOD_MS, required=True,
                               label=f"{field}.period")
        limit = Limit.of(message.algorithm, message.rate, period, message.burst, message.drain_over_limit)
        if len(_checked) >= CHECKED_LIMITS:
            _checked.clear()
        _checked[said] = limit
    return limit


def limit_message(limit: Limit) -> pb.Limit:
    return pb.Limit(algorithm=int(limit.algorithm), rate=limit.rate, period=duration(limit.period_ms),
                    burst=limit.burst, drain_over_limit=limit.drain)


def _check(request: pb.CheckRequest, field: str = "", key_valid: bool = False) -> Check:
    key = request.key if key_valid else v.name(request.key, f"{field}key")
    if request.hits > MAX_RATE:
        raise InvalidArgument(f"{field}hits must be at most {MAX_RATE:,} (got {request.hits})", field=f"{field}hits")
    limit = limit_of(request.limit, f"{field}limit") if request.HasField("limit") else None
    return Check(key, limit, request.hits)


def _fill(reply: Any, d: Decision) -> Any:
    """Sets a CheckResponse's (or WaitResponse's: the same fields) fields from a
    decision. In place, field by field: building Durations and copying them in cost
    CheckMany twice as much."""
    reply.allowed, reply.remaining, reply.limit, reply.burst, reply.permit = \
        d.allowed, d.remaining, d.rate, d.burst, d.permit
    ms = max(d.reset_ms, 0)
    reply.reset_after.seconds, reply.reset_after.nanos = ms // 1000, ms % 1000 * 1_000_000
    if d.retry_ms >= 0:
        reply.retry_after.seconds, reply.retry_after.nanos = d.retry_ms // 1000, d.retry_ms % 1000 * 1_000_000
    return reply


class RateLimitServicer(ratelimit_pb2_grpc.RateLimitServiceServicer):
    def __init__(self, limits: RateLimits, settings: Settings) -> None:
        self._limits = limits
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)

    @rpc
    async def Wait(self, request: pb.WaitRequest, context) -> pb.WaitResponse:
        c = _check(pb.CheckRequest(key=request.key, limit=request.limit if request.HasField("limit") else None,
                                   hits=request.hits or 1))
        wait = wait_budget_ms(self._durations.wait(request), context)
        return _fill(pb.WaitResponse(), await self._limits.wait(c.key, c.limit, c.hits, wait))

    @rpc
    async def Check(self, request: pb.CheckRequest, context) -> pb.CheckResponse:
        c = _check(request)
        return _fill(pb.CheckResponse(), await self._limits.check(c.key, c.limit, c.hits))

    @rpc
    async def CheckMany(self, request: pb.CheckManyRequest, context) -> pb.CheckManyResponse:
        if not 1 <= len(request.checks) <= MAX_CHECKS:
            raise InvalidArgument(f"checks must hold 1 to {MAX_CHECKS} checks (got {len(request.checks)})",
                                  field="checks")
        valid = v.usual_names([c.key for c in request.checks])  # else each key checked, its error indexed
        checks = [_check(c, f"checks[{i}].", valid) for i, c in enumerate(request.checks)]
        allowed, decisions = await self._limits.check_many(checks, request.all_or_none)
        reply = pb.CheckManyResponse(allowed=allowed)
        add = reply.results.add
        for d in decisions:
            _fill(add(), d)
        return reply

    @rpc
    async def SetLimit(self, request: pb.SetLimitRequest, context) -> pb.SetLimitResponse:
        key = v.name(request.key, "key")
        if not request.HasField("limit"):
            raise InvalidArgument("limit is required", field="limit")
        before = await self._limits.set_limit(key, limit_of(request.limit))
        return pb.SetLimitResponse(previous=limit_message(before) if before else None)

    @rpc
    async def GetLimit(self, request: pb.GetLimitRequest, context) -> pb.GetLimitResponse:
        key = v.name(request.key, "key")
        limit = await self._limits.get_limit(key)
        if limit is None:
            raise RateLimitNotFound(f"key {key!r} has no stored rate limit", key=key)
        return pb.GetLimitResponse(limit=limit_message(limit))

    @rpc
    async def Release(self, request: pb.ReleaseRequest, context) -> pb.ReleaseResponse:
        key, permit = v.name(request.key, "key"), v.token(request.permit, "permit")
        return pb.ReleaseResponse(released=await self._limits.release(key, permit))

    @rpc
    async def Reset(self, request: pb.ResetRequest, context) -> pb.ResetResponse:
        await self._limits.reset(v.name(request.key, "key"))
        return pb.ResetResponse()

    @rpc
    async def DeleteLimit(self, request: pb.DeleteLimitRequest, context) -> pb.DeleteLimitResponse:
        before = await self._limits.delete_limit(v.name(request.key, "key"))
        return pb.DeleteLimitResponse(previous=limit_message(before) if before else None)

    @rpc
    async def ListLimits(self, request: pb.ListLimitsRequest, context) -> pb.ListLimitsResponse:
        found, next_token = await self._limits.summaries(*v.page(request.page_token, request.page_size))
        return pb.ListLimitsResponse(next_page_token=next_token, limits=[
            pb.LimitSummary(key=s.key, limit=limit_message(s.limit), remaining=s.remaining,
                            reset_after=duration(s.reset_ms), waiters=s.waiters) for s in found])

"""concord.semaphore.v1.SemaphoreService: validates requests, calls
primitives.semaphore, maps errors."""

from __future__ import annotations

from contextlib import aclosing
from functools import partial

from concord.semaphore.v1 import semaphore_pb2 as pb
from concord.semaphore.v1 import semaphore_pb2_grpc

from ..config import Settings
from ..errors import SemaphoreWaitTimeout
from ..primitives.semaphore import Semaphores
from . import validation as v
from .convert import duration, name_page, timestamp, wait_budget_ms
from .holding import ACQUIRED, LOST, hold_events
from . import session
from .status import rpc


class SemaphoreServicer(semaphore_pb2_grpc.SemaphoreServiceServicer):
    def __init__(self, semaphores: Semaphores, settings: Settings) -> None:
        self._sems = semaphores
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)
        self._max_limit = settings.max_semaphore_limit

    def _acquire_args(self, request: pb.AcquireRequest | pb.HoldRequest, context) -> tuple:
        name = v.name(request.name)
        limit = v.count(request.limit, "limit", minimum=0, maximum=self._max_limit)  # 0: the stored one
        permits = v.count(request.permits or 1, "permits", minimum=1, maximum=limit or self._max_limit)
        ttl = self._durations.ttl(request)
        wait = self._durations.wait(request)
        owner = v.label(request.owner, "owner") or context.peer()
        return name, limit, permits, ttl, wait_budget_ms(wait, context), owner

    @rpc
    async def ListSemaphores(self, request: pb.ListSemaphoresRequest, context) -> pb.ListSemaphoresResponse:
        return await name_page(self._sems.names, request, pb.ListSemaphoresResponse)

    async def acquire(self, request: pb.AcquireRequest, context) -> pb.AcquireResponse:
        permit = await self._sems.acquire(*self._acquire_args(request, context))
        if permit is None:
            return pb.AcquireResponse(acquired=False)
        return pb.AcquireResponse(acquired=True, permit_id=permit.permit_id, expires_at=timestamp(permit.expires_at_ms))

    @rpc
    async def SetLimit(self, request: pb.SetLimitRequest, context) -> pb.SetLimitResponse:
        name = v.name(request.name)
        limit = v.count(request.limit, "limit", minimum=1, maximum=self._max_limit)
        return pb.SetLimitResponse(previous_limit=await self._sems.set_limit(name, limit))

    async def release(self, request: pb.ReleaseRequest, context) -> pb.ReleaseResponse:
        await self._sems.release(v.name(request.name), v.token(request.permit_id, "permit_id"))
        return pb.ReleaseResponse()

    async def refresh(self, request: pb.RefreshRequest, context) -> pb.RefreshResponse:
        name, permit_id = v.name(request.name), v.token(request.permit_id, "permit_id")
        ttl = self._durations.ttl(request)
        return pb.RefreshResponse(expires_at=timestamp(await self._sems.refresh(name, permit_id, ttl)))

    Acquire = rpc(acquire)
    Release = rpc(release)
    Refresh = rpc(refresh)

    Session = session.method(pb, "SemaphoreService")

    @rpc
    async def Describe(self, request: pb.DescribeRequest, context) -> pb.DescribeResponse:
        state = await self._sems.describe(v.name(request.name))
        return pb.DescribeResponse(
            limit=state.limit,
            held=state.held,
            waiters=state.waiters,
            holders=[pb.Holder(permit_id=h.permit_id, owner=h.owner, permits=h.permits,
                               ttl_remaining=duration(h.ttl_remaining_ms)) for h in state.holders],
        )

    @rpc
    async def Hold(self, request: pb.HoldRequest, context):
        name, limit, permits, ttl, wait, owner = self._acquire_args(request, context)
        permit = await self._sems.acquire(name, limit, permits, ttl, wait, owner)
        if permit is None:
            raise SemaphoreWaitTimeout(f"semaphore {name!r} had no room within wait_timeout", name=name)
        events = hold_events(permit, self._sems.keep_alive(name, permit, ttl),
                             partial(self._sems.let_go, name, permit.permit_id, ttl))
        async with aclosing(events):
            async for event, p in events:
                if event == LOST:
                    yield pb.HoldResponse(event=pb.HOLD_EVENT_LOST, permit_id=p.permit_id)
                else:
                    yield pb.HoldResponse(event=pb.HOLD_EVENT_ACQUIRED if event == ACQUIRED else pb.HOLD_EVENT_REFRESHED,
                                          permit_id=p.permit_id, expires_at=timestamp(p.expires_at_ms))

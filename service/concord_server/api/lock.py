"""concord.lock.v1.LockService: validates requests, calls primitives.lock, maps errors."""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import replace
from functools import partial

from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..config import Settings
from ..errors import InvalidArgument, LockWaitTimeout
from ..primitives.lock import Locks
from . import validation as v
from .convert import duration, name_page, timestamp, wait_budget_ms
from .holding import ACQUIRED, LOST, hold_events
from . import session
from .status import rpc


class LockServicer(lock_pb2_grpc.LockServiceServicer):
    def __init__(self, locks: Locks, settings: Settings) -> None:
        self._locks = locks
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)

    def _acquire_args(self, request: pb.AcquireRequest | pb.HoldRequest, context) -> tuple[str, int, int, str]:
        name = v.name(request.name)
        ttl = self._durations.ttl(request)
        wait = self._durations.wait(request)
        owner = v.label(request.owner, "owner") or context.peer()
        return name, ttl, wait_budget_ms(wait, context), owner

    # Acquire, Release and Refresh, as unary calls and as a Session's messages.

    async def acquire(self, request: pb.AcquireRequest, context) -> pb.AcquireResponse:
        name, ttl, wait, owner = self._acquire_args(request, context)
        grant = await self._locks.acquire(name, ttl, wait, owner, detect=bool(request.owner))
        if grant is None:
            return pb.AcquireResponse(acquired=False)
        return pb.AcquireResponse(
            acquired=True, lease=grant.lease, fencing_token=grant.fencing_token, expires_at=timestamp(grant.expires_at_ms)
        )

    async def release(self, request: pb.ReleaseRequest, context) -> pb.ReleaseResponse:
        await self._locks.release(v.name(request.name), v.token(request.lease, "lease"))
        return pb.ReleaseResponse()

    async def refresh(self, request: pb.RefreshRequest, context) -> pb.RefreshResponse:
        name, lease = v.name(request.name), v.token(request.lease, "lease")
        ttl = self._durations.ttl(request)
        grant = await self._locks.refresh(name, lease, ttl)
        return pb.RefreshResponse(expires_at=timestamp(grant.expires_at_ms))

    Acquire = rpc(acquire)
    Release = rpc(release)
    Refresh = rpc(refresh)

    Session = session.method(pb, "LockService")

    @rpc
    async def Describe(self, request: pb.DescribeRequest, context) -> pb.DescribeResponse:
        state = await self._locks.describe(v.name(request.name))
        if not state.held:
            return pb.DescribeResponse(held=False, waiters=state.waiters)
        return pb.DescribeResponse(
            held=True,
            owner=state.owner,
            fencing_token=state.fencing_token,
            ttl_remaining=duration(state.ttl_remaining_ms),
            waiters=state.waiters,
            expires_at=timestamp(state.now_ms + state.ttl_remaining_ms),
        )

    @rpc
    async def ForceRelease(self, request: pb.ForceReleaseRequest, context) -> pb.ForceReleaseResponse:
        removed = await self._locks.force_release(v.name(request.name))
        if removed is None:
            return pb.ForceReleaseResponse(released=False)
        return pb.ForceReleaseResponse(released=True, owner=removed[0], fencing_token=removed[1])

    @rpc
    async def ListLocks(self, request: pb.ListLocksRequest, context) -> pb.ListLocksResponse:
        return await name_page(self._locks.names, request, pb.ListLocksResponse)

    def _many_args(self, request: pb.AcquireManyRequest | pb.HoldManyRequest, context) -> tuple[list[str], int, int, str]:
        names = _names(request.names)
        ttl = self._durations.ttl(request)
        wait = self._durations.wait(request)
        owner = v.label(request.owner, "owner") or context.peer()
        return names, ttl, wait_budget_ms(wait, context), owner

    @rpc
    async def AcquireMany(self, request: pb.AcquireManyRequest, context) -> pb.AcquireManyResponse:
        grant = await self._locks.acquire_many(*self._many_args(request, context), detect=bool(request.owner))
        if grant is None:
            return pb.AcquireManyResponse(acquired=False)
        return pb.AcquireManyResponse(acquired=True, lease=grant.lease, fencing_tokens=grant.fencing_tokens,
                                      expires_at=timestamp(grant.expires_at_ms))

    @rpc
    async def ReleaseMany(self, request: pb.ReleaseManyRequest, context) -> pb.ReleaseManyResponse:
        await self._locks.release_many(_names(request.names), v.token(request.lease, "lease"))
        return pb.ReleaseManyResponse()

    @rpc
    async def RefreshMany(self, request: pb.RefreshManyRequest, context) -> pb.RefreshManyResponse:
        names, lease = _names(request.names), v.token(request.lease, "lease")
        expires = await self._locks.refresh_many(names, lease, self._durations.ttl(request))
        return pb.RefreshManyResponse(expires_at=timestamp(expires))

    @rpc
    async def HoldMany(self, request: pb.HoldManyRequest, context):
        names, ttl, wait, owner = self._many_args(request, context)
        grant = await self._locks.acquire_many(names, ttl, wait, owner, detect=bool(request.owner))
        if grant is None:
            raise LockWaitTimeout(f"locks {names!r} were not all free within wait_timeout", name=names[0])
        renewals = (replace(grant, expires_at_ms=expires) async for expires in
                    self._locks.keep_alive_many(names, grant.lease, ttl))
        events = hold_events(grant, renewals, partial(self._locks.let_go_many, names, grant.lease, ttl))
        async with aclosing(events):
            async for event, g in events:
                kind = {ACQUIRED: pb.HOLD_EVENT_ACQUIRED, LOST: pb.HOLD_EVENT_LOST}.get(event, pb.HOLD_EVENT_REFRESHED)
                yield pb.HoldManyResponse(event=kind, lease=g.lease, fencing_tokens=g.fencing_tokens,
                                          expires_at=None if event == LOST else timestamp(g.expires_at_ms))

    @rpc
    async def Hold(self, request: pb.HoldRequest, context):
        name, ttl, wait, owner = self._acquire_args(request, context)
        grant = await self._locks.acquire(name, ttl, wait, owner, detect=bool(request.owner))
        if grant is None:
            raise LockWaitTimeout(f"lock {name!r} was not free within wait_timeout", name=name)
        events = hold_events(grant, self._locks.keep_alive(name, grant, ttl),
                             partial(self._locks.let_go, name, grant.lease, ttl))
        async with aclosing(events):
            async for event, g in events:
                if event == LOST:
                    yield pb.HoldResponse(event=pb.HOLD_EVENT_LOST, lease=g.lease, fencing_token=g.fencing_token)
                else:
                    yield pb.HoldResponse(
                        event=pb.HOLD_EVENT_ACQUIRED if event == ACQUIRED else pb.HOLD_EVENT_REFRESHED,
                        lease=g.lease,
                        fencing_token=g.fencing_token,
                        expires_at=timestamp(g.expires_at_ms),
                    )


MAX_MANY = 64


def _names(names) -> list[str]:
    """1 to MAX_MANY distinct lock names."""
    checked = [v.name(n, "names") for n in names]
    if not 1 <= len(checked) <= MAX_MANY:
        raise InvalidArgument(f"names: give 1 to {MAX_MANY} lock names, not {len(checked)}", field="names")
    if len(set(checked)) != len(checked):
        raise InvalidArgument("names: each lock name at most once", field="names")
    return checked

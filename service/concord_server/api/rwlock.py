"""concord.rwlock.v1.ReadWriteLockService: validates requests, calls
primitives.rwlock, maps errors."""

from __future__ import annotations

from contextlib import aclosing
from functools import partial

from concord.rwlock.v1 import rwlock_pb2 as pb
from concord.rwlock.v1 import rwlock_pb2_grpc

from ..config import Settings
from ..errors import InvalidArgument, LockWaitTimeout
from ..primitives.rwlock import READ, WRITE, Holder, RWLocks, RWLockSummary
from . import validation as v
from .convert import duration, timestamp, wait_budget_ms
from .holding import ACQUIRED, LOST, hold_events
from . import session
from .status import rpc

_MODES = {pb.MODE_READ: READ, pb.MODE_WRITE: WRITE}
_PB_MODES = {READ: pb.MODE_READ, WRITE: pb.MODE_WRITE}


def _mode(value: int) -> int:
    mode = _MODES.get(value)
    if mode is None:
        raise InvalidArgument("mode must be MODE_READ or MODE_WRITE", field="mode")
    return mode


def _holder(h: Holder) -> pb.Holder:
    return pb.Holder(owner=h.owner, fencing_token=h.fencing_token, ttl_remaining=duration(h.ttl_remaining_ms))


def _summary(s: RWLockSummary) -> pb.ReadWriteLockSummary:
    return pb.ReadWriteLockSummary(name=s.name, writer=_holder(s.writer) if s.writer is not None else None,
                                   readers=s.readers, waiters=s.waiters)


class ReadWriteLockServicer(rwlock_pb2_grpc.ReadWriteLockServiceServicer):
    def __init__(self, rwlocks: RWLocks, settings: Settings) -> None:
        self._rw = rwlocks
        self._durations = v.Durations(settings.max_ttl, settings.max_wait)

    def _acquire_args(self, request: pb.AcquireRequest | pb.HoldRequest, context) -> tuple[str, int, int, int, str]:
        name = v.name(request.name)
        mode = _mode(request.mode)
        ttl = self._durations.ttl(request)
        wait = self._durations.wait(request)
        owner = v.label(request.owner, "owner") or context.peer()
        return name, mode, ttl, wait_budget_ms(wait, context), owner

    async def acquire(self, request: pb.AcquireRequest, context) -> pb.AcquireResponse:
        grant = await self._rw.acquire(*self._acquire_args(request, context))
        if grant is None:
            return pb.AcquireResponse(acquired=False)
        return pb.AcquireResponse(acquired=True, lease=grant.lease, fencing_token=grant.fencing_token,
                                  expires_at=timestamp(grant.expires_at_ms))

    async def release(self, request: pb.ReleaseRequest, context) -> pb.ReleaseResponse:
        await self._rw.release(v.name(request.name), v.token(request.lease, "lease"))
        return pb.ReleaseResponse()

    async def refresh(self, request: pb.RefreshRequest, context) -> pb.RefreshResponse:
        name, lease = v.name(request.name), v.token(request.lease, "lease")
        ttl = self._durations.ttl(request)
        grant = await self._rw.refresh(name, lease, ttl)
        return pb.RefreshResponse(expires_at=timestamp(grant.expires_at_ms))

    Acquire = rpc(acquire)
    Release = rpc(release)
    Refresh = rpc(refresh)

    Session = session.method(pb, "ReadWriteLockService")

    @rpc
    async def Describe(self, request: pb.DescribeRequest, context) -> pb.DescribeResponse:
        state = await self._rw.describe(v.name(request.name))
        return pb.DescribeResponse(
            writer=_holder(state.writer) if state.writer is not None else None,
            readers=[_holder(h) for h in state.readers],
            waiters=[pb.Waiter(owner=w.owner, mode=_PB_MODES[w.mode]) for w in state.waiters],
        )

    @rpc
    async def ListReadWriteLocks(self, request: pb.ListReadWriteLocksRequest, context) -> pb.ListReadWriteLocksResponse:
        found, next_token = await self._rw.summaries(*v.page(request.page_token, request.page_size))
        return pb.ListReadWriteLocksResponse(locks=[_summary(s) for s in found], next_page_token=next_token)

    @rpc
    async def Hold(self, request: pb.HoldRequest, context):
        name, mode, ttl, wait, owner = self._acquire_args(request, context)
        grant = await self._rw.acquire(name, mode, ttl, wait, owner)
        if grant is None:
            raise LockWaitTimeout(f"read-write lock {name!r} was not free within wait_timeout", name=name)
        events = hold_events(grant, self._rw.keep_alive(name, grant, ttl), partial(self._rw.let_go, name, grant.lease, ttl))
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

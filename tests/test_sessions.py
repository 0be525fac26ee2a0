"""The Session streams end to end: raw LockService.Session streams through a real
port, the same requests on SemaphoreService and ReadWriteLockService, and both
clients, whose acquire/release/refresh of locks, semaphores and read-write locks go
over them (concord/_session.py, concord/_session_sync.py)."""

from __future__ import annotations

import asyncio
import random
import threading
import time

import grpc
import pytest
from google.protobuf import duration_pb2

import concord
from concord.error.v1 import error_pb2
from concord.errors import Cancelled, DeadlineExceeded, LockNotHeld, PermitNotHeld
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc
from concord.rwlock.v1 import rwlock_pb2, rwlock_pb2_grpc
from concord.semaphore.v1 import semaphore_pb2, semaphore_pb2_grpc
from support import ServerProcess, wait_until

READ_WITHIN = 10.0


def _ms(ms: int) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(ms)
    return d


def acquire(rid: int, name: str, wait_ms: int = 0, ttl_ms: int = 30_000) -> pb.SessionRequest:
    return pb.SessionRequest(id=rid, acquire=pb.AcquireRequest(name=name, ttl=_ms(ttl_ms), wait_timeout=_ms(wait_ms)))


def release(rid: int, name: str, lease: str) -> pb.SessionRequest:
    return pb.SessionRequest(id=rid, release=pb.ReleaseRequest(name=name, lease=lease))


class Session:
    """A raw Session call: send requests, read answers with a deadline."""

    def __init__(self, channel: grpc.aio.Channel, stub=lock_pb2_grpc.LockServiceStub) -> None:
        self.stub = stub(channel)
        self.call = self.stub.Session()

    async def send(self, *requests: pb.SessionRequest) -> None:
        for r in requests:
            await self.call.write(r)

    async def read(self) -> pb.SessionResponse:
        answer = await asyncio.wait_for(self.call.read(), READ_WITHIN)
        assert answer is not grpc.aio.EOF, "the stream ended"
        return answer

    async def ask(self, request: pb.SessionRequest) -> pb.SessionResponse:
        await self.send(request)
        answer = await self.read()
        assert answer.id == request.id
        return answer


@pytest.fixture
async def channel(concord_server):
    async with grpc.aio.insecure_channel(concord_server.target) as ch:
        yield ch


async def _describe(channel, name) -> pb.DescribeResponse:
    return await lock_pb2_grpc.LockServiceStub(channel).Describe(pb.DescribeRequest(name=name), timeout=10)


async def _until(pred, within: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not await pred():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_acquire_refresh_release_are_answered_by_id(channel, name):
    s = Session(channel)
    got = await s.ask(acquire(7, name))
    assert got.WhichOneof("result") == "acquire" and got.acquire.acquired and got.acquire.fencing_token > 0
    lease = got.acquire.lease
    refreshed = await s.ask(pb.SessionRequest(id=8, refresh=pb.RefreshRequest(name=name, lease=lease, ttl=_ms(60_000))))
    assert refreshed.refresh.expires_at.ToMilliseconds() > got.acquire.expires_at.ToMilliseconds()
    assert (await _describe(channel, name)).held
    assert (await s.ask(release(9, name, lease))).WhichOneof("result") == "release"
    assert not (await _describe(channel, name)).held
    await s.call.done_writing()
    assert await s.call.code() == grpc.StatusCode.OK


async def test_an_error_answers_its_request_and_the_stream_goes_on(channel, name):
    s = Session(channel)
    lost = await s.ask(release(1, name, "0" * 32))
    assert lost.WhichOneof("result") == "error"
    assert (lost.error.code, lost.error.reason) == (error_pb2.CODE_FAILED_PRECONDITION, "LOCK_NOT_HELD")
    assert lost.error.metadata["name"] == name
    bad = await s.ask(acquire(2, ""))
    assert (bad.error.reason, bad.error.metadata["field"]) == ("INVALID_ARGUMENT", "name")
    empty = await s.ask(pb.SessionRequest(id=3))
    assert (empty.error.reason, empty.error.metadata["field"]) == ("INVALID_ARGUMENT", "op")
    assert (await s.ask(acquire(4, name))).acquire.acquired  # still open, nothing changed by the errors


async def test_a_waiting_acquire_holds_back_no_other_answer(channel, name):
    holder, waiter = Session(channel), Session(channel)
    first = await holder.ask(acquire(1, name))
    await waiter.send(acquire(1, name, wait_ms=30_000))
    await _until(lambda: _waiters(channel, name, 1))
    other = await waiter.ask(acquire(2, name + ":other"))  # answered while 1 still waits
    assert other.acquire.acquired
    dup = await waiter.ask(acquire(1, name + ":other"))  # id 1 is still in flight
    assert (dup.error.reason, dup.error.metadata["field"]) == ("INVALID_ARGUMENT", "id")
    await holder.ask(release(2, name, first.acquire.lease))
    granted = await waiter.read()
    assert granted.id == 1 and granted.acquire.acquired
    assert granted.acquire.fencing_token > first.acquire.fencing_token


async def _waiters(channel, name, n: int) -> bool:
    return (await _describe(channel, name)).waiters == n


async def test_cancel_gives_up_a_waiting_acquire_and_nothing_else(channel, name):
    holder, waiter = Session(channel), Session(channel)
    first = await holder.ask(acquire(1, name))
    await waiter.send(acquire(5, name, wait_ms=30_000))
    await _until(lambda: _waiters(channel, name, 1))
    await waiter.send(pb.SessionRequest(id=6, cancel=99))  # no such request: no answer
    await waiter.send(pb.SessionRequest(id=7, cancel=5))
    given_up = await waiter.read()
    assert (given_up.id, given_up.WhichOneof("result"), given_up.acquire.acquired) == (5, "acquire", False)
    assert (await _describe(channel, name)).waiters == 0
    await holder.ask(release(2, name, first.acquire.lease))
    assert not (await _describe(channel, name)).held  # not granted to the cancelled wait
    await waiter.call.done_writing()
    assert await waiter.call.read() is grpc.aio.EOF  # nothing was answered for the cancels


async def test_half_close_answers_what_is_in_flight_first(channel, name):
    holder, waiter = Session(channel), Session(channel)
    first = await holder.ask(acquire(1, name))
    await waiter.send(acquire(1, name, wait_ms=30_000))
    await _until(lambda: _waiters(channel, name, 1))
    await waiter.call.done_writing()
    await holder.ask(release(2, name, first.acquire.lease))
    assert (await waiter.read()).acquire.acquired
    assert await waiter.call.code() == grpc.StatusCode.OK


async def test_a_vanished_session_leaves_the_queue_and_its_leases_outlive_it(concord_server, channel, name):
    holder = Session(channel)
    held = await holder.ask(acquire(1, name))
    async with grpc.aio.insecure_channel(concord_server.target) as other:
        waiter = Session(other)
        await waiter.send(acquire(1, name, wait_ms=30_000))
        await _until(lambda: _waiters(channel, name, 1))
    await _until(lambda: _waiters(channel, name, 0))  # its channel closed: the wait was let go
    holder.call.cancel()
    state = await _describe(channel, name)
    assert state.held and state.fencing_token == held.acquire.fencing_token  # the lease is the client's
    stub = lock_pb2_grpc.LockServiceStub(channel)
    await stub.Release(pb.ReleaseRequest(name=name, lease=held.acquire.lease), timeout=10)
    assert not (await _describe(channel, name)).held


async def test_a_request_that_does_not_parse_ends_the_stream_with_invalid_argument(concord_server, name):
    async with grpc.aio.insecure_channel(concord_server.target) as ch:
        call = ch.stream_stream("/concord.lock.v1.LockService/Session", request_serializer=lambda b: b,
                                response_deserializer=pb.SessionResponse.FromString)()
        await call.write(b"\x12\x03\x0a\x01\xff")  # acquire.name not UTF-8
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await asyncio.wait_for(call.read(), READ_WITHIN)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.fixture(scope="module")
def blocked_server(redis_server, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "sessionlimits", "--peer-max-blocked", "1")
    s.start(tmp_path_factory.mktemp("session-limits") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


async def test_each_request_is_admitted_like_its_unary_call(blocked_server, name):
    async with grpc.aio.insecure_channel(blocked_server.target) as ch:
        holder, waiter = Session(ch), Session(ch)
        first = await holder.ask(acquire(1, name))
        await waiter.send(acquire(1, name, wait_ms=30_000))
        await _until(lambda: _waiters(ch, name, 1))
        refused = await waiter.ask(acquire(2, name + ":b", wait_ms=30_000))  # the connection's one blocked call is taken
        assert (refused.error.reason, refused.error.metadata["subject"]) == ("TOO_MANY_BLOCKED_CALLS", "connection")
        assert (await holder.ask(release(2, name, first.acquire.lease))).WhichOneof("result") == "release"
        assert (await waiter.read()).acquire.acquired
        assert (await waiter.ask(acquire(3, name + ":b"))).acquire.acquired  # room again


# --- the same on SemaphoreService.Session and ReadWriteLockService.Session ------------

OTHER_SERVICES = {  # kind: (generated module, stub, the grant's field, releasing what is not held)
    "semaphore": (semaphore_pb2, semaphore_pb2_grpc.SemaphoreServiceStub, "permit_id", "PERMIT_NOT_HELD"),
    "rwlock": (rwlock_pb2, rwlock_pb2_grpc.ReadWriteLockServiceStub, "lease", "LOCK_NOT_HELD"),
}


def _other_acquire(kind: str, rid: int, name: str, wait_ms: int = 0):
    m = OTHER_SERVICES[kind][0]
    only_one = {"limit": 1} if kind == "semaphore" else {"mode": rwlock_pb2.MODE_WRITE}
    return m.SessionRequest(id=rid, acquire=m.AcquireRequest(name=name, ttl=_ms(30_000), wait_timeout=_ms(wait_ms),
                                                             **only_one))


@pytest.mark.parametrize("kind", ["semaphore", "rwlock"])
async def test_the_semaphore_and_rwlock_sessions_answer_by_id(channel, kind, name):
    m, stub_of, grant, not_held = OTHER_SERVICES[kind]
    stub = stub_of(channel)

    async def state():
        d = await stub.Describe(m.DescribeRequest(name=name), timeout=10)
        return (d.held, d.waiters) if kind == "semaphore" else (int(d.HasField("writer")), len(d.waiters))

    async def waiters(n: int) -> bool:
        return (await state())[1] == n

    holder, waiter = Session(channel, stub_of), Session(channel, stub_of)
    got = await holder.ask(_other_acquire(kind, 7, name))
    assert got.WhichOneof("result") == "acquire" and got.acquire.acquired
    token = getattr(got.acquire, grant)
    refreshed = await holder.ask(m.SessionRequest(id=8, refresh=m.RefreshRequest(name=name, ttl=_ms(60_000),
                                                                                 **{grant: token})))
    assert refreshed.WhichOneof("result") == "refresh"
    assert refreshed.refresh.expires_at.ToMilliseconds() > got.acquire.expires_at.ToMilliseconds()

    await waiter.send(_other_acquire(kind, 5, name, wait_ms=30_000))
    await _until(lambda: waiters(1))
    await waiter.send(m.SessionRequest(id=6, cancel=5))
    given_up = await waiter.read()
    assert (given_up.id, given_up.WhichOneof("result"), given_up.acquire.acquired) == (5, "acquire", False)
    await _until(lambda: waiters(0))

    released = await holder.ask(m.SessionRequest(id=9, release=m.ReleaseRequest(name=name, **{grant: token})))
    assert released.WhichOneof("result") == "release"
    assert await state() == (0, 0)  # not granted to the cancelled wait
    lost = await holder.ask(m.SessionRequest(id=10, release=m.ReleaseRequest(name=name, **{grant: token})))
    assert lost.WhichOneof("result") == "error"
    assert (lost.error.code, lost.error.reason) == (error_pb2.CODE_FAILED_PRECONDITION, not_held)
    assert lost.error.metadata["name"] == name
    again = await holder.ask(_other_acquire(kind, 11, name))  # still open, nothing changed by the error
    assert again.acquire.acquired
    await holder.ask(m.SessionRequest(id=12, release=m.ReleaseRequest(name=name, **{grant: getattr(again.acquire, grant)})))


# --- the AsyncClient over the session ------------------------------------------------

async def test_the_async_client_locks_over_one_session(aclient, name):
    lock = aclient.lock(name, ttl=10)
    lease = await lock.acquire()
    assert lease is not None and (await lock.describe()).held
    await lock.refresh(lease, ttl=20)
    await lock.release(lease)
    with pytest.raises(LockNotHeld) as err:
        await lock.release(lease)
    assert err.value.reason == "LOCK_NOT_HELD" and err.value.metadata["name"] == name
    session = aclient._services["lock"]._stub._session
    assert session._stream is not None and not session._stream.ended


async def test_an_abandoned_async_acquire_never_leaves_the_lock_held(aclient, name):
    lock = aclient.lock(name, ttl=30)
    held = await lock.acquire()
    for _ in range(20):  # some cancels arrive while waiting, some may race the grant
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(lock.acquire(timeout=30), 0.05)
    await lock.release(held)
    await _until(lambda: _free(lock))


async def _free(lock) -> bool:
    state = await lock.describe()
    return not state.held and state.waiters == 0


async def test_a_broken_session_fails_its_requests_and_the_next_one_reopens(aclient, name):
    lock = aclient.lock(name, ttl=30)
    held = await lock.acquire()
    waiting = asyncio.ensure_future(lock.acquire(timeout=30))
    await _until(lambda: _waiters_of(lock, 1))
    aclient._services["lock"]._stub._session._stream.call.cancel()
    with pytest.raises(Cancelled):  # sent before the reader saw the end: fails with it
        await lock.refresh(held)
    with pytest.raises(Cancelled):
        await waiting
    await _until(lambda: _waiters_of(lock, 0))
    await lock.release(held)  # over a new stream
    assert await lock.acquire() is not None


async def _waiters_of(lock, n: int) -> bool:
    return (await lock.describe()).waiters == n


async def test_a_client_timeout_on_the_session_is_deadline_exceeded(concord_server, name):
    async with concord.AsyncClient(concord_server.target, timeout=0.2) as client:
        lock = client.lock(name, ttl=30)
        held = await lock.acquire()
        # The client's own deadline is the wait plus its timeout; the server answers
        # within the wait, so this only passes the deadline if the answer is lost.
        session = client._services["lock"]._stub._session
        with pytest.raises(DeadlineExceeded):
            await session.request("acquire", pb.AcquireRequest(name=name, ttl=_ms(1000), wait_timeout=_ms(5000)), 0.3)
        await lock.release(held)
        await _until(lambda: _free(lock))

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


# --- semaphores and read-write locks over both clients' sessions ---------------------

KIND_PB = {"lock": pb, "semaphore": semaphore_pb2, "rwlock": rwlock_pb2}
GRANT = {"lock": "lease", "semaphore": "permit_id", "rwlock": "lease"}


def _acquire_request(kind: str, name: str, wait: float):
    """An AcquireRequest that takes the whole of ``name`` (one permit of one; a write hold)."""
    d = _ms(int(wait * 1000))
    if kind == "semaphore":
        return semaphore_pb2.AcquireRequest(name=name, limit=1, ttl=_ms(30_000), wait_timeout=d)
    if kind == "rwlock":
        return rwlock_pb2.AcquireRequest(name=name, mode=rwlock_pb2.MODE_WRITE, ttl=_ms(30_000), wait_timeout=d)
    return pb.AcquireRequest(name=name, ttl=_ms(30_000), wait_timeout=d)


def _handle(client, kind: str, name: str):
    """The client's handle on ``name`` and how to take, give back and check all of it."""
    if kind == "semaphore":
        h = client.semaphore(name, limit=1, ttl=30)
        return h, h.acquire, h.release
    if kind == "rwlock":
        h = client.rwlock(name, ttl=30)
        return h, (lambda timeout=0: h.acquire("write", timeout)), h.release
    h = client.lock(name, ttl=30)
    return h, h.acquire, h.release


def _is_free(kind: str, info) -> bool:
    if kind == "rwlock":
        return info.writer is None and not info.readers and not info.waiters
    return not info.held and info.waiters == 0


def _waiting(kind: str, info) -> int:
    return len(info.waiters) if kind == "rwlock" else info.waiters


def test_sync_semaphores_go_over_a_session(client, name):
    sem = client.semaphore(name, limit=2, ttl=10)
    first, second = sem.acquire(), sem.acquire()
    assert first is not None and second is not None and sem.acquire() is None
    stream = client._services["semaphore"]._stub._session._stream
    assert stream is not None and not stream.ended
    sem.refresh(first, ttl=20)
    assert {h.permit_id for h in sem.describe().holders} == {first.permit_id, second.permit_id}
    sem.release(first)
    with pytest.raises(PermitNotHeld) as err:
        sem.release(first)
    assert err.value.reason == "PERMIT_NOT_HELD"
    with sem as permit:
        assert permit.permit_id != second.permit_id and sem.describe().held == 2
    sem.release(second)
    assert sem.describe().held == 0
    assert client._services["semaphore"]._stub._session._stream is stream  # all of it on one stream


def test_sync_rwlocks_go_over_a_session(client, name):
    rw = client.rwlock(name, ttl=10)
    readers = [rw.acquire("read"), rw.acquire("read")]
    assert all(readers) and rw.acquire("write") is None
    stream = client._services["rwlock"]._stub._session._stream
    assert stream is not None and not stream.ended
    got: list = []
    writer = threading.Thread(target=lambda: got.append(rw.acquire("write", timeout=30)))
    writer.start()
    wait_until(lambda: len(rw.describe().waiters) == 1, message="the writer waits")
    rw.refresh(readers[0], ttl=20)
    for lease in readers:
        rw.release(lease)
    writer.join(10)
    assert got and got[0] is not None and got[0].fencing_token > max(r.fencing_token for r in readers)
    with pytest.raises(LockNotHeld):
        rw.release(readers[0])
    rw.release(got[0])
    with rw.write() as lease:
        assert rw.describe().writer.fencing_token == lease.fencing_token
    assert client._services["rwlock"]._stub._session._stream is stream


async def test_async_semaphores_go_over_a_session(aclient, name):
    sem = aclient.semaphore(name, limit=2, ttl=10)
    first, second = await sem.acquire(), await sem.acquire()
    assert first is not None and second is not None and await sem.acquire() is None
    stream = aclient._services["semaphore"]._stub._session._stream
    assert stream is not None and not stream.ended
    await sem.refresh(first, ttl=20)
    waiting = asyncio.ensure_future(sem.acquire(timeout=30))
    await _until(lambda: _async_waiters(sem, 1))
    await sem.release(first)
    third = await asyncio.wait_for(waiting, 10)
    assert third is not None
    with pytest.raises(PermitNotHeld):
        await sem.release(first)
    await sem.release(second)
    await sem.release(third)
    assert (await sem.describe()).held == 0
    assert aclient._services["semaphore"]._stub._session._stream is stream


async def _async_waiters(handle, n: int) -> bool:
    return (await handle.describe()).waiters == n


async def test_async_rwlocks_go_over_a_session(aclient, name):
    rw = aclient.rwlock(name, ttl=10)
    readers = [await rw.acquire("read"), await rw.acquire("read")]
    assert all(readers) and await rw.acquire("write") is None
    stream = aclient._services["rwlock"]._stub._session._stream
    assert stream is not None and not stream.ended
    writer = asyncio.ensure_future(rw.acquire("write", timeout=30))

    async def one_waits() -> bool:
        return len((await rw.describe()).waiters) == 1

    await _until(one_waits)
    await rw.refresh(readers[0], ttl=20)
    for lease in readers:
        await rw.release(lease)
    lease = await asyncio.wait_for(writer, 10)
    assert lease is not None and lease.fencing_token > max(r.fencing_token for r in readers)
    with pytest.raises(LockNotHeld):
        await rw.release(readers[0])
    await rw.release(lease)
    async with rw.read() as shared:
        assert shared.mode == "read"
    assert aclient._services["rwlock"]._stub._session._stream is stream


@pytest.mark.parametrize("kind", ["lock", "semaphore", "rwlock"])
async def test_an_abandoned_async_acquire_never_leaves_any_kind_held(concord_server, aclient, kind, name):
    """As for locks above, and with the holder letting go just as the waiter gives up,
    so that some grants beat their cancel (and must be released by the session)."""
    handle, acquire, release = _handle(aclient, kind, name)
    session = aclient._services[kind]._stub._session
    rnd = random.Random()
    async with concord.AsyncClient(concord_server.target) as other:
        _, hold, let_go = _handle(other, kind, name)
        for i in range(20):
            held = await hold(timeout=10)
            assert held is not None
            racer = asyncio.ensure_future(let_go(held)) if i % 2 else None  # the grant and the cancel race
            try:
                got = await session.request("acquire", _acquire_request(kind, name, 30), rnd.uniform(0.001, 0.03))
            except DeadlineExceeded:
                pass
            else:  # answered in time: a grant like any other
                assert got.acquired
                await session.request("release", KIND_PB[kind].ReleaseRequest(
                    name=name, **{GRANT[kind]: getattr(got, GRANT[kind])}), 10)
            await (racer if racer is not None else let_go(held))

            async def free() -> bool:
                return _is_free(kind, await handle.describe())

            await _until(free)
        assert not session._stream.waiting  # every answer, the releases' too, has come


# --- the synchronous Client over the session -----------------------------------------

def test_the_sync_client_locks_over_one_session(client, name):
    lock = client.lock(name, ttl=10)
    lease = lock.acquire()
    assert lease is not None and lock.describe().held
    session = client._services["lock"]._stub._session
    stream = session._stream
    assert stream is not None and not stream.ended and stream._reader.is_alive()
    lock.refresh(lease, ttl=20)
    lock.release(lease)
    with pytest.raises(LockNotHeld) as err:
        lock.release(lease)
    assert err.value.reason == "LOCK_NOT_HELD" and err.value.metadata["name"] == name
    with lock as held:
        assert lock.describe().fencing_token == held.fencing_token
    assert session._stream is stream and not stream.ended and not stream.waiting


def test_fifo_handoff_between_two_sync_clients_in_threads(concord_server, client, name):
    """Waiters on two clients, queued one after the other, get the lock in that order,
    each from the one before, with increasing fencing tokens."""
    with concord.Client(concord_server.target) as other:
        clients = [client, other]
        held = client.lock(name, ttl=30).acquire()
        granted: list[tuple[int, int]] = []
        errors: list[BaseException] = []

        def waiter(i: int) -> None:
            lock = clients[i % 2].lock(name, ttl=30)
            try:
                lease = lock.acquire(timeout=30)
                granted.append((i, lease.fencing_token))
                lock.release(lease)
            except BaseException as exc:  # noqa: BLE001 (reported below)
                errors.append(exc)

        threads = []
        for i in range(6):
            threads.append(threading.Thread(target=waiter, args=(i,)))
            threads[-1].start()
            wait_until(lambda: client.lock(name).describe().waiters == i + 1, message=f"waiter {i} queued")
        client.lock(name).release(held)
        for t in threads:
            t.join(30)
        assert not errors, errors
        assert [i for i, _ in granted] == list(range(6))
        tokens = [held.fencing_token] + [t for _, t in granted]
        assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
        assert _is_free("lock", client.lock(name).describe())


@pytest.mark.parametrize("kind", ["lock", "semaphore", "rwlock"])
def test_an_abandoned_sync_acquire_never_leaves_it_held(concord_server, client, kind, name):
    """A caller past its timeout raises DeadlineExceeded; its acquire is cancelled in the
    server, and a grant that beat the cancel is released (the holder lets go just as
    the waiter gives up in every other round, so that some do)."""
    handle, acquire, release = _handle(client, kind, name)
    session = client._services[kind]._stub._session
    rnd = random.Random()
    with concord.Client(concord_server.target) as other:
        _, hold, let_go = _handle(other, kind, name)
        for i in range(20):
            held = hold(timeout=10)
            assert held is not None
            racer = threading.Thread(target=let_go, args=(held,))
            if i % 2:  # let go at once: the grant and the cancel race
                racer.start()
            try:
                got = session.request("acquire", _acquire_request(kind, name, 30), rnd.uniform(0.001, 0.03))
            except DeadlineExceeded:
                pass
            else:  # answered in time: a grant like any other
                assert got.acquired
                session.request("release", KIND_PB[kind].ReleaseRequest(
                    name=name, **{GRANT[kind]: getattr(got, GRANT[kind])}), 10)
            if not i % 2:
                racer.start()
            racer.join(10)
            wait_until(lambda: _is_free(kind, handle.describe()), message=f"{kind} {name} free in round {i}")
        wait_until(lambda: not session._stream.waiting, message="every answer, the releases' too")


def test_a_sync_client_timeout_on_the_session_is_deadline_exceeded(concord_server, name):
    with concord.Client(concord_server.target, timeout=0.2) as client:
        lock = client.lock(name, ttl=30)
        held = lock.acquire()
        session = client._services["lock"]._stub._session
        started = time.monotonic()
        with pytest.raises(DeadlineExceeded) as err:
            session.request("acquire", pb.AcquireRequest(name=name, ttl=_ms(1000), wait_timeout=_ms(5000)), 0.3)
        assert time.monotonic() - started < 3 and "lock acquire" in str(err.value)
        lock.release(held)
        wait_until(lambda: _is_free("lock", lock.describe()), message="the lock free")


def test_a_broken_sync_session_fails_its_requests_and_the_next_one_reopens(client, name):
    lock = client.lock(name, ttl=30)
    held = lock.acquire()
    failed: list[BaseException] = []

    def wait() -> None:
        try:
            lock.acquire(timeout=30)
        except BaseException as exc:  # noqa: BLE001 (checked below)
            failed.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_until(lambda: lock.describe().waiters == 1, message="the acquire waits")
    session = client._services["lock"]._stub._session
    broken = session._stream
    broken.call.cancel()
    waiter.join(10)
    assert not waiter.is_alive() and len(failed) == 1 and isinstance(failed[0], Cancelled), failed
    assert broken.ended and not broken.waiting
    wait_until(lambda: not broken._reader.is_alive(), message="the reader thread ended")
    wait_until(lambda: lock.describe().waiters == 0, message="the server let the wait go")
    lock.release(held)  # over a new stream
    assert session._stream is not broken and not session._stream.ended
    assert lock.acquire() is not None


def test_sync_close_ends_the_sessions_and_leaves_no_thread(concord_server, name):
    before = set(threading.enumerate())
    with concord.Client(concord_server.target) as holder:
        held = holder.lock(name, ttl=30).acquire()
        client = concord.Client(concord_server.target)
        lock = client.lock(name, ttl=30)
        with client.semaphore(name, limit=1):
            pass
        with client.rwlock(name).read():
            pass
        failed: list[BaseException] = []

        def wait() -> None:
            try:
                lock.acquire(timeout=30)
            except BaseException as exc:  # noqa: BLE001 (checked below)
                failed.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        wait_until(lambda: holder.lock(name).describe().waiters == 1, message="the acquire waits")
        readers = [s._stream._reader for s in client._sessions.values()]
        assert all(r.is_alive() for r in readers)
        client.close()
        waiter.join(10)
        assert len(failed) == 1 and isinstance(failed[0], Cancelled), failed
        assert not any(r.is_alive() for r in readers)
        with pytest.raises(Cancelled):
            lock.acquire()
        wait_until(lambda: holder.lock(name).describe().waiters == 0, message="the server let the wait go")
        holder.lock(name).release(held)
    wait_until(lambda: not (set(threading.enumerate()) - before),
               message="no thread left behind")

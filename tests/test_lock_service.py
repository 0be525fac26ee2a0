"""The Lock service end to end: real concord-server process, real port, real client."""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

import concord
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc
from support import renewed_past, wait_until


def test_acquire_describe_release(client, name):
    lock = client.lock(name, ttl=10, owner="worker-1")
    lease = lock.acquire()
    assert lease is not None and not lease.lost
    info = lock.describe()
    assert info.held and info.owner == "worker-1" and info.fencing_token == lease.fencing_token
    assert 0 < info.ttl_remaining <= 10 and info.expires_at is not None
    assert client.lock(name).acquire(timeout=0) is None
    lease.release()
    assert not lock.describe().held
    assert lock.acquire().fencing_token > lease.fencing_token


def test_owner_defaults_to_the_callers_address(client, name):
    client.lock(name).acquire()
    assert client.lock(name).describe().owner.startswith("ipv4:127.0.0.1:")


def test_release_of_a_lost_lock_is_lock_not_held(client, name):
    lease = client.lock(name, ttl=10).acquire()
    lease.release()
    with pytest.raises(concord.LockNotHeld) as err:
        lease.release()
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and err.value.reason == "LOCK_NOT_HELD"
    with pytest.raises(concord.LockNotHeld):
        lease.refresh()


def test_waiter_gets_the_lock_when_the_holder_releases(client, name):
    holder = client.lock(name, ttl=30).acquire()
    got: list[concord.Lease] = []
    t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=30).acquire(timeout=20)))
    t.start()
    wait_until(lambda: client.lock(name).describe().waiters == 1, message="waiter queued")
    holder.release()
    t.join(20)
    assert got and got[0] is not None and got[0].fencing_token > holder.fencing_token


def test_with_block_renews_past_the_ttl_and_releases(client, name):
    # ttl/3 renewals leave 2/3 of the TTL as slack for a stalled thread on a busy machine.
    with client.lock(name, ttl=2, timeout=5) as lease:
        first_expiry = lease.expires_at
        wait_until(lambda: renewed_past(lease, first_expiry, 2.5), message="renewals past the first TTL")
        assert client.lock(name).describe().fencing_token == lease.fencing_token
        assert not lease.lost
    assert not client.lock(name).describe().held


def test_with_block_raises_lock_lost_when_the_lock_was_taken_away(client, redis_sync, name):
    with pytest.raises(concord.LockLost):
        with client.lock(name, ttl=0.3, timeout=5) as lease:
            redis_sync.delete(*[k for k in redis_sync.keys("*") if name in k and k.endswith(":holder")])
            wait_until(lambda: lease.lost, message="renewal to notice the loss")


def test_with_block_times_out(client, name):
    client.lock(name, ttl=30).acquire()
    with pytest.raises(concord.LockTimeout):
        with client.lock(name, timeout=0.2):
            pytest.fail("must not enter")


async def test_async_with_block(aclient, name):
    async with aclient.lock(name, ttl=5, timeout=5) as lease:
        assert (await aclient.lock(name).describe()).fencing_token == lease.fencing_token
        assert await aclient.lock(name).acquire(timeout=0) is None
    assert not (await aclient.lock(name).describe()).held


async def test_async_waiters_take_turns(aclient, name):
    holders = []

    async def worker(i: int) -> None:
        async with aclient.lock(name, ttl=5, timeout=20) as lease:
            holders.append(lease.fencing_token)

    await asyncio.gather(*(worker(i) for i in range(10)))
    assert holders == sorted(holders) and len(set(holders)) == 10


def test_errors_carry_error_info(concord_server, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = lock_pb2_grpc.LockServiceStub(ch)
        with pytest.raises(grpc.RpcError) as err:
            stub.Release(pb.ReleaseRequest(name=name, lease="0" * 32))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    status = rpc_status.from_call(err.value)
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(info)
    assert (info.reason, info.domain) == ("LOCK_NOT_HELD", "concord")


def test_grpc_deadline_shorter_than_the_wait_answers_not_acquired(concord_server, client, name):
    client.lock(name, ttl=30).acquire()
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = lock_pb2_grpc.LockServiceStub(ch)
        resp = stub.Acquire(pb.AcquireRequest(name=name, ttl=duration_pb2.Duration(seconds=5),
                                              wait_timeout=duration_pb2.Duration(seconds=60)), timeout=1.0)
    assert not resp.acquired
    assert client.lock(name).describe().waiters == 0


async def test_cancelled_acquire_call_leaves_the_queue(concord_server, aclient, name):
    holder = await aclient.lock(name, ttl=30).acquire()
    async with grpc.aio.insecure_channel(concord_server.target) as ch:
        call = lock_pb2_grpc.LockServiceStub(ch).Acquire(
            pb.AcquireRequest(name=name, ttl=duration_pb2.Duration(seconds=5), wait_timeout=duration_pb2.Duration(seconds=60)))
        await _until(lambda: _waiters(aclient, name, 1))
        call.cancel()
        await _until(lambda: _waiters(aclient, name, 0))
    await holder.release()
    assert not (await aclient.lock(name).describe()).held


async def _waiters(aclient, name, n) -> bool:
    return (await aclient.lock(name).describe()).waiters == n


async def _until(pred, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not await pred():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def _hold(stub, name, ttl=1.5, wait=5.0):
    req = pb.HoldRequest(name=name)
    req.ttl.FromMilliseconds(int(ttl * 1000))
    req.wait_timeout.FromMilliseconds(int(wait * 1000))
    return stub.Hold(req)


def test_hold_streams_acquired_then_refreshed_and_releases_on_cancel(concord_server, client, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = _hold(lock_pb2_grpc.LockServiceStub(ch), name)
        first = next(stream)
        assert first.event == pb.HOLD_EVENT_ACQUIRED and first.fencing_token > 0
        refreshes = [next(stream) for _ in range(3)]
        assert all(r.event == pb.HOLD_EVENT_REFRESHED for r in refreshes)
        assert refreshes[-1].expires_at.ToMilliseconds() > first.expires_at.ToMilliseconds()
        assert client.lock(name).describe().fencing_token == first.fencing_token
        stream.cancel()
    wait_until(lambda: not client.lock(name).describe().held, timeout=5, message="release on cancel")


def test_hold_sends_lost_when_the_lock_is_taken_away(concord_server, redis_sync, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = _hold(lock_pb2_grpc.LockServiceStub(ch), name)
        assert next(stream).event == pb.HOLD_EVENT_ACQUIRED
        redis_sync.delete(*[k for k in redis_sync.keys("*") if name in k and k.endswith(":holder")])
        events = [e.event for e in stream]
    assert events[-1] == pb.HOLD_EVENT_LOST


def test_hold_that_cannot_acquire_ends_with_deadline_exceeded(concord_server, client, name):
    client.lock(name, ttl=30).acquire()
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = lock_pb2_grpc.LockServiceStub(ch).Hold(
            pb.HoldRequest(name=name, ttl=duration_pb2.Duration(seconds=5), wait_timeout=duration_pb2.Duration(nanos=200_000_000)))
        with pytest.raises(grpc.RpcError) as err:
            next(stream)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    info = error_details_pb2.ErrorInfo()
    rpc_status.from_call(err.value).details[0].Unpack(info)
    assert info.reason == "LOCK_WAIT_TIMEOUT"


async def test_a_burst_of_blocking_acquires_all_queue_and_all_cancel_cleanly(concord_server, aclient, name):
    # More than gRPC's default backlog of pending calls (1,000 soft / 3,000 hard), over
    # connections of at most --max-streams-per-connection (100) calls each.
    burst, connections = 4000, 40
    holder = await aclient.lock(name, ttl=60).acquire()
    channels = [grpc.aio.insecure_channel(concord_server.target, options=[("grpc.use_local_subchannel_pool", 1)])
                for _ in range(connections)]
    try:
        request = pb.AcquireRequest(name=name, ttl=duration_pb2.Duration(seconds=5),
                                    wait_timeout=duration_pb2.Duration(seconds=120))
        calls = [lock_pb2_grpc.LockServiceStub(channels[i % connections]).Acquire(request, timeout=180)
                 for i in range(burst)]
        await _until(lambda: _waiters(aclient, name, burst), timeout=60)
        for call in calls:
            call.cancel()
        await _until(lambda: _waiters(aclient, name, 0), timeout=60)
        codes = {await call.code() for call in calls}
        assert codes == {grpc.StatusCode.CANCELLED}  # cancelled by us, none turned away
    finally:
        for ch in channels:
            await ch.close()
    await holder.release()
    assert not (await aclient.lock(name).describe()).held


def test_a_release_never_queues_behind_more_blocked_acquires_than_a_connection_carries(client, name):
    """120 threads of one Client block in Acquire on a server that admits 100 calls per
    connection (the default --max-streams-per-connection). The holder's release goes
    on the Client's other connection, so it is not stuck behind them (before, it waited
    for a blocked call to end and failed DEADLINE_EXCEEDED after the client's timeout),
    and every waiter gets the lock in turn."""
    holder = client.lock(name, ttl=60).acquire()
    got: list[int] = []

    def wait_then_release() -> None:
        lease = client.lock(name, ttl=10).acquire(timeout=60)
        got.append(lease.fencing_token)
        lease.release()

    threads = [threading.Thread(target=wait_then_release) for _ in range(120)]
    for t in threads:
        t.start()
    wait_until(lambda: client.lock(name).describe().waiters >= 100, message="a connection's worth of waiters")
    holder.release()
    for t in threads:
        t.join(60)
    assert len(got) == 120 and got == sorted(got)

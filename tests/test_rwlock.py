"""Read-write locks: the primitive on its own (scripts, queue, wake-ups against real
Redis, no gRPC), then the ReadWriteLockService end to end through a real server and
the real client."""

from __future__ import annotations

import asyncio
import time

import concord
import grpc
import pytest
from concord.rwlock.v1 import rwlock_pb2 as pb
from concord.rwlock.v1 import rwlock_pb2_grpc
from concord_server.errors import LockNotHeld
from concord_server.primitives.rwlock import _ACQUIRE, _RELEASE, READ, WRITE, RWLocks
from google.protobuf import duration_pb2
from support import (
    assert_rejected_and_nothing_written,
    async_wait_until,
    error_info,
    renewed_past,
    wait_until,
    wired_primitive,
)

LONG = 30_000  # ms: a TTL or wait that never runs out during a test


@pytest.fixture
async def rw(redis_server):
    async with wired_primitive(RWLocks, redis_server.url) as rw:
        yield rw


def _waiting(rw, name: str, n: int):
    async def check() -> bool:
        return len((await rw.describe(name)).waiters) == n
    return check


async def _queue(rw, name: str, mode: int, owner: str, n_before: int, ttl: int = LONG) -> asyncio.Task:
    """Starts a waiting acquire and returns once it is queued (the queue holds n_before + 1)."""
    task = asyncio.create_task(rw.acquire(name, mode, ttl, LONG, owner))
    await async_wait_until(_waiting(rw, name, n_before + 1), message=f"{owner} queued")
    return task


# --- the primitive -----------------------------------------------------------------


def test_every_key_of_a_name_shares_one_hash_tag():
    from concord_server.keys import KeySpace

    k = KeySpace("p").rwlock("a{b}:c")
    tag = "{p:rw:a%7Bb%7D:c}"
    assert all(key.startswith(tag + ":") for key in [*k.keys, k.channel])
    assert len(set(k.keys)) == 6 and k.keys == [k.holders, k.info, k.queue, k.waiters, k.procs, k.fence]
    assert KeySpace("p").rwlock("a").holders != KeySpace("p").lock("a").holder


async def test_readers_share_and_a_writer_excludes_everyone(rw, name):
    r1 = await rw.acquire(name, READ, LONG, 0, "r1")
    r2 = await rw.acquire(name, READ, LONG, 0, "r2")
    assert r1 is not None and r2 is not None and r1.lease != r2.lease
    assert await rw.acquire(name, WRITE, LONG, 0, "w") is None  # readers hold it
    await rw.release(name, r1.lease)
    assert await rw.acquire(name, WRITE, LONG, 0, "w") is None  # one reader still does
    await rw.release(name, r2.lease)
    w = await rw.acquire(name, WRITE, LONG, 0, "w")
    assert w is not None
    assert await rw.acquire(name, READ, LONG, 0, "r3") is None  # a writer excludes readers
    assert await rw.acquire(name, WRITE, LONG, 0, "w2") is None  # and writers
    state = await rw.describe(name)
    assert state.writer is not None and state.writer.owner == "w" and state.readers == []
    await rw.release(name, w.lease)
    assert (await rw.describe(name)).writer is None


async def test_a_queued_writer_is_not_overtaken_by_later_readers(rw, name):
    r1 = await rw.acquire(name, READ, LONG, 0, "r1")
    writer = await _queue(rw, name, WRITE, "w", 0)
    assert await rw.acquire(name, READ, LONG, 0, "late-try") is None  # a reader may not barge past the writer
    late = await _queue(rw, name, READ, "late", 1)
    await rw.release(name, r1.lease)
    w = await asyncio.wait_for(writer, 10)
    assert w.fencing_token > r1.fencing_token
    state = await rw.describe(name)
    assert state.writer.owner == "w" and [x.owner for x in state.waiters] == ["late"] and not late.done()
    await rw.release(name, w.lease)
    r2 = await asyncio.wait_for(late, 10)
    assert r2.fencing_token > w.fencing_token


async def test_readers_queued_behind_a_writer_enter_together(rw, name):
    w1 = await rw.acquire(name, WRITE, LONG, 0, "w1")
    readers = [await _queue(rw, name, READ, f"r{i}", i) for i in range(3)]
    w2 = await _queue(rw, name, WRITE, "w2", 3)
    r_after = await _queue(rw, name, READ, "r-after", 4)
    state = await rw.describe(name)
    assert [(x.owner, x.mode) for x in state.waiters] == [("r0", READ), ("r1", READ), ("r2", READ), ("w2", WRITE),
                                                          ("r-after", READ)]
    await rw.release(name, w1.lease)
    grants = await asyncio.wait_for(asyncio.gather(*readers), 10)
    tokens = [g.fencing_token for g in grants]
    assert tokens == sorted(tokens) and len(set(tokens)) == 3 and tokens[0] > w1.fencing_token
    state = await rw.describe(name)
    assert [h.owner for h in state.readers] == ["r0", "r1", "r2"]
    assert [x.owner for x in state.waiters] == ["w2", "r-after"]  # the reader behind w2 waits for it
    assert not w2.done() and not r_after.done()
    for g in grants:
        await rw.release(name, g.lease)
    second = await asyncio.wait_for(w2, 10)
    assert second.fencing_token > max(tokens) and not r_after.done()
    await rw.release(name, second.lease)
    last = await asyncio.wait_for(r_after, 10)
    assert last.fencing_token > second.fencing_token
    await rw.release(name, last.lease)


async def test_a_holder_whose_ttl_ran_out_frees_the_lock_without_client_action(rw, name):
    reader = await rw.acquire(name, READ, 200, 0, "crashed-reader")
    writer = await rw.acquire(name, WRITE, LONG, 10_000, "writer")  # waits for the reader's TTL
    assert writer is not None and writer.fencing_token > reader.fencing_token
    with pytest.raises(LockNotHeld):
        await rw.refresh(name, reader.lease, 1000)
    with pytest.raises(LockNotHeld):
        await rw.release(name, reader.lease)
    await rw.release(name, writer.lease)


async def test_fencing_tokens_strictly_increase_over_readers_and_writers(rw, name):
    tokens = []
    for mode in [READ, READ, WRITE, READ, WRITE, WRITE, READ, READ]:
        g = await rw.acquire(name, mode, LONG, 10_000, f"m{mode}")
        tokens.append(g.fencing_token)
        await rw.release(name, g.lease)
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)
    assert tokens[0] >= int(time.time() * 1e6) - 600_000_000  # at least the Redis clock in us (within minutes)


async def test_fencing_survives_the_loss_of_the_counter_key(rw, name, redis_async):
    first = await rw.acquire(name, WRITE, LONG, 0, "a")
    await rw.release(name, first.lease)
    await redis_async.delete(rw._keys.rwlock(name).fence)
    second = await rw.acquire(name, READ, LONG, 0, "b")
    assert second.fencing_token > first.fencing_token
    await rw.release(name, second.lease)


async def test_a_retried_acquire_whose_lease_holds_is_acquired(rw, name):
    k = rw._keys.rwlock(name)
    args = [k.channel, 60_000, "lease-1", READ, 10_000, "me", 0, "proc", 0]
    status, fence, ttl, _ = await _ACQUIRE(rw._redis, k.keys, args)
    assert status == 1 and 0 < ttl <= 10_000
    again = await _ACQUIRE(rw._redis, k.keys, args)
    assert again[:2] == [1, fence]  # the same hold, not a second one
    retried_as_writer = await _ACQUIRE(rw._redis, k.keys, [*args[:3], WRITE, *args[4:]])
    assert retried_as_writer[:2] == [1, fence]
    assert len((await rw.describe(name)).readers) == 1
    await rw.release(name, "lease-1")


async def test_release_and_refresh_need_the_lease(rw, name):
    g = await rw.acquire(name, WRITE, 10_000, 0, "me")
    with pytest.raises(LockNotHeld):
        await rw.release(name, "f" * 32)
    with pytest.raises(LockNotHeld):
        await rw.refresh(name, "f" * 32, 5000)
    refreshed = await rw.refresh(name, g.lease, 20_000)
    assert refreshed.expires_at_ms > g.expires_at_ms and refreshed.fencing_token == g.fencing_token
    await rw.release(name, g.lease)
    with pytest.raises(LockNotHeld):
        await rw.release(name, g.lease)


async def test_wait_timeout_returns_none_and_leaves_no_waiter(rw, name):
    holder = await rw.acquire(name, WRITE, LONG, 0, "holder")
    assert await rw.acquire(name, READ, LONG, 200, "late") is None
    assert (await rw.describe(name)).waiters == []
    await rw.release(name, holder.lease)


async def test_a_cancelled_writer_at_the_head_lets_the_readers_behind_it_in(rw, name):
    reader = await rw.acquire(name, READ, LONG, 0, "reader")
    writer = await _queue(rw, name, WRITE, "quitter", 0)
    behind = await _queue(rw, name, READ, "behind", 1)
    writer.cancel()
    got = await asyncio.wait_for(behind, 10)  # admitted as soon as the writer left the queue
    state = await rw.describe(name)
    assert state.waiters == [] and {h.owner for h in state.readers} == {"reader", "behind"}
    for g in (reader, got):
        await rw.release(name, g.lease)
    k = rw._keys.rwlock(name)
    await async_wait_until(lambda: _no_keys(rw, k), message="no key left but the fence")


async def _no_keys(rw, k) -> bool:
    return await rw._redis.execute_command("EXISTS", *k.keys[:5]) == 0


async def test_grant_is_found_by_the_poll_when_the_notification_is_lost(redis_server, name):
    async with wired_primitive(RWLocks, redis_server.url, interval=0.2) as rw:
        holder = await rw.acquire(name, WRITE, LONG, 0, "holder")
        task = await _queue(rw, name, READ, "waiter", 0)
        k = rw._keys.rwlock(name)
        # Released through a channel nobody listens on: the grant's message is lost.
        assert await _RELEASE(rw._redis, k.keys, ["nowhere", 60_000, holder.lease]) == 1
        grant = await asyncio.wait_for(task, 10)
        assert grant.fencing_token > holder.fencing_token
        await rw.release(name, grant.lease)


async def test_waiters_of_a_dead_server_process_are_skipped(redis_server, name):
    async with wired_primitive(RWLocks, redis_server.url) as rw:
        holder = await rw.acquire(name, READ, LONG, 0, "holder")
        k = rw._keys.rwlock(name)
        # A writer queued by a process that then died: it never polls again.
        status, *_ = await _ACQUIRE(rw._redis, k.keys, [k.channel, 60_000, "ghost", WRITE, 60_000, "ghost",
                                                         60_000, "dead-proc", 300])
        assert status == 2
        assert [w.owner for w in (await rw.describe(name)).waiters] == ["ghost"]
        # Once the ghost's process is silent past its liveness, readers go past it.
        late = await rw.acquire(name, READ, LONG, 10_000, "late")
        assert late is not None and (await rw.describe(name)).waiters == []
        for g in (holder, late):
            await rw.release(name, g.lease)


# --- the service, through the real client ---------------------------------------------


def test_client_read_and_write_blocks(client, name):
    rw = client.rwlock(name, ttl=10, timeout=5, owner="me")
    with rw.read() as r1, client.rwlock(name, owner="other").read() as r2:
        assert r1.mode == "read" and r2.fencing_token > r1.fencing_token
        info = rw.describe()
        assert info.writer is None and [h.owner for h in info.readers] == ["me", "other"]
        assert 0 < info.readers[0].ttl_remaining <= 10
        assert rw.acquire("write", timeout=0) is None
    with rw.write() as w:
        assert w.mode == "write" and w.fencing_token > r2.fencing_token
        info = rw.describe()
        assert info.writer.owner == "me" and info.writer.fencing_token == w.fencing_token and info.readers == []
        assert rw.acquire("read", timeout=0) is None
    assert not rw.describe().held


def test_owner_defaults_to_the_callers_address(client, name):
    client.rwlock(name).acquire("write")
    assert client.rwlock(name).describe().writer.owner.startswith("ipv4:127.0.0.1:")


def test_explicit_calls_and_lock_not_held(client, name):
    rw = client.rwlock(name, ttl=10)
    lease = rw.acquire("read")
    refreshed = lease.refresh(20)
    assert refreshed is lease
    lease.release()
    with pytest.raises(concord.LockNotHeld) as err:
        lease.release()
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION and err.value.reason == "LOCK_NOT_HELD"
    with pytest.raises(concord.LockNotHeld):
        lease.refresh()


def test_with_block_renews_past_the_ttl_and_releases(client, name):
    with client.rwlock(name, ttl=2, timeout=5).read() as lease:
        first_expiry = lease.expires_at
        wait_until(lambda: renewed_past(lease, first_expiry, 2.5), message="renewals past the first TTL")
        assert not lease.lost
    assert not client.rwlock(name).describe().held


def test_with_block_raises_lock_lost_when_the_hold_was_taken_away(client, redis_sync, name):
    with pytest.raises(concord.LockLost):
        with client.rwlock(name, ttl=0.3, timeout=5).write() as lease:
            redis_sync.delete(*[k for k in redis_sync.keys("*") if name in k and k.endswith((":holders", ":info"))])
            wait_until(lambda: lease.lost, message="renewal to notice the loss")


def test_with_block_times_out(client, name):
    client.rwlock(name, ttl=30).acquire("read")
    with pytest.raises(concord.LockTimeout):
        with client.rwlock(name).write(timeout=0.2):
            pass
    assert client.rwlock(name).describe().waiters == []


async def test_async_blocks_take_turns(aclient, name):
    order = []

    async def writer(i: int) -> None:
        async with aclient.rwlock(name, ttl=5, timeout=10).write() as lease:
            order.append(("in", i, lease.fencing_token))
            await asyncio.sleep(0.01)
            order.append(("out", i, lease.fencing_token))

    async with aclient.rwlock(name, ttl=5).read() as reader:
        tasks = [asyncio.create_task(writer(i)) for i in range(3)]
        await _until(lambda: _async_waiters(aclient, name, 3), "three writers queued")
        info = await aclient.rwlock(name).describe()
        assert [w.mode for w in info.waiters] == ["write"] * 3 and len(info.readers) == 1 and info.writer is None
    await asyncio.gather(*tasks)
    # Writers never overlap: each one's in is followed by its own out.
    assert [e[0] for e in order] == ["in", "out"] * 3
    tokens = [e[2] for e in order[::2]]
    assert tokens == sorted(tokens) and tokens[0] > reader.fencing_token


async def _async_waiters(aclient, name: str, n: int) -> bool:
    return len((await aclient.rwlock(name).describe()).waiters) == n


async def _until(predicate, message: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (value := await predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {message}"
        await asyncio.sleep(0.01)
    return value


def _hold(channel, name: str, mode=pb.MODE_WRITE, ttl_s: float = 0.3, wait_s: float = 5):
    stub = rwlock_pb2_grpc.ReadWriteLockServiceStub(channel)
    req = pb.HoldRequest(name=name, mode=mode, owner="holder")
    req.ttl.FromMilliseconds(int(ttl_s * 1000))
    req.wait_timeout.FromMilliseconds(int(wait_s * 1000))
    return stub.Hold(req)


def test_hold_streams_acquired_then_refreshed_and_releases_on_close(concord_server, client, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = _hold(ch, name, pb.MODE_READ)
        first = next(stream)
        assert first.event == pb.HOLD_EVENT_ACQUIRED and first.lease and first.fencing_token > 0
        assert next(stream).event == pb.HOLD_EVENT_REFRESHED  # renewed every ttl/3 by the server
        assert [h.fencing_token for h in client.rwlock(name).describe().readers] == [first.fencing_token]
        stream.cancel()
    wait_until(lambda: not client.rwlock(name).describe().held, message="the hold released on close")


def test_hold_sends_lost_when_the_hold_is_taken_away(concord_server, redis_sync, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = _hold(ch, name)
        assert next(stream).event == pb.HOLD_EVENT_ACQUIRED
        redis_sync.delete(*[k for k in redis_sync.keys("*") if name in k and k.endswith((":holders", ":info"))])
        events = [r.event for r in stream]
        assert events[-1] == pb.HOLD_EVENT_LOST


def test_hold_that_cannot_acquire_ends_with_deadline_exceeded(concord_server, client, name):
    client.rwlock(name, ttl=30).acquire("read")
    with grpc.insecure_channel(concord_server.target) as ch:
        with pytest.raises(grpc.RpcError) as err:
            list(_hold(ch, name, pb.MODE_WRITE, ttl_s=5, wait_s=0.2))
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    assert error_info(err.value).reason == "LOCK_WAIT_TIMEOUT"
    assert client.rwlock(name).describe().waiters == []


def _acquire(**fields) -> pb.AcquireRequest:
    req = pb.AcquireRequest(name=fields.get("name", "rw:bad"), mode=fields.get("mode", pb.MODE_READ))
    if "ttl_ms" in fields:
        req.ttl.FromMilliseconds(fields["ttl_ms"])
    else:
        req.ttl.FromSeconds(10)
    return req


@pytest.mark.parametrize("request_, field", [
    (_acquire(name=""), "name"),
    (_acquire(name="a\nb"), "name"),
    (_acquire(mode=pb.MODE_UNSPECIFIED), "mode"),
    (_acquire(mode=7), "mode"),
    (_acquire(ttl_ms=5), "ttl"),
    (_acquire(ttl_ms=3_600_001), "ttl"),
    (pb.AcquireRequest(name="rw:bad", mode=pb.MODE_WRITE), "ttl"),
    (pb.AcquireRequest(name="rw:bad", mode=pb.MODE_WRITE, ttl=duration_pb2.Duration(seconds=1),
                       wait_timeout=duration_pb2.Duration(seconds=61)), "wait_timeout"),
], ids=["empty-name", "control-char", "mode-unspecified", "mode-unknown", "ttl-too-short", "ttl-too-long",
        "ttl-missing", "wait-too-long"])
def test_bad_acquire_is_invalid_argument_and_writes_nothing(validation_server, redis_sync, request_, field):
    with grpc.insecure_channel(validation_server.target) as ch:
        stub = rwlock_pb2_grpc.ReadWriteLockServiceStub(ch)
        assert_rejected_and_nothing_written(lambda: stub.Acquire(request_, timeout=10), redis_sync, field)
        hold = pb.HoldRequest(name=request_.name, mode=request_.mode, ttl=request_.ttl,
                              wait_timeout=request_.wait_timeout)
        if not request_.HasField("ttl"):
            hold.ClearField("ttl")
        assert_rejected_and_nothing_written(lambda: stub.Hold(hold, timeout=10), redis_sync, field)


def test_bad_release_refresh_describe_are_invalid_argument(validation_server, redis_sync):
    with grpc.insecure_channel(validation_server.target) as ch:
        stub = rwlock_pb2_grpc.ReadWriteLockServiceStub(ch)
        assert_rejected_and_nothing_written(lambda: stub.Release(pb.ReleaseRequest(name="", lease="x"), timeout=10),
                                            redis_sync, "name")
        assert_rejected_and_nothing_written(lambda: stub.Release(pb.ReleaseRequest(name="n", lease=""), timeout=10),
                                            redis_sync, "lease")
        assert_rejected_and_nothing_written(
            lambda: stub.Refresh(pb.RefreshRequest(name="n", lease="x", ttl=duration_pb2.Duration()), timeout=10),
            redis_sync, "ttl")
        assert_rejected_and_nothing_written(lambda: stub.Describe(pb.DescribeRequest(name=""), timeout=10),
                                            redis_sync, "name")

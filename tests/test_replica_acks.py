"""Writes acknowledged by replicas (--redis-replica-acks N, store/replica_acks.py): a
state change is answered only once N replicas have it, with one WAIT per pipelined
batch; when the replicas do not confirm in time the call fails UNAVAILABLE /
REPLICATION_TIMEOUT, and a grant that could not be confirmed is let go. Real
processes: a primary and one replica; the replica is paused (SIGSTOP) to withhold
its acknowledgements."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading

import grpc
import pytest
from google.protobuf import duration_pb2

from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc
from support import RedisServer, ServerProcess, backend_binary, error_info, wait_until

TIMEOUT_MS = 150
SLOW = 0.08  # seconds the replica stops answering in the batching test: under TIMEOUT_MS


@pytest.fixture
def pair(backend, tmp_path):
    primary = RedisServer(backend_binary(backend), tmp_path / "primary").start()
    replica = RedisServer(backend_binary(backend), tmp_path / "replica",
                          extra_args=["--replicaof", "127.0.0.1", str(primary.port)]).start()
    wait_until(lambda: primary.client().info("replication")["connected_slaves"] == 1, timeout=20,
               message="the replica to connect")
    wait_until(lambda: primary.client().execute_command("WAIT", 1, 100) == 1, timeout=30,
               message="the replica to have synced and acknowledge writes")
    yield primary, replica
    if replica.proc is not None and replica.proc.poll() is None:
        os.kill(replica.proc.pid, signal.SIGCONT)
    replica.stop()
    primary.stop()


def _server(primary, tmp_path, *extra: str) -> ServerProcess:
    return ServerProcess("--redis-url", primary.url, "--redis-replica-acks", "1", "--redis-replica-ack-timeout",
                         f"{TIMEOUT_MS}ms", "--log-level", "INFO", *extra).start(tmp_path / "server.log")


@pytest.fixture
def paused():
    """paused(replica) stops it (SIGSTOP) until the test ends or resume() is called."""
    stopped = []

    def pause(node):
        os.kill(node.proc.pid, signal.SIGSTOP)
        stopped.append(node)

    def resume():
        while stopped:
            os.kill(stopped.pop().proc.pid, signal.SIGCONT)

    pause.resume = resume
    yield pause
    resume()


@contextlib.contextmanager
def _stubs(primary, tmp_path):
    """A server with --redis-replica-acks 1 on ``primary``: its queue and lock stubs."""
    server = _server(primary, tmp_path)
    try:
        with grpc.insecure_channel(server.target) as ch:
            yield queue_pb2_grpc.QueueServiceStub(ch), lock_pb2_grpc.LockServiceStub(ch)
    finally:
        server.stop()
    assert "Traceback" not in server.log_text()


def test_an_acknowledged_change_is_on_the_replica_when_it_is_answered(pair, tmp_path, name):
    primary, replica = pair
    with _stubs(primary, tmp_path) as (queues, locks), replica.client() as r:
        for i in range(20):  # read at once, no waiting: WAIT put it there before the answer
            queues.Enqueue(pb.EnqueueRequest(queue=f"{name}-q{i}", tasks=[pb.NewTask(type="t")]), timeout=10)
            assert r.keys(f"*{name}-q{i}*"), f"queue {name}-q{i} enqueued but not on the replica"
            grant = locks.Acquire(lock_pb2.AcquireRequest(name=f"{name}-{i}", ttl=_ttl(30)), timeout=10)
            assert grant.acquired
            assert r.keys(f"*{name}-{i}*"), f"lock {name}-{i} granted but not on the replica"


def _ttl(seconds: int) -> duration_pb2.Duration:
    return duration_pb2.Duration(seconds=seconds)


def test_without_the_replicas_confirmation_a_change_fails_replication_timeout_and_a_grant_is_let_go(
        pair, tmp_path, name, paused):
    primary, replica = pair
    with _stubs(primary, tmp_path) as (queues, locks):
        paused(replica)
        with pytest.raises(grpc.RpcError) as err:
            queues.Enqueue(pb.EnqueueRequest(queue=name, tasks=[pb.NewTask(type="t")]), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(err.value).reason == "REPLICATION_TIMEOUT", err.value.details()
        with pytest.raises(grpc.RpcError) as err:
            locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=_ttl(600), owner="first"), timeout=10)
        assert error_info(err.value).reason == "REPLICATION_TIMEOUT", err.value.details()
        paused.resume()
        # The grant nobody was told of is let go: another owner gets the lock long before its 600 s TTL.
        wait_until(lambda: locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=_ttl(30), owner="second"),
                                         timeout=10).acquired, timeout=10,
                   message="the unconfirmed grant to be let go")


def test_a_grant_handed_to_a_waiter_is_given_only_once_the_replicas_have_it(pair, tmp_path, name, paused):
    """A release hands the lock to the waiter parked behind it: the grant is written by
    the release's script, not by the waiter's, so the waiter's own WAITs do not cover
    it. It is given only once the replicas confirm it; here they cannot, so the waiter
    hears UNAVAILABLE / REPLICATION_TIMEOUT and the grant is let go (before, the
    waiter was told it held a lock a failover could lose)."""
    primary, replica = pair
    with _stubs(primary, tmp_path) as (_, locks):
        holder = locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=_ttl(600), owner="holder"), timeout=10)
        assert holder.acquired
        outcome: list[object] = []

        def wait_for_it() -> None:
            try:
                outcome.append(locks.Acquire(lock_pb2.AcquireRequest(
                    name=name, ttl=_ttl(600), owner="waiter", wait_timeout=_ttl(20)), timeout=30))
            except grpc.RpcError as exc:
                outcome.append(exc)

        waiter = threading.Thread(target=wait_for_it)
        waiter.start()
        wait_until(lambda: locks.Describe(lock_pb2.DescribeRequest(name=name), timeout=10).waiters == 1,
                   message="the waiter to queue")
        paused(replica)
        with pytest.raises(grpc.RpcError) as err:
            locks.Release(lock_pb2.ReleaseRequest(name=name, lease=holder.lease), timeout=10)
        assert error_info(err.value).reason == "REPLICATION_TIMEOUT", err.value.details()
        waiter.join(30)
        assert outcome and isinstance(outcome[0], grpc.RpcError), f"the waiter was given {outcome}"
        assert outcome[0].code() == grpc.StatusCode.UNAVAILABLE
        assert error_info(outcome[0]).reason == "REPLICATION_TIMEOUT", outcome[0].details()
        paused.resume()
        wait_until(lambda: locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=_ttl(30), owner="third"),
                                         timeout=10).acquired, timeout=10,
                   message="the unconfirmed handoff to be let go")


async def test_one_wait_covers_the_changes_sent_while_the_last_was_out(pair, tmp_path, name, paused):
    """The replica is slow for a moment (paused SLOW seconds, under the ack timeout):
    the first WAIT is out meanwhile, every other change queues behind it, and the next
    WAIT covers them all, so 60 concurrent grants cost a handful of WAITs."""
    primary, replica = pair
    server = _server(primary, tmp_path)
    try:
        async with grpc.aio.insecure_channel(server.target) as ch:
            locks = lock_pb2_grpc.LockServiceStub(ch)
            await locks.Describe(lock_pb2.DescribeRequest(name=name), timeout=10)
            before = primary.client().info("commandstats").get("cmdstat_wait", {}).get("calls", 0)
            calls = 60
            paused(replica)
            threading.Timer(SLOW, paused.resume).start()
            grants = await asyncio.gather(*(locks.Acquire(lock_pb2.AcquireRequest(name=f"{name}-{i}", ttl=_ttl(30)),
                                                          timeout=10) for i in range(calls)))
            assert all(g.acquired for g in grants)
            waits = primary.client().info("commandstats").get("cmdstat_wait", {}).get("calls", 0) - before
            assert 1 <= waits <= 6, f"{waits} WAITs for {calls} concurrent grants"
    finally:
        server.stop()


def test_aof_acks_use_waitaof(backend, pair, tmp_path, name):
    primary, _ = pair
    version = primary.client().info("server").get("valkey_version") or primary.client().info("server")["redis_version"]
    if tuple(int(x) for x in version.split(".")[:2]) < (7, 2):
        pytest.skip(f"WAITAOF needs 7.2 or later ({backend} {version})")
    wait_until(lambda: primary.client().execute_command("WAITAOF", 1, 1, 100) == [1, 1], timeout=30,
               message="the replica's append-only file to be fsynced (its rewrite after the sync done)")
    server = _server(primary, tmp_path, "--redis-aof-acks")
    try:
        with grpc.insecure_channel(server.target) as ch:
            queue_pb2_grpc.QueueServiceStub(ch).Enqueue(pb.EnqueueRequest(queue=name, tasks=[pb.NewTask(type="t")]),
                                                        timeout=10)
        assert primary.client().info("commandstats").get("cmdstat_waitaof", {}).get("calls", 0) >= 1
    finally:
        server.stop()

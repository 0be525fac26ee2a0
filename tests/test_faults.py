"""Faults: Redis restarting, clients and servers dying, shutdown. Nothing promised is lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import concord
from support import ServerProcess, wait_until

HOLDER_SCRIPT = """
import sys, grpc
from google.protobuf.duration_pb2 import Duration
from concord.lock.v1 import lock_pb2 as pb, lock_pb2_grpc
stub = lock_pb2_grpc.LockServiceStub(grpc.insecure_channel(sys.argv[1]))
print("started", flush=True)
for ev in stub.Hold(pb.HoldRequest(name=sys.argv[2], ttl=Duration(seconds=60), wait_timeout=Duration(seconds=60))):
    print(pb.HoldEvent.Name(ev.event), ev.fencing_token, flush=True)
"""


def spawn_holder(target: str, name: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER_SCRIPT, target, name], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "started"
    return proc


def test_redis_restart_during_acquires(fresh_redis, tmp_path, name):
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target, timeout=5) as client:
            lease = client.lock(name, ttl=60).acquire()
            waited: list[concord.Lease | None] = []
            waiter = threading.Thread(target=lambda: waited.append(client.lock(name, ttl=60).acquire(timeout=60)))
            waiter.start()
            wait_until(lambda: client.lock(name).describe().waiters == 1, message="waiter queued")

            fresh_redis.stop()
            with pytest.raises(concord.Unavailable):
                client.lock(f"{name}:other", ttl=5).acquire()
            fresh_redis.start()  # same port, same append-only file

            # The same server process serves again by itself.
            wait_until(lambda: _acquires(client, f"{name}:after"), message="service back after Redis restart")
            info = client.lock(name).describe()
            assert info.held and info.fencing_token == lease.fencing_token
            lease.release()
            waiter.join(30)
            assert waited and waited[0] is not None and waited[0].fencing_token > lease.fencing_token
    finally:
        server.stop()


def _acquires(client: concord.Client, name: str) -> bool:
    try:
        return client.lock(name, ttl=5).acquire() is not None
    except concord.Unavailable:
        return False


def test_killed_client_frees_its_hold_at_once_and_its_wait_leaves_the_queue(concord_server, client, name):
    holder = spawn_holder(concord_server.target, name)
    waiter = None
    try:
        assert holder.stdout.readline().startswith("HOLD_EVENT_ACQUIRED")
        waiter = spawn_holder(concord_server.target, name)
        wait_until(lambda: client.lock(name).describe().waiters == 1, message="second client queued")
        waiter.kill()
        wait_until(lambda: client.lock(name).describe().waiters == 0, timeout=5, message="dead waiter gone")
        holder.kill()
        # TTL is 60 s: freed within seconds means freed by the disconnect, not by expiry.
        wait_until(lambda: not client.lock(name).describe().held, timeout=5, message="lock freed on disconnect")
    finally:
        for p in (holder, waiter):
            if p is not None:
                p.kill()
                p.wait()


def test_lock_survives_a_restart_on_the_embedded_valkey(tmp_path, name):
    data = tmp_path / "data"
    server = ServerProcess("--data-dir", str(data)).start(tmp_path / "server.log")
    with concord.Client(server.target) as client:
        lease = client.lock(name, ttl=60, owner="before-restart").acquire()
    assert server.stop() == 0
    assert not _valkey_running(data), "embedded Valkey must stop with the server"

    server = ServerProcess("--data-dir", str(data), port=server.port).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as client:
            info = client.lock(name).describe()
            assert info.held and info.owner == "before-restart" and info.fencing_token == lease.fencing_token
            client.lock(name).release(lease)
    finally:
        server.stop()


def test_embedded_valkey_dies_with_a_killed_server(tmp_path):
    data = tmp_path / "data"
    server = ServerProcess("--data-dir", str(data)).start(tmp_path / "server.log")
    assert _valkey_running(data)
    server.kill()
    wait_until(lambda: not _valkey_running(data), message="embedded Valkey to exit")


def _valkey_running(data_dir) -> bool:
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if any("valkey-server" in c or "redis-server" in c for c in cmd[:1]) and str(data_dir.resolve()) in " ".join(cmd):
            return True
    return False


def test_graceful_shutdown_drains(redis_server, tmp_path, name):
    server = ServerProcess("--redis-url", redis_server.url, "--shutdown-grace", "2").start(tmp_path / "server.log")
    holder = spawn_holder(server.target, name)
    try:
        assert holder.stdout.readline().startswith("HOLD_EVENT_ACQUIRED")
        with grpc.insecure_channel(server.target) as ch, concord.Client(server.target) as client:
            health = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest())
            assert next(health).status == health_pb2.HealthCheckResponse.SERVING
            blocked: list[BaseException] = []

            def wait_for_lock() -> None:
                try:
                    client.lock(name, ttl=5).acquire(timeout=60)
                except concord.ConcordError as exc:
                    blocked.append(exc)

            t = threading.Thread(target=wait_for_lock)
            t.start()
            wait_until(lambda: client.lock(name).describe().waiters == 1, message="waiter queued")
            server.signal(signal.SIGTERM)
            assert next(health).status == health_pb2.HealthCheckResponse.NOT_SERVING
            t.join(10)
            assert blocked and isinstance(blocked[0], concord.Unavailable), blocked
        assert server.proc.wait(15) == 0
        holder.wait(10)  # its stream was closed by the server
    finally:
        holder.kill()
        holder.wait()
    # The Hold stream's lock was released on the way out, not left to its 60 s TTL.
    other = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "server2.log")
    try:
        with concord.Client(other.target) as client:
            assert not client.lock(name).describe().held
    finally:
        other.stop()


def test_waiters_of_a_killed_server_stop_delaying_others(concord_server, redis_server, client, tmp_path, name):
    doomed = ServerProcess("--redis-url", redis_server.url).start(tmp_path / "doomed.log")
    lease = client.lock(name, ttl=60).acquire()
    ghost = spawn_holder(doomed.target, name)  # queued first, through the doomed server
    try:
        wait_until(lambda: client.lock(name).describe().waiters == 1, message="ghost queued")
        got: list[concord.Lease | None] = []
        t = threading.Thread(target=lambda: got.append(client.lock(name, ttl=60).acquire(timeout=60)))
        t.start()
        wait_until(lambda: client.lock(name).describe().waiters == 2, message="live waiter queued")
        doomed.kill()
        wait_until(lambda: client.lock(name).describe().waiters == 1, timeout=15, message="dead server's waiter skipped")
        lease.release()
        t.join(30)
        assert got and got[0] is not None
    finally:
        ghost.kill()
        ghost.wait()


SEMAPHORE_HOLDER_SCRIPT = """
import sys, grpc
from google.protobuf.duration_pb2 import Duration
from concord.semaphore.v1 import semaphore_pb2 as pb, semaphore_pb2_grpc
stub = semaphore_pb2_grpc.SemaphoreServiceStub(grpc.insecure_channel(sys.argv[1]))
print("started", flush=True)
for ev in stub.Hold(pb.HoldRequest(name=sys.argv[2], limit=2, permits=2, ttl=Duration(seconds=60),
                                   wait_timeout=Duration(seconds=60))):
    print(pb.HoldEvent.Name(ev.event), flush=True)
"""


def test_killed_client_frees_its_semaphore_hold_at_once(concord_server, client, name):
    proc = subprocess.Popen([sys.executable, "-c", SEMAPHORE_HOLDER_SCRIPT, concord_server.target, name],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        assert proc.stdout.readline().startswith("HOLD_EVENT_ACQUIRED")
        assert client.semaphore(name, limit=2).describe().held == 2
        proc.kill()
        # TTL is 60 s: freed within seconds means freed by the disconnect.
        wait_until(lambda: client.semaphore(name, limit=2).describe().held == 0, timeout=5,
                   message="permits freed on disconnect")
    finally:
        proc.kill()
        proc.wait()


def test_semaphore_survives_a_redis_restart(fresh_redis, tmp_path, name):
    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target, timeout=5) as client:
            permit = client.semaphore(name, limit=1, ttl=60).acquire()
            got: list = []
            waiter = threading.Thread(target=lambda: got.append(client.semaphore(name, limit=1).acquire(timeout=60)))
            waiter.start()
            wait_until(lambda: client.semaphore(name, limit=1).describe().waiters == 1, message="waiter queued")
            fresh_redis.stop()
            with pytest.raises(concord.Unavailable):
                client.semaphore(f"{name}:other", limit=1).acquire()
            fresh_redis.start()
            wait_until(lambda: _sem_acquires(client, f"{name}:after"), message="service back after Redis restart")
            assert [h.permit_id for h in client.semaphore(name, limit=1).describe().holders] == [permit.permit_id]
            permit.release()
            waiter.join(30)
            assert got and got[0] is not None
    finally:
        server.stop()


def _sem_acquires(client: concord.Client, name: str) -> bool:
    try:
        return client.semaphore(name, limit=1, ttl=5).acquire() is not None
    except concord.Unavailable:
        return False


def test_a_call_whose_redis_hangs_answers_unavailable_before_its_deadline(fresh_redis, tmp_path, name):
    """Redis paused (SIGSTOP): the link would fail what it owes only after its 5 s
    reply timeout, but a call given 1 s answers UNAVAILABLE within that second, not
    DEADLINE_EXCEEDED with no word from the server (the Sentinel campaign saw a
    retried refresh run into its deadline this way). A call with time to spare still
    waits for Redis and succeeds once it answers."""
    import os
    import time

    from concord.lock.v1 import lock_pb2, lock_pb2_grpc

    from support import error_info

    server = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    try:
        with grpc.insecure_channel(server.target) as channel:
            locks = lock_pb2_grpc.LockServiceStub(channel)
            locks.Describe(lock_pb2.DescribeRequest(name=name), timeout=10)
            os.kill(fresh_redis.proc.pid, signal.SIGSTOP)
            try:
                started = time.monotonic()
                with pytest.raises(grpc.RpcError) as err:
                    locks.Describe(lock_pb2.DescribeRequest(name=name), timeout=1.0)
                took = time.monotonic() - started
                assert err.value.code() == grpc.StatusCode.UNAVAILABLE, err.value
                assert error_info(err.value).reason == "REDIS_UNAVAILABLE", err.value.details()
                assert took < 1.0
                later = locks.Describe.future(lock_pb2.DescribeRequest(name=name), timeout=20)
            finally:
                os.kill(fresh_redis.proc.pid, signal.SIGCONT)
            assert not later.result().held
    finally:
        server.stop()
    assert "Traceback" not in server.log_text()

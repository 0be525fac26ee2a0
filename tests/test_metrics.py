"""--metrics-listen: a live server's /metrics, scraped over HTTP, after real calls."""

from __future__ import annotations

import threading
import urllib.request
import uuid
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import duration_pb2
from prometheus_client.parser import text_string_to_metric_families

import concord
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.queue.v1 import queue_pb2, queue_pb2_grpc
from concord.semaphore.v1 import semaphore_pb2, semaphore_pb2_grpc
from concord_server.store.embedded_valkey import free_port
from support import ServerProcess, wait_until

LOCK = "concord.lock.v1.LockService"


def seconds(s: float) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromMilliseconds(int(s * 1000))
    return d


class Scraper:
    def __init__(self, port: int) -> None:
        self.url = f"http://127.0.0.1:{port}/metrics"

    def samples(self) -> list:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            assert r.status == 200
            text = r.read().decode()
        return [s for family in text_string_to_metric_families(text) for s in family.samples]

    def value(self, name: str, **labels: str) -> float:
        """The sum of the samples called name whose labels include these (0 if none)."""
        return sum(s.value for s in self.samples()
                   if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()))


def metered_server(redis_url: str, log_dir) -> tuple[ServerProcess, Scraper]:
    port = free_port()
    server = ServerProcess("--redis-url", redis_url, "--metrics-listen", f"127.0.0.1:{port}",
                           "--log-level", "WARNING").start(log_dir / "server.log")
    return server, Scraper(port)


@pytest.fixture(scope="module")
def metered(redis_server, tmp_path_factory) -> Iterator[tuple[ServerProcess, Scraper]]:
    server, scraper = metered_server(redis_server.url, tmp_path_factory.mktemp("metrics"))
    yield server, scraper
    assert server.stop() == 0, server.log_text()


@pytest.fixture
def channel(metered) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(metered[0].target) as ch:
        yield ch


def test_rpc_counts_and_latency_by_method_and_code(metered, channel, name):
    _, m = metered
    stub = lock_pb2_grpc.LockServiceStub(channel)
    ok_before = m.value("concord_rpc_handled_total", service=LOCK, method="Acquire", code="OK")
    bad_before = m.value("concord_rpc_handled_total", service=LOCK, method="Acquire", code="INVALID_ARGUMENT")
    gone_before = m.value("concord_rpc_handled_total", service=LOCK, method="Release", code="FAILED_PRECONDITION")

    got = stub.Acquire(lock_pb2.AcquireRequest(name=name, ttl=seconds(30)))
    assert got.acquired
    with pytest.raises(grpc.RpcError) as bad:
        stub.Acquire(lock_pb2.AcquireRequest(name="", ttl=seconds(30)))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    stub.Release(lock_pb2.ReleaseRequest(name=name, lease=got.lease))
    with pytest.raises(grpc.RpcError) as gone:
        stub.Release(lock_pb2.ReleaseRequest(name=name, lease=got.lease))
    assert gone.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    assert m.value("concord_rpc_handled_total", service=LOCK, method="Acquire", code="OK") == ok_before + 1
    assert m.value("concord_rpc_handled_total", service=LOCK, method="Acquire",
                   code="INVALID_ARGUMENT") == bad_before + 1
    assert m.value("concord_rpc_handled_total", service=LOCK, method="Release",
                   code="FAILED_PRECONDITION") == gone_before + 1
    # Acquire may block, so it is typed apart from plain unary calls.
    assert m.value("concord_rpc_duration_seconds_count", service=LOCK, method="Acquire", type="blocking",
                   code="OK") == ok_before + 1
    assert m.value("concord_rpc_duration_seconds_count", service=LOCK, method="Release", type="unary") >= 2
    assert m.value("concord_rpc_duration_seconds_bucket", service=LOCK, method="Acquire", code="OK",
                   le="+Inf") == ok_before + 1


def test_waiter_gauge_and_lock_handoff(metered, channel, name):
    _, m = metered
    stub = lock_pb2_grpc.LockServiceStub(channel)
    handoffs = m.value("concord_handoff_seconds_count", primitive="lock")
    first = stub.Acquire(lock_pb2.AcquireRequest(name=name, ttl=seconds(60)))
    assert first.acquired
    result: list = []
    waiter = threading.Thread(target=lambda: result.append(
        stub.Acquire(lock_pb2.AcquireRequest(name=name, ttl=seconds(60), wait_timeout=seconds(60)), timeout=60)))
    waiter.start()
    try:
        wait_until(lambda: m.value("concord_blocked_waiters", kind="lock_semaphore") >= 1,
                   message="the blocked Acquire in the gauge")
        assert m.value("concord_wait_channels", kind="lock_semaphore") >= 1
    finally:
        stub.Release(lock_pb2.ReleaseRequest(name=name, lease=first.lease))
        waiter.join(60)
    assert result and result[0].acquired
    wait_until(lambda: m.value("concord_blocked_waiters", kind="lock_semaphore") == 0,
               message="the waiter gauge to fall")
    assert m.value("concord_handoff_seconds_count", primitive="lock") == handoffs + 1
    stub.Release(lock_pb2.ReleaseRequest(name=name, lease=result[0].lease))


def test_semaphore_handoff(metered, channel, name):
    _, m = metered
    stub = semaphore_pb2_grpc.SemaphoreServiceStub(channel)
    handoffs = m.value("concord_handoff_seconds_count", primitive="semaphore")
    req = dict(name=name, limit=1, permits=1, ttl=seconds(60))
    first = stub.Acquire(semaphore_pb2.AcquireRequest(**req))
    assert first.acquired
    pending = stub.Acquire.future(semaphore_pb2.AcquireRequest(**req, wait_timeout=seconds(60)), timeout=60)
    wait_until(lambda: m.value("concord_blocked_waiters", kind="lock_semaphore") >= 1, message="queued Acquire")
    stub.Release(semaphore_pb2.ReleaseRequest(name=name, permit_id=first.permit_id))
    assert pending.result().acquired
    assert m.value("concord_handoff_seconds_count", primitive="semaphore") == handoffs + 1
    stub.Release(semaphore_pb2.ReleaseRequest(name=name, permit_id=pending.result().permit_id))


def test_open_streams_and_cancelled_stream_code(metered, channel, name):
    _, m = metered
    stub = lock_pb2_grpc.LockServiceStub(channel)
    cancelled = m.value("concord_rpc_handled_total", service=LOCK, method="Hold", code="CANCELLED")
    hold = stub.Hold(lock_pb2.HoldRequest(name=name, ttl=seconds(30)))
    next(hold)  # acquired
    wait_until(lambda: m.value("concord_streams_open", service=LOCK, method="Hold") >= 1, message="open stream")
    assert m.value("concord_rpc_in_flight", service=LOCK, method="Hold", type="server_stream") >= 1
    hold.cancel()
    wait_until(lambda: m.value("concord_rpc_handled_total", service=LOCK, method="Hold",
                               code="CANCELLED") == cancelled + 1, message="the cancelled Hold counted")
    assert m.value("concord_streams_open", service=LOCK, method="Hold") == 0


def test_queue_depth_gauge(metered, channel):
    _, m = metered
    stub = queue_pb2_grpc.QueueServiceStub(channel)
    queue = f"q-{uuid.uuid4().hex[:8]}"
    stub.Enqueue(queue_pb2.EnqueueRequest(queue=queue, tasks=[queue_pb2.NewTask(type="t") for _ in range(3)]))
    stub.Enqueue(queue_pb2.EnqueueRequest(queue=queue, tasks=[queue_pb2.NewTask(type="t", delay=seconds(600))]))
    assert m.value("concord_queue_tasks", queue=queue, state="ready") == 3
    assert m.value("concord_queue_tasks", queue=queue, state="delayed") == 1
    got = stub.Dequeue(queue_pb2.DequeueRequest(queues=[queue], max_tasks=2))
    assert len(got.tasks) == 2
    assert m.value("concord_queue_tasks", queue=queue, state="ready") == 1
    assert m.value("concord_queue_tasks", queue=queue, state="leased") == 2
    # A rejected name is never tracked.
    with pytest.raises(grpc.RpcError):
        stub.Stats(queue_pb2.StatsRequest(queue="bad\x00name"))
    assert not any(s.labels.get("queue") == "bad\x00name" for s in m.samples())


def test_redis_errors_counted(fresh_redis, tmp_path):
    server, m = metered_server(fresh_redis.url, tmp_path)
    try:
        before = m.value("concord_redis_errors_total", where="command")
        fresh_redis.kill()
        with grpc.insecure_channel(server.target) as ch:
            stub = lock_pb2_grpc.LockServiceStub(ch)
            with pytest.raises(grpc.RpcError) as err:
                stub.Acquire(lock_pb2.AcquireRequest(name="x", ttl=seconds(10)), timeout=30)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert m.value("concord_redis_errors_total", where="command") > before
        assert m.value("concord_rpc_handled_total", service=LOCK, method="Acquire", code="UNAVAILABLE") == 1
    finally:
        server.stop()


def test_queue_depths_are_per_tenant(redis_server, tmp_path):
    """With --auth-tokens the same queue name is two queues, one per tenant, and the
    gauge reads each in its tenant's key space."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('[[tokens]]\ntoken = "red-token-0123456789abcdef"\ntenant = "red"\n\n'
                      '[[tokens]]\ntoken = "blue-token-0123456789abcdef"\ntenant = "blue"\n')
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--metrics-listen", f"127.0.0.1:{port}",
                           "--auth-tokens", str(tokens), "--key-prefix", "metrictenants").start(tmp_path / "server.log")
    m, queue = Scraper(port), f"q-{uuid.uuid4().hex[:8]}"
    try:
        for token, n in (("red-token-0123456789abcdef", 2), ("blue-token-0123456789abcdef", 5)):
            with concord.Client(server.target, token=token) as c:
                c.queue(queue).put_many([concord.NewTask("t")] * n)
        assert m.value("concord_queue_tasks", tenant="red", queue=queue, state="ready") == 2
        assert m.value("concord_queue_tasks", tenant="blue", queue=queue, state="ready") == 5
    finally:
        assert server.stop() == 0, server.log_text()

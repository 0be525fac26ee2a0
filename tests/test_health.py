"""Health tells the truth: NOT_SERVING while the server cannot reach Redis (killed or
paused), SERVING again by itself once it can; the Docker HEALTHCHECK command follows
it; the embedded Valkey is restarted on its data when it dies; and health and
reflection answer a request that does not parse with INVALID_ARGUMENT."""

from __future__ import annotations

import os
import signal

import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import concord
from concord_server import healthcheck
from concord_server.app import SERVICE_NAMES
from support import ServerProcess, error_info, wait_until

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
ALL = ("", *SERVICE_NAMES)
OUTAGE_SEEN = 5.0  # seconds: the watcher checks every 0.5 s, each PING bounded by 1 s


def statuses(server: ServerProcess) -> set:
    return {server.health(service) for service in ALL}


def all_are(server: ServerProcess, status) -> bool:
    return statuses(server) == {status}


@pytest.fixture
def server(fresh_redis, tmp_path):
    s = ServerProcess("--redis-url", fresh_redis.url).start(tmp_path / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_health_is_not_serving_while_redis_is_down_and_serving_again_when_it_is_back(server, fresh_redis):
    assert all_are(server, SERVING)
    assert healthcheck.main([server.target], env={}) == 0
    with grpc.insecure_channel(server.target) as ch:
        watch = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(), timeout=60)
        assert next(watch).status == SERVING
        fresh_redis.kill()
        wait_until(lambda: all_are(server, NOT_SERVING), timeout=OUTAGE_SEEN, message="NOT_SERVING everywhere")
        assert next(watch).status == NOT_SERVING
        assert healthcheck.main([server.target], env={}) == 1  # the Docker HEALTHCHECK command
        fresh_redis.start()  # same port, same data
        wait_until(lambda: all_are(server, SERVING), timeout=OUTAGE_SEEN, message="SERVING again")
        assert next(watch).status == SERVING
        watch.cancel()
    assert healthcheck.main([server.target], env={}) == 0
    log = server.log_text()
    assert log.count("health NOT_SERVING") == 1 and log.count("Redis reachable again") == 1, log


def test_health_is_not_serving_while_redis_is_paused(server, fresh_redis):
    assert all_are(server, SERVING)
    fresh_redis.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: all_are(server, NOT_SERVING), timeout=OUTAGE_SEEN, message="NOT_SERVING while paused")
    finally:
        fresh_redis.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: all_are(server, SERVING), timeout=OUTAGE_SEEN, message="SERVING after SIGCONT")
    with concord.Client(server.target) as client:  # and it serves calls again
        wait_until(lambda: client.lock("health:after-pause", ttl=5).acquire(timeout=1), timeout=OUTAGE_SEEN,
                   message="a lock after the pause")


def _embedded_valkey(server: ServerProcess, data_dir) -> psutil.Process | None:
    """The Valkey process the server started on data_dir (found by parentage, never by name)."""
    for child in psutil.Process(server.proc.pid).children():
        try:
            if str(data_dir.resolve()) in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_a_killed_embedded_valkey_is_restarted_on_its_data(tmp_path, name):
    data = tmp_path / "data"
    server = ServerProcess("--data-dir", str(data)).start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as client:
            lease = client.lock(name, ttl=300).acquire()
            task_id = client.queue(name).put("task", "payload")
            first = _embedded_valkey(server, data)
            assert first is not None, server.log_text()
            os.kill(first.pid, signal.SIGKILL)
            wait_until(lambda: "embedded Valkey restarted" in server.log_text(), timeout=30,
                       message="the restart in the server log")
            assert "embedded Valkey exited (code -9); restarting" in server.log_text()
            wait_until(lambda: all_are(server, SERVING), timeout=OUTAGE_SEEN, message="SERVING after the restart")
            second = _embedded_valkey(server, data)
            assert second is not None and second.pid != first.pid
            # What was written before the kill is still there.
            held = wait_until(lambda: client.lock(name).describe(), timeout=OUTAGE_SEEN)
            assert held.held and held.fencing_token == lease.fencing_token
            [task] = client.queue(name).get(timeout=5)
            assert (task.task_id, task.payload) == (task_id, b"payload")
    finally:
        assert server.stop() == 0, server.log_text()
    # Supervision ended with the server: the restarted Valkey stopped, and was not started again.
    wait_until(lambda: not second.is_running(), message="the restarted Valkey to stop with the server")
    assert server.log_text().count("restarting") == 1, server.log_text()


UNDECODABLE = b"\xff\xff\xff"  # a truncated field tag: no message parses from it


def _assert_invalid_argument(err: pytest.ExceptionInfo) -> None:
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (err.value.code(), err.value.details())
    info = error_info(err.value)
    assert (info.reason, info.domain) == ("INVALID_ARGUMENT", "concord")
    assert "could not be parsed" in err.value.details()


@pytest.mark.parametrize("method", ["Check", "Watch"])
def test_health_rejects_a_request_that_does_not_parse(concord_server, method):
    with grpc.insecure_channel(concord_server.target) as ch:
        call = (ch.unary_stream if method == "Watch" else ch.unary_unary)(f"/grpc.health.v1.Health/{method}")
        with pytest.raises(grpc.RpcError) as err:
            result = call(UNDECODABLE, timeout=10)
            list(result) if method == "Watch" else result
    _assert_invalid_argument(err)
    assert concord_server.health() == SERVING


def test_reflection_rejects_a_request_that_does_not_parse(concord_server):
    from grpc_reflection.v1alpha import reflection_pb2

    good = reflection_pb2.ServerReflectionRequest(list_services="").SerializeToString()
    with grpc.insecure_channel(concord_server.target) as ch:
        call = ch.stream_stream("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo")
        replies = call(iter([good, UNDECODABLE]), timeout=10)
        first = reflection_pb2.ServerReflectionResponse.FromString(next(replies))
        assert first.list_services_response.service  # the good request before it was answered
        with pytest.raises(grpc.RpcError) as err:
            list(replies)
        _assert_invalid_argument(err)
        with pytest.raises(grpc.RpcError) as err:
            list(call(iter([UNDECODABLE]), timeout=10))
        _assert_invalid_argument(err)

"""The server as a process: settings, health, reflection, workers."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import grpc
import psutil
import pytest
from grpc_health.v1 import health_pb2
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import concord
from concord_server import config
from support import ServerProcess


def test_help_documents_every_setting_and_its_environment_variable():
    out = subprocess.run([sys.executable, "-m", "concord_server", "--help"], capture_output=True, text=True, check=True).stdout
    for f in dataclasses.fields(config.Settings):
        assert "--" + f.name.replace("_", "-") in out
        assert config.env_name(f) in out
    for flag in ("--listen", "--redis-url", "--key-prefix", "--data-dir", "--workers", "--log-level", "--max-message-size"):
        assert flag in out


def test_flags_beat_environment_beat_defaults():
    env = {"CONCORD_LISTEN": "0.0.0.0:1", "CONCORD_WORKERS": "3", "CONCORD_KEY_PREFIX": "envp"}
    s = config.load(["--listen", "127.0.0.1:2"], env)
    assert (s.listen, s.workers, s.key_prefix, s.log_level) == ("127.0.0.1:2", 3, "envp", "INFO")
    assert config.load([], {}).listen == "127.0.0.1:50051"


@pytest.mark.parametrize("argv", [["--workers", "0"], ["--workers", "x"], ["--key-prefix", "a{b}"], ["--log-level", "LOUD"]])
def test_bad_settings_exit_with_a_message(argv):
    with pytest.raises(SystemExit) as exc:
        config.load(argv, {})
    assert exc.value.code == 2


def test_health_reports_every_service(concord_server):
    for service in ("", "concord.lock.v1.LockService", "concord.semaphore.v1.SemaphoreService"):
        assert concord_server.health(service) == health_pb2.HealthCheckResponse.SERVING


def test_reflection_lists_and_describes_services(concord_server):
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = reflection_pb2_grpc.ServerReflectionStub(ch)
        [listing] = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))
        names = {s.name for s in listing.list_services_response.service}
        assert {"concord.lock.v1.LockService", "concord.semaphore.v1.SemaphoreService", "grpc.health.v1.Health",
                "grpc.reflection.v1alpha.ServerReflection"} <= names
        [desc] = stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(
            file_containing_symbol="concord.lock.v1.LockService")]))
        assert desc.file_descriptor_response.file_descriptor_proto


def test_workers_share_one_port(redis_server, tmp_path, name):
    server = ServerProcess("--redis-url", redis_server.url, "--workers", "2").start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as client:
            lease = client.lock(name, ttl=10).acquire()
            # Many fresh connections land on both workers; all see one Redis.
            for _ in range(8):
                with concord.Client(server.target) as other:
                    assert other.lock(name).describe().fencing_token == lease.fencing_token
        pids = {p.pid for p in psutil.Process(server.proc.pid).children()}
        assert len(pids) >= 2
    finally:
        assert server.stop() == 0

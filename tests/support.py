"""Test helpers: real server processes and condition waits with deadlines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import pytest
import redis
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from concord_server.autopipeline import AutoPipeline
from concord_server.doorbells import Doorbells
from concord_server.embedded_valkey import free_port, valkey_binary
from concord_server.keys import KeySpace
from concord_server.notifications import NotificationBus
from concord_server.primitives.chat import Chats
from concord_server.primitives.chat_feeds import Feeds
from concord_server.primitives.lock import Locks
from concord_server.primitives.queue import Queues
from concord_server.primitives.semaphore import Semaphores
from concord_server.redis_client import connect
from concord_server.waiters import Waiters

BACKENDS = ["valkey", "redis"]
VALIDATION_PREFIX = "validation"  # the validation_server fixture's keys, so "nothing written" is exact


def wait_until(predicate, timeout: float = 10.0, interval: float = 0.01, message: str = "condition"):
    """Polls predicate until it returns a truthy value; fails the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def error_info(err: grpc.RpcError) -> error_details_pb2.ErrorInfo:
    """The google.rpc.ErrorInfo a failed call carries (there must be one)."""
    info = error_details_pb2.ErrorInfo()
    assert rpc_status.from_call(err).details[0].Unpack(info)
    return info


def prefixed_keys(redis_sync) -> set[str]:
    """The keys the validation_server fixture's server has written."""
    return {k for k in redis_sync.keys("*") if VALIDATION_PREFIX in k}


def assert_rejected_and_nothing_written(call, redis_sync, field: str) -> None:
    """call() (one RPC, streams drained) fails with INVALID_ARGUMENT naming ``field``,
    with ErrorInfo{INVALID_ARGUMENT, concord}, and writes no key of the validation server."""
    before = prefixed_keys(redis_sync)
    with pytest.raises(grpc.RpcError) as err:
        result = call()
        if hasattr(result, "__next__"):
            list(result)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    info = error_info(err.value)
    assert (info.reason, info.domain, info.metadata["field"]) == ("INVALID_ARGUMENT", "concord", field)
    assert field in err.value.details()
    assert prefixed_keys(redis_sync) <= before


def unless_unavailable(call, *args):
    """For wait_until across a Redis restart: call(*args), or None while UNAVAILABLE."""
    import concord

    try:
        return call(*args)
    except concord.Unavailable:
        return None


def renewed_past(handle, first_expiry, seconds: float) -> bool:
    """For wait_until: the handle's expiry moved ``seconds`` past first_expiry;
    fails at once if background renewal found the hold lost."""
    if handle.lost:
        pytest.fail(f"{handle!r} was lost during background renewal")
    return (handle.expires_at - first_expiry).total_seconds() > seconds


def backend_binary(backend: str) -> str | None:
    if backend == "valkey":
        return valkey_binary()
    return shutil.which("redis-server")


class RedisServer:
    """A Redis-protocol server process with its append-only file on, restartable in place."""

    def __init__(self, binary: str, data_dir: Path) -> None:
        self.binary = binary
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir),
             "--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no",
             "--logfile", str(self.data_dir / "server.log")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_timeout=1)

        def up() -> bool:
            assert self.proc is not None and self.proc.poll() is None, f"{self.binary} exited"
            try:
                return bool(client.ping())
            except (redis.ConnectionError, redis.BusyLoadingError):
                return False

        wait_until(up, message=f"{self.binary} on port {self.port}")
        client.close()
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, decode_responses=True)


class ServerProcess:
    """A concord-server subprocess, started the way users start it."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.target = f"127.0.0.1:{self.port}"
        self.args = ["--listen", self.target, *args]
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    def start(self, log_path: Path) -> ServerProcess:
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "concord_server", *self.args],
                                         stdout=log, stderr=subprocess.STDOUT, env=self.env)
        wait_until(lambda: self.health() == health_pb2.HealthCheckResponse.SERVING, timeout=30,
                   message=f"concord-server on {self.target} (log: {log_path})")
        return self

    def health(self, service: str = ""):
        assert self.proc is not None
        if self.proc.poll() is not None:
            pytest.fail(f"concord-server exited with {self.proc.returncode}; log: {self.log_text()}")
        with grpc.insecure_channel(self.target) as ch:
            try:
                return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=1).status
            except grpc.RpcError:
                return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path else ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 30) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()




@contextlib.asynccontextmanager
async def wired_primitive(kind, url: str, *, process_id: str = "test-proc", liveness_ms: int = 5000,
                          interval: float = 1.0, prefix: str | None = None):
    """A primitive (Locks, Semaphores) wired like the server wires it, without gRPC."""
    r = connect(url, 16)
    commands = AutoPipeline(r.connection_pool)
    bus = NotificationBus(r)
    primitive = kind(commands, KeySpace(prefix or f"t{uuid.uuid4().hex[:8]}"), Waiters(bus, interval=interval),
                     process_id=process_id, liveness_ms=liveness_ms)
    try:
        yield primitive
    finally:
        await primitive.drain(1.0)
        await bus.close()
        await commands.aclose()
        await r.aclose()


@contextlib.asynccontextmanager
async def _doorbell_wiring(url: str, *, broadcast: bool, interval: float, prefix: str | None):
    """(commands, keyspace, doorbells) wired like the server wires them; the caller
    drains its primitive before this closes them."""
    r = connect(url, 16)
    commands = AutoPipeline(r.connection_pool)
    bus = NotificationBus(r)
    doorbells = Doorbells(bus, interval=interval, broadcast=broadcast)
    try:
        yield commands, KeySpace(prefix or f"t{uuid.uuid4().hex[:8]}"), doorbells
    finally:
        doorbells.close()
        await doorbells.aclose()
        await bus.close()
        await commands.aclose()
        await r.aclose()


@contextlib.asynccontextmanager
async def queue_primitive(url: str, *, prefix: str | None = None, interval: float = 1.0, **kw):
    """A Queues primitive wired like the server wires it, without gRPC."""
    async with _doorbell_wiring(url, broadcast=False, interval=interval, prefix=prefix) as (commands, keys, bells):
        queues = Queues(commands, keys, bells, **kw)
        try:
            yield queues
        finally:
            bells.close()
            await queues.drain(1.0)


@contextlib.asynccontextmanager
async def chat_primitive(url: str, *, prefix: str | None = None, **kw):
    """(Chats, Feeds) wired like the server wires them, without gRPC."""
    async with _doorbell_wiring(url, broadcast=True, interval=10.0, prefix=prefix) as (commands, keys, bells):
        chats = Chats(commands, keys, **kw)
        feeds = Feeds(chats, keys, bells)
        try:
            yield chats, feeds
        finally:
            bells.close()
            await feeds.drain(1.0)


def lock_primitive(url: str, **kw):
    return wired_primitive(Locks, url, **kw)


def semaphore_primitive(url: str, **kw):
    return wired_primitive(Semaphores, url, **kw)


async def async_wait_until(predicate, timeout: float = 10.0, interval: float = 0.01, message: str = "condition"):
    """wait_until for coroutine predicates."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        if loop.time() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(interval)

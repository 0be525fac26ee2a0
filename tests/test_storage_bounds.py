"""Storage bounds: a Redis at its maxmemory refuses writes as RESOURCE_EXHAUSTED /
STORAGE_FULL (never INTERNAL or UNKNOWN), the embedded Valkey has such a bound with
the noeviction policy, and purging a queue leaves none of its keys."""

from __future__ import annotations

import grpc
import pytest
import redis

import concord
from concord_server.embedded_valkey import EmbeddedValkey
from support import RedisServer, ServerProcess, backend_binary


@pytest.fixture
def small_redis(backend, tmp_path):
    """A Redis of this test's own with 8 MiB of memory and no eviction."""
    server = RedisServer(backend_binary(backend), tmp_path / "redis",
                         extra_args=["--maxmemory", str(8 * 1024 * 1024), "--maxmemory-policy", "noeviction"]).start()
    yield server
    server.kill()


def test_a_full_redis_refuses_writes_as_storage_full_and_still_serves_reads_and_deletes(small_redis, tmp_path, name):
    server = ServerProcess("--redis-url", small_redis.url, "--log-level", "WARNING").start(tmp_path / "server.log")
    try:
        with concord.Client(server.target) as client:
            queue = client.queue(name)
            payload = b"x" * (64 * 1024)
            stored = 0
            with pytest.raises(concord.ConcordError) as err:
                for _ in range(1000):  # 64 MiB: far past the 8 MiB bound
                    queue.put("t", payload)
                    stored += 1
            assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
            assert err.value.reason == "STORAGE_FULL"
            assert 0 < stored < 1000
            assert queue.stats().ready == stored  # the refused put changed nothing; reads still answer
            assert queue.purge() == stored  # deleting is not refused, and makes room again
            queue.put("t", payload)
    finally:
        assert server.stop() == 0, server.log_text()
    assert "Traceback" not in server.log_text()


def test_the_embedded_valkey_is_bounded_and_never_evicts(tmp_path):
    valkey = EmbeddedValkey(tmp_path / "data", maxmemory=32 * 1024 * 1024)
    url = valkey.start(supervise=False)
    try:
        r = redis.Redis.from_url(url, decode_responses=True)
        assert r.config_get("maxmemory") == {"maxmemory": str(32 * 1024 * 1024)}
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        r.close()
    finally:
        valkey.stop()


def test_the_server_bounds_its_embedded_valkey_by_default():
    from concord_server import config

    assert config.load([]).embedded_maxmemory == 1024 ** 3

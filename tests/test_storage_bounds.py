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


def _queue_keys(redis_sync, name: str) -> list[str]:
    """Every key under the queue's hash tag (its tasks, dedupe keys, counters, events)
    but its task counter, which stays by design so that no task id is handed out twice."""
    tag = "{concord:queue:%s}" % name
    return sorted(k for k in redis_sync.scan_iter(match=tag + "*", count=1000) if k != tag + ":seq")


def test_purging_a_queue_with_dead_tasks_leaves_none_of_its_keys(client, redis_sync, name):
    """Every state a task can be in when no worker holds it, a dedupe key with a
    window, events: all gone after one Purge(include_dead), for each of many queues."""
    names = [f"{name}-{i}" for i in range(40)]
    for q in names:
        queue = client.queue(q)
        queue.put("ready", b"r" * 100, dedupe_key="once", dedupe_window=3600)
        queue.put("later", delay=3600)
        queue.put("dies", max_attempts=1)
        queue.put("done")
        for task in queue.get(3):
            if task.type == "dies":
                task.nack("no")
            else:
                task.ack()  # kept under the retention (succeeded)
        queue.put("cancelled", delay=3600)
        client.queue(q).cancel(queue.peek("delayed")[-1].task_id)
    assert _queue_keys(redis_sync, names[0])  # the test's premise: there is something to purge
    for q in names:
        client.queue(q).purge(include_dead=True)
    left = {q: _queue_keys(redis_sync, q) for q in names}
    assert {q: keys for q, keys in left.items() if keys} == {}
    assert sum(redis_sync.memory_usage("{concord:queue:%s}:seq" % q) for q in names) < 100 * len(names)


def test_a_purge_leaves_leased_tasks_and_the_queue_s_bookkeeping_with_them(client, redis_sync, name):
    queue = client.queue(name)
    queue.put("held")
    queue.put("ready")
    (task,) = queue.get()
    assert queue.purge(include_dead=True) == 1
    assert queue.stats().leased == 1
    task.ack()
    assert queue.purge(include_dead=True) == 1  # the retained succeeded task
    assert _queue_keys(redis_sync, name) == []
    assert int(queue.put("again"), 16) == 3  # a purged queue goes on numbering its tasks

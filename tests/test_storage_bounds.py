"""Storage bounds: a Redis at its maxmemory refuses writes as RESOURCE_EXHAUSTED /
STORAGE_FULL (never INTERNAL or UNKNOWN), the embedded Valkey has such a bound with
the noeviction policy, and purging a queue leaves none of its keys."""

from __future__ import annotations

import grpc
import pytest
import redis

import concord
from concord_server.store.embedded_valkey import EmbeddedValkey
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


QUOTA_TOKENS = {tenant: f"{tenant}-token-0123456789abcdef" for tenant in ("small", "other")}


@pytest.fixture(scope="module")
def quota_server(redis_server, tmp_path_factory):
    d = tmp_path_factory.mktemp("quotas")
    (d / "tokens.toml").write_text("".join(f'[[tokens]]\ntoken = "{t}"\ntenant = "{tenant}"\nrole = "admin"\n\n'
                                           for tenant, t in QUOTA_TOKENS.items())
                                   + "[tenants.small]\nstorage_bytes = 1048576\n")
    server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "quotas", "--auth-tokens",
                           str(d / "tokens.toml"), "--tenant-storage-bytes", str(64 * 1024 * 1024),
                           "--log-level", "WARNING").start(d / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


def test_a_tenant_s_stored_payloads_are_bounded_by_its_quota(quota_server, name):
    from support import wait_until

    payload = b"p" * (64 * 1024)
    with concord.Client(quota_server.target, token=QUOTA_TOKENS["small"]) as small, \
            concord.Client(quota_server.target, token=QUOTA_TOKENS["other"]) as other:
        stored = 0
        with pytest.raises(concord.ConcordError) as err:
            for i in range(100):  # 6.4 MiB against a 1 MiB quota, over several queues
                small.queue(f"{name}-{i % 3}").put("t", payload)
                stored += 1
        assert err.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED, err.value
        assert err.value.reason == "STORAGE_QUOTA_EXCEEDED"
        assert 10 <= stored <= 16  # 1 MiB / (64 KiB + the type)
        with pytest.raises(concord.ConcordError):  # still refused: nothing was released
            small.queue(f"{name}-0").put("t", payload)
        for i in range(20):  # another tenant is not held back by it (its default quota: 64 MiB)
            other.queue(name).put("t", payload)
        # Deleting the tasks releases the quota (within a measurement interval).
        for i in range(3):
            small.queue(f"{name}-{i}").purge()

        def admitted() -> bool:
            try:
                small.queue(f"{name}-0").put("t", payload)
                return True
            except concord.ConcordError as exc:
                assert exc.reason == "STORAGE_QUOTA_EXCEEDED", exc
                return False

        wait_until(admitted, timeout=15, interval=0.2, message="the quota released after a purge")

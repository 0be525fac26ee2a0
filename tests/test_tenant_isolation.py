"""What one tenant or client does must not show through to, or disturb, another:
error messages name resources, not Redis keys; metrics series are bounded per
tenant; listings walk only the caller's own resources; cancelled streams are not
errors."""

from __future__ import annotations

import grpc
import pytest

import concord


def test_a_missing_file_s_message_names_the_file_not_a_redis_key(client, name):
    for read in (client.files.chunks, client.files.lines):
        with pytest.raises(concord.FileNotFound) as err:
            list(read(f"12345:{name}"))
        assert err.value.code == grpc.StatusCode.NOT_FOUND
        message = str(err.value)
        assert f"12345:{name}" in message, message
        assert "{" not in message and "concord:" not in message, message


def test_a_tenant_touching_many_queues_keeps_another_tenant_s_depth_series():
    """metrics.RecentQueues decides which queues' depths a scrape exports."""
    import contextvars

    from concord_server import tenants
    from concord_server.metrics import RecentQueues

    recent = RecentQueues()

    def as_tenant(tenant: str, names: list[str]) -> None:
        def note() -> None:
            tenants.current.set(tenant)
            recent.seen(names)
        contextvars.copy_context().run(note)

    as_tenant("quiet", ["orders"])
    for i in range(0, 5000, 10):
        as_tenant("noisy", [f"q{j}" for j in range(i, i + 10)])
    names = recent.names()
    assert ("quiet", "orders") in names
    noisy = [n for t, n in names if t == "noisy"]
    assert 0 < len(noisy) < 5000 and noisy[-1] == "q4999"  # bounded, the most recent kept


TOKENS = {tenant: f"{tenant}-token-0123456789abcdef" for tenant in ("busy", "quiet")}


@pytest.fixture(scope="module")
def tenant_server(redis_server, tmp_path_factory):
    from support import ServerProcess

    d = tmp_path_factory.mktemp("isolation")
    (d / "tokens.toml").write_text("".join(f'[[tokens]]\ntoken = "{t}"\ntenant = "{tenant}"\n\n'
                                           for tenant, t in TOKENS.items()))
    server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "isolation", "--auth-tokens",
                           str(d / "tokens.toml"), "--log-level", "WARNING").start(d / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


def _list(client, service: str, method: str, request_type, page_size: int) -> tuple[list[str], int]:
    """Every name a List call pages through, and how many pages it took."""
    names, token, pages = [], "", 0
    while True:
        page = client._service(service).open(method)(request_type(page_token=token, page_size=page_size), timeout=10)
        names += page.names
        pages += 1
        token = page.next_page_token
        if not token or pages > 1000:
            return names, pages


def test_a_nearly_empty_tenant_s_listing_does_not_walk_other_tenants_resources(tenant_server, name):
    from concord.lock.v1 import lock_pb2
    from concord.queue.v1 import queue_pb2

    with concord.Client(tenant_server.target, token=TOKENS["busy"]) as busy, \
            concord.Client(tenant_server.target, token=TOKENS["quiet"]) as quiet:
        busy_queues = [f"{name}-{i}" for i in range(300)]
        for q in busy_queues:
            busy.queue(q).put("t")
        quiet.queue(f"{name}-mine").put("t")
        with quiet.lock(f"{name}-lock", ttl=60):
            assert _list(quiet, "lock", "ListLocks", lock_pb2.ListLocksRequest, 10) == ([f"{name}-lock"], 1)
        names, pages = _list(quiet, "queue", "ListQueues", queue_pb2.ListQueuesRequest, 10)
        assert (names, pages) == ([f"{name}-mine"], 1)
        # The busy tenant's own listing pages through all of its queues, and only its own.
        names, pages = _list(busy, "queue", "ListQueues", queue_pb2.ListQueuesRequest, 50)
        assert sorted(set(names)) == sorted(busy_queues) and pages <= 20
        # A released lock is no longer listed (and leaves the index).
        leases = [busy.lock(f"{name}-l{i}", ttl=60).acquire() for i in range(20)]
        for lease in leases[:10]:
            lease.release()
        names, _ = _list(busy, "lock", "ListLocks", lock_pb2.ListLocksRequest, 1000)
        assert sorted(names) == sorted(f"{name}-l{i}" for i in range(10, 20))
        for lease in leases[10:]:
            lease.release()


def test_the_listing_index_does_not_outgrow_the_live_resources_when_nobody_lists(client, redis_sync, name):
    """Locks under unique names, each acquired and released: the index of lock names
    stays bounded by the live locks (about twice), not by every name ever used."""
    from concord_server.keys import KeySpace

    for i in range(400):
        with client.lock(f"{name}-{i}", ttl=60):
            pass
    left = [n for n in redis_sync.hkeys(KeySpace("concord").index("lock")) if n.startswith(name)]
    assert len(left) < 100, len(left)

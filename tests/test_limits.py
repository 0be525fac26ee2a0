"""Limits per tenant (token file overrides, flags) and per connection: request rate,
calls that may block, open streams, request size. A limit reached is
RESOURCE_EXHAUSTED with an ErrorInfo and, when retrying can help, a RetryInfo.

No timings: rate limits use a bucket of N and a refill so slow (one token per 1,000 s)
that the N+1th call is refused whenever it runs."""

from __future__ import annotations

import threading

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

import concord
from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.errors import ResourceExhausted
from concord.queue.v1 import queue_pb2, queue_pb2_grpc
from support import ServerProcess, error_info, wait_until

TOKENS = {tenant: f"{tenant}-token-0123456789abcdef" for tenant in ("rated", "blocked", "streams", "small", "free")}
TOKEN_FILE = "".join(f'[[tokens]]\ntoken = "{t}"\ntenant = "{tenant}"\n\n' for tenant, t in TOKENS.items()) + """
[tenants.rated]
rate = 0.001
burst = 3

[tenants.blocked]
max_blocked = 2

[tenants.streams]
max_streams = 1

[tenants.small]
max_request_bytes = 1000
"""
SEPARATE_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]  # each client its own TCP connection (own peer)


def retry_info(err: grpc.RpcError) -> error_details_pb2.RetryInfo | None:
    for detail in rpc_status.from_call(err).details:
        info = error_details_pb2.RetryInfo()
        if detail.Unpack(info):
            return info
    return None


def assert_exhausted(err: grpc.RpcError, reason: str, retry: bool = True) -> None:
    assert err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, err
    assert error_info(err).reason == reason
    info = retry_info(err)
    if retry:
        assert info is not None and info.retry_delay.ToMilliseconds() > 0
    else:
        assert info is None


@pytest.fixture(scope="module")
def tenant_server(redis_server, tmp_path_factory):
    d = tmp_path_factory.mktemp("limits")
    (d / "tokens.toml").write_text(TOKEN_FILE)
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "limits", "--auth-tokens",
                      str(d / "tokens.toml"))
    s.start(d / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def stub_call(target: str, tenant: str, build, method: str, request, options=SEPARATE_CONNECTION):
    with grpc.insecure_channel(target, options=options) as ch:
        return getattr(build(ch), method)(request, metadata=(("authorization", f"Bearer {TOKENS[tenant]}"),),
                                          timeout=10)


def test_tenant_rate_limit_refuses_the_call_after_the_burst_with_retry_info(tenant_server, name):
    def stats():
        return stub_call(tenant_server.target, "rated", queue_pb2_grpc.QueueServiceStub, "Stats",
                         queue_pb2.StatsRequest(queue=name))

    for _ in range(3):  # the burst, spread over three connections: the limit is the tenant's
        stats()
    with pytest.raises(grpc.RpcError) as err:
        stats()
    assert_exhausted(err.value, "RATE_LIMITED")
    assert retry_info(err.value).retry_delay.seconds >= 900  # one token per 1,000 s
    # Other tenants, and health, are not affected.
    stub_call(tenant_server.target, "free", queue_pb2_grpc.QueueServiceStub, "Stats", queue_pb2.StatsRequest(queue=name))
    assert tenant_server.health() == health_pb2.HealthCheckResponse.SERVING


def test_tenant_blocked_call_limit(tenant_server, name):
    token = TOKENS["blocked"]
    clients = [concord.Client(tenant_server.target, token=token, options=SEPARATE_CONNECTION) for _ in range(3)]
    try:
        holder, *waiters = clients
        lease = holder.lock(name, ttl=60).acquire()
        results: list[str] = []
        threads = [threading.Thread(target=lambda c=c: results.append(acquire_and_release(c, name))) for c in waiters]
        for t in threads:
            t.start()
        wait_until(lambda: holder.lock(name).describe().waiters == 2, message="two blocked Acquires")
        with pytest.raises(ResourceExhausted) as err:
            holder.lock(f"{name}-other").acquire(timeout=30)  # a third call that may block, on any lock
        assert err.value.reason == "TOO_MANY_BLOCKED_CALLS" and err.value.metadata["subject"] == "tenant"
        assert holder.lock(name).describe().waiters == 2  # calls that do not block still pass
        holder.lock(name).release(lease)
        for t in threads:
            t.join(60)
        assert results == ["ok", "ok"]
        assert holder.lock(f"{name}-other").acquire(timeout=1) is not None  # room again
    finally:
        for c in clients:
            c.close()


def acquire_and_release(client: concord.Client, name: str) -> str:
    lease = client.lock(name, ttl=60).acquire(timeout=60)
    if lease is None:
        return "timeout"
    client.lock(name).release(lease)
    return "ok"


def test_tenant_stream_limit_and_room_after_a_stream_ends(tenant_server, name):
    metadata = (("authorization", f"Bearer {TOKENS['streams']}"),)
    with grpc.insecure_channel(tenant_server.target) as ch:
        chat = chat_pb2_grpc.ChatServiceStub(ch)
        first = chat.Subscribe(chat_pb2.SubscribeRequest(recipient=name), metadata=metadata)
        assert next(first).caught_up  # open: no chats, so caught up at once
        second = chat.Subscribe(chat_pb2.SubscribeRequest(recipient=name), metadata=metadata)
        with pytest.raises(grpc.RpcError) as err:
            next(second)
        assert_exhausted(err.value, "TOO_MANY_STREAMS")
        first.cancel()

        def room() -> bool:
            call = chat.Subscribe(chat_pb2.SubscribeRequest(recipient=name), metadata=metadata)
            try:
                return next(call).caught_up
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                return False
            finally:
                call.cancel()

        wait_until(room, message="the ended stream's slot to be free")


def test_tenant_request_size_limit_has_no_retry_info(tenant_server, name):
    with concord.Client(tenant_server.target, token=TOKENS["small"]) as c:
        c.queue(name).put("job", b"x" * 500)
        with pytest.raises(ResourceExhausted) as err:
            c.queue(name).put("job", b"x" * 2000)
        assert err.value.reason == "REQUEST_TOO_LARGE"
        assert c.queue(name).stats().ready == 1  # the big one changed nothing
        group = c.chat.create(f"{name}-s", [f"{name}-w"], "files")
        with pytest.raises(ResourceExhausted):  # a client stream: each message is checked
            c.files.upload([b"y" * 5000], group, sender=f"{name}-s")
        assert c.files.list_files(group)[0] == []
    with pytest.raises(grpc.RpcError) as raw:
        stub_call(tenant_server.target, "small", queue_pb2_grpc.QueueServiceStub, "Enqueue",
                  queue_pb2.EnqueueRequest(queue=name, tasks=[queue_pb2.NewTask(type="t", payload=b"z" * 2000)]))
    assert_exhausted(raw.value, "REQUEST_TOO_LARGE", retry=False)
    with concord.Client(tenant_server.target, token=TOKENS["free"]) as c:
        c.queue(name).put("job", b"x" * 2000)  # only the "small" tenant has the limit


# --- per connection, from flags (no auth) -----------------------------------------------

@pytest.fixture(scope="module")
def peer_server(redis_server, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "peerlimits", "--peer-rate", "0.001",
                      "--peer-burst", "3", "--peer-max-streams", "1")
    s.start(tmp_path_factory.mktemp("peer-limits") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_connection_rate_limit_is_per_connection(peer_server, name):
    with grpc.insecure_channel(peer_server.target, options=SEPARATE_CONNECTION) as ch:
        queue = queue_pb2_grpc.QueueServiceStub(ch)
        for _ in range(3):
            queue.Stats(queue_pb2.StatsRequest(queue=name), timeout=10)
        with pytest.raises(grpc.RpcError) as err:
            queue.Stats(queue_pb2.StatsRequest(queue=name), timeout=10)
        assert_exhausted(err.value, "RATE_LIMITED")
        assert error_info(err.value).metadata["subject"] == "connection"
        health = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10)
        assert health.status == health_pb2.HealthCheckResponse.SERVING  # health is never limited
    with grpc.insecure_channel(peer_server.target, options=SEPARATE_CONNECTION) as ch:
        queue_pb2_grpc.QueueServiceStub(ch).Stats(queue_pb2.StatsRequest(queue=name), timeout=10)  # a new bucket


def test_connection_stream_limit(peer_server, name):
    with grpc.insecure_channel(peer_server.target, options=SEPARATE_CONNECTION) as a, \
            grpc.insecure_channel(peer_server.target, options=SEPARATE_CONNECTION) as b:
        first = chat_pb2_grpc.ChatServiceStub(a).Subscribe(chat_pb2.SubscribeRequest(recipient=name))
        assert next(first).caught_up
        second = chat_pb2_grpc.ChatServiceStub(a).Subscribe(chat_pb2.SubscribeRequest(recipient=name))
        with pytest.raises(grpc.RpcError) as err:
            next(second)
        assert_exhausted(err.value, "TOO_MANY_STREAMS")
        other = chat_pb2_grpc.ChatServiceStub(b).Subscribe(chat_pb2.SubscribeRequest(recipient=name))
        assert next(other).caught_up  # another connection has its own allowance
        first.cancel()
        other.cancel()


@pytest.fixture(scope="module")
def blocked_server(redis_server, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "blockedlimits", "--peer-max-blocked", "1",
                      "--tenant-max-blocked", "4")
    s.start(tmp_path_factory.mktemp("blocked-limits") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_connection_blocked_limit_and_flag_tenant_limit(blocked_server, name):
    clients = [concord.Client(blocked_server.target, options=SEPARATE_CONNECTION) for _ in range(6)]
    results: list[str] = []
    threads: list[threading.Thread] = []

    def wait_on(client: concord.Client) -> None:
        threads.append(threading.Thread(target=lambda: results.append(acquire_and_release(client, name))))
        threads[-1].start()

    try:
        holder, *others = clients
        lease = holder.lock(name, ttl=60).acquire()
        for c in others[:3]:
            wait_on(c)
        wait_until(lambda: holder.lock(name).describe().waiters == 3, message="three blocked Acquires")
        with pytest.raises(ResourceExhausted) as err:  # its connection already has one waiting
            others[0].semaphore(name, limit=1).acquire(timeout=30)
        assert err.value.reason == "TOO_MANY_BLOCKED_CALLS" and err.value.metadata["subject"] == "connection"
        wait_on(others[3])
        wait_until(lambda: holder.lock(name).describe().waiters == 4, message="four blocked Acquires")
        with pytest.raises(ResourceExhausted) as err:  # this connection is free, but the tenant has 4 waiting
            others[4].lock(name).acquire(timeout=30)
        assert err.value.reason == "TOO_MANY_BLOCKED_CALLS" and err.value.metadata["subject"] == "tenant"
        holder.lock(name).release(lease)
        for t in threads:
            t.join(60)
        assert results == ["ok"] * 4
    finally:
        for c in clients:
            c.close()


@pytest.mark.parametrize("per_process", [False, True], ids=["across-replicas", "per-process"])
def test_a_tenants_rate_holds_across_replicas_unless_counted_per_process(redis_server, tmp_path, name, per_process):
    """Two replicas on one Redis: the tenant's burst of 3 is shared by both (the fourth
    call is refused whichever replica gets it), or, with --tenant-rate-per-process,
    each replica admits its own 3."""
    (tmp_path / "tokens.toml").write_text(TOKEN_FILE)
    flags = ["--redis-url", redis_server.url, "--key-prefix", f"lim{per_process:d}{name[-6:]}", "--auth-tokens",
             str(tmp_path / "tokens.toml"), *(["--tenant-rate-per-process"] if per_process else [])]
    servers = [ServerProcess(*flags) for _ in range(2)]
    for i, s in enumerate(servers):
        s.start(tmp_path / f"server{i}.log")
    try:
        def stats(server):
            return stub_call(server.target, "rated", queue_pb2_grpc.QueueServiceStub, "Stats",
                             queue_pb2.StatsRequest(queue=name))

        for server in (servers[0], servers[0], servers[1]):
            stats(server)
        if per_process:
            stats(servers[1])
            stats(servers[1])
        with pytest.raises(grpc.RpcError) as err:
            stats(servers[1])
        assert_exhausted(err.value, "RATE_LIMITED")
        assert retry_info(err.value).retry_delay.seconds >= 900
        stub_call(servers[1].target, "free", queue_pb2_grpc.QueueServiceStub, "Stats",
                  queue_pb2.StatsRequest(queue=name))
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()

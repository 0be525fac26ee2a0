"""Bearer tokens and tenants, end to end: a server with --auth-tokens, clients with
tokens of two tenants using the same names everywhere, and the Redis keys behind them."""

from __future__ import annotations

import signal
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

import concord
from concord.errors import PermissionDenied, Unauthenticated
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from support import ServerProcess, error_info, wait_until

PREFIX = "authtest"
ALPHA, BETA, LOCK_ONLY, LATER = ("alpha-token-0123456789abcdef", "beta-token-0123456789abcdef",
                                 "alpha-locks-only-0123456789", "gamma-token-added-by-sighup")
TOKENS = f"""
[[tokens]]
token = "{ALPHA}"
tenant = "alpha"

[[tokens]]
sha256 = "{__import__('hashlib').sha256(BETA.encode()).hexdigest()}"
tenant = "beta"

[[tokens]]
token = "{LOCK_ONLY}"
tenant = "alpha"
services = ["lock"]
"""


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "tokens.toml"
    path.write_text(TOKENS)
    return path


@pytest.fixture(scope="module")
def auth_server(redis_server, token_file, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", PREFIX, "--auth-tokens", str(token_file))
    s.start(tmp_path_factory.mktemp("auth-server") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture
def alpha(auth_server):
    with concord.Client(auth_server.target, token=ALPHA) as c:
        yield c


@pytest.fixture
def beta(auth_server):
    with concord.Client(auth_server.target, token=BETA) as c:
        yield c


def describe_raw(target: str, metadata=()):
    with grpc.insecure_channel(target) as ch:
        return lock_pb2_grpc.LockServiceStub(ch).Describe(lock_pb2.DescribeRequest(name="x"), metadata=metadata,
                                                          timeout=10)


@pytest.mark.parametrize("metadata", [(), (("authorization", "Bearer not-a-known-token-at-all"),),
                                      (("authorization", f"Basic {ALPHA}"),)])
def test_missing_or_unknown_token_is_unauthenticated_with_error_info(auth_server, metadata):
    with pytest.raises(grpc.RpcError) as err:
        describe_raw(auth_server.target, metadata)
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    info = error_info(err.value)
    assert (info.reason, info.domain) == ("UNAUTHENTICATED", "concord")


def test_client_without_token_gets_unauthenticated_on_streams_too(auth_server):
    with concord.Client(auth_server.target) as c:
        with pytest.raises(Unauthenticated):
            c.queue("q").stats()
        with pytest.raises(Unauthenticated):
            list(c.chat.fetch_pending("someone"))


def test_token_limited_to_a_service_gets_permission_denied_elsewhere(auth_server, name):
    with concord.Client(auth_server.target, token=LOCK_ONLY) as c:
        lease = c.lock(name).acquire()
        assert lease is not None
        c.lock(name).release(lease)
        with pytest.raises(PermissionDenied) as err:
            c.queue(name).put("t")
        assert err.value.reason == "PERMISSION_DENIED"
        assert err.value.metadata["service"] == "concord.queue.v1.QueueService"


def test_health_and_reflection_stay_open_without_a_token(auth_server):
    with grpc.insecure_channel(auth_server.target) as ch:
        status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=10).status
        assert status == health_pb2.HealthCheckResponse.SERVING
        replies = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
        names = {s.name for r in replies for s in r.list_services_response.service}
    assert "concord.lock.v1.LockService" in names


def test_locks_and_semaphores_of_two_tenants_with_one_name_are_separate(alpha, beta, name):
    a = alpha.lock(name, ttl=60).acquire()
    b = beta.lock(name, ttl=60).acquire(timeout=0)
    assert a is not None and b is not None, "alpha's lock must not block beta's lock of the same name"
    assert alpha.lock(name).describe().fencing_token == a.fencing_token
    assert beta.lock(name).describe().fencing_token == b.fencing_token
    pa = alpha.semaphore(name, limit=1).acquire()
    pb = beta.semaphore(name, limit=1).acquire()
    assert pa is not None and pb is not None
    assert alpha.semaphore(name, limit=1).acquire() is None  # alpha's own limit still holds
    with pytest.raises(concord.errors.LockNotHeld):
        beta.lock(name).release(a)  # beta cannot touch alpha's lock, even with its lease
    alpha.lock(name).release(a)
    beta.lock(name).release(b)


def test_queues_of_two_tenants_with_one_name_are_separate(alpha, beta, name):
    task_id = alpha.queue(name).put("job", b"alpha's")
    assert beta.queue(name).stats().ready == 0
    assert beta.queue(name).get(timeout=0) == []
    with pytest.raises(concord.errors.TaskNotFound):
        beta.queue(name).cancel(task_id)
    (task,) = alpha.queue(name).get(timeout=0)
    assert task.payload == b"alpha's"
    alpha.queue(name).ack(task)


def test_chats_of_two_tenants_are_separate(alpha, beta, name):
    user, other = f"{name}-u", f"{name}-v"
    chat_a = alpha.chat.create(other, [user], "for alpha's user", chat_id=name)
    chat_b = beta.chat.create(other, [user], "for beta's user", chat_id=name)  # no ChatExists: another tenant
    assert chat_a == chat_b == name
    assert [m.body for m in alpha.chat.fetch_pending(user)] == ["for alpha's user"]
    assert [m.body for m in beta.chat.fetch_pending(user)] == ["for beta's user"]
    assert [c.chat_id for c in alpha.chat.list_chats(user)] == [name]
    alpha.chat.leave(name, user)
    alpha.chat.leave(name, other)
    assert alpha.chat.list_chats(user) == []
    assert [c.chat_id for c in beta.chat.list_chats(user)] == [name]


def test_server_assigned_chat_ids_and_subscriptions_are_per_tenant(alpha, beta, name):
    ca = alpha.chat.create(f"{name}-s", [f"{name}-r"], "a")
    cb = beta.chat.create(f"{name}-s", [f"{name}-r"], "b")
    with beta.chat.subscribe(f"{name}-r") as sub:
        events = iter(sub)
        first = next(events)
        assert first.body == "b" and first.chat_id == cb
        alpha.chat.send(ca, f"{name}-s", "alpha only")
        beta.chat.send(cb, f"{name}-s", "beta again")
        assert next(events).body == "beta again"  # alpha's message, sent first, never shows up


def test_autocomplete_of_two_tenants_is_separate(alpha, beta, name):
    alpha.autocomplete.add_names(name, ["Ada", "Adele"])
    beta.autocomplete.add_names(name, ["Adam"])
    assert [s.name for s in alpha.autocomplete.suggest(name, "ad")] == ["Ada", "Adele"]
    assert [s.name for s in beta.autocomplete.suggest(name, "ad")] == ["Adam"]
    alpha.autocomplete.add_recent(name, "Zed")
    assert beta.autocomplete.suggest_recent(name, "z") == []
    assert alpha.autocomplete.suggest_recent(name, "z") == ["Zed"]


def test_files_of_two_tenants_are_separate(alpha, beta, name):
    group = alpha.chat.create(f"{name}-s", [f"{name}-w"], "files", chat_id=name)
    beta.chat.create(f"{name}-s", [f"{name}-w"], "files", chat_id=name)
    up = alpha.files.upload([b"one\ntwo\n"], group, sender=f"{name}-s", name="a.txt")
    files, _ = beta.files.list_files(group)
    assert files == []
    with pytest.raises(concord.errors.FileNotFound):
        list(beta.files.lines(up.file_id))
    assert [line.data for line in alpha.files.lines(up.file_id)] == [b"one", b"two"]


def test_every_key_carries_its_tenant_prefix(alpha, beta, redis_sync, name):
    alpha.queue(name).put("job")
    beta.lock(name, ttl=60).acquire()
    # The server's own keys (the process registry: {prefix#processes}) are no tenant's and none can reach them.
    keys = [k for k in redis_sync.scan_iter(match=f"{{{PREFIX}*") if not k.startswith(f"{{{PREFIX}#")]
    assert any(k.startswith(f"{{{PREFIX}@alpha:queue:{name}}}") for k in keys)
    assert any(k.startswith(f"{{{PREFIX}@beta:lock:{name}}}") for k in keys)
    assert all(k.startswith((f"{{{PREFIX}@alpha:", f"{{{PREFIX}@beta:")) for k in keys), keys


def test_sighup_reloads_the_token_file(auth_server, token_file, name):
    with concord.Client(auth_server.target, token=LATER) as c:
        with pytest.raises(Unauthenticated):
            c.lock(name).describe()
        token_file.write_text(TOKENS + f'\n[[tokens]]\ntoken = "{LATER}"\ntenant = "gamma"\n')
        try:
            auth_server.signal(signal.SIGHUP)

            def accepted() -> bool:
                try:
                    c.lock(name).describe()
                    return True
                except Unauthenticated:
                    return False

            wait_until(accepted, message="the new token to be accepted")
        finally:
            token_file.write_text(TOKENS)
            auth_server.signal(signal.SIGHUP)


async def test_async_client_sends_its_token_on_every_kind_of_call(auth_server, name):
    async with concord.AsyncClient(auth_server.target, token=ALPHA) as c:
        async with c.lock(name, ttl=10) as lease:  # Acquire + the Hold stream
            assert lease.fencing_token > 0
        await c.queue(name).put("job")
        assert (await c.queue(name).stats()).ready == 1
        await c.chat.create(f"{name}-s", [f"{name}-r"], "hi", chat_id=name)
        async with c.chat.subscribe(f"{name}-r") as sub:
            async for event in sub:
                assert event.body == "hi"
                break
    async with concord.AsyncClient(auth_server.target) as c:
        with pytest.raises(Unauthenticated):
            await c.queue(name).stats()


def test_protected_health_needs_a_token(redis_server, token_file, tmp_path):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", PREFIX, "--auth-tokens", str(token_file),
                      "--auth-health")
    with open(tmp_path / "server.log", "ab") as log:  # started by hand: start() checks health without a token
        s.proc = subprocess.Popen([sys.executable, "-m", "concord_server", *s.args], stdout=log,
                                  stderr=subprocess.STDOUT, env=s.env)
    s.log_path = tmp_path / "server.log"
    try:
        def answer(metadata):
            with grpc.insecure_channel(s.target) as ch:
                try:
                    return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), metadata=metadata,
                                                                timeout=2).status
                except grpc.RpcError as exc:
                    return exc.code()

        auth = (("authorization", f"Bearer {ALPHA}"),)
        wait_until(lambda: answer(auth) == health_pb2.HealthCheckResponse.SERVING, timeout=30,
                   message="the server to serve")
        assert answer(()) == grpc.StatusCode.UNAUTHENTICATED
    finally:
        assert s.stop() == 0, s.log_text()

"""Roles in the token file (read-only, read-write, admin, combined with services) and
revocation: a token file reload ends the open calls and streams it no longer allows.

End to end against a server with --auth-tokens; refusals are PERMISSION_DENIED or
UNAUTHENTICATED with an ErrorInfo, and a revoked stream ends at once, so nothing more
is granted or delivered on it."""

from __future__ import annotations

import queue
import signal

import grpc
import pytest

import concord
from concord.chat.v1 import chat_pb2, chat_pb2_grpc
from concord.errors import PermissionDenied
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord_server.edge import auth, methods
from support import ServerProcess, error_info

READER, WRITER, ADMIN, LOCK_READER, DOOMED, DEMOTED = (
    f"{who}-token-0123456789abcdef" for who in ("reader", "writer", "admin", "lockreader", "doomed", "demoted"))
BASE = f"""
[[tokens]]
token = "{READER}"
tenant = "acme"
role = "read-only"

[[tokens]]
token = "{WRITER}"
tenant = "acme"

[[tokens]]
token = "{ADMIN}"
tenant = "acme"
role = "admin"

[[tokens]]
token = "{LOCK_READER}"
tenant = "acme"
services = ["lock"]
role = "read-only"
"""
REVOCABLE = f"""
[[tokens]]
token = "{DOOMED}"
tenant = "acme"

[[tokens]]
token = "{DEMOTED}"
tenant = "acme"
"""
DEMOTED_NOW = f"""
[[tokens]]
token = "{DEMOTED}"
tenant = "acme"
role = "read-only"
"""


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("roles") / "tokens.toml"
    path.write_text(BASE + REVOCABLE)
    return path


@pytest.fixture(scope="module")
def server(redis_server, token_file, tmp_path_factory):
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "rolestest", "--auth-tokens", str(token_file))
    s.start(tmp_path_factory.mktemp("roles-server") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def client(server, token):
    return concord.Client(server.target, token=token, timeout=10)


def force_release(server, token: str, name: str) -> lock_pb2.ForceReleaseResponse:
    """ForceRelease has no Python client method (the admin CLI calls it raw)."""
    with grpc.insecure_channel(server.target) as ch:
        return lock_pb2_grpc.LockServiceStub(ch).ForceRelease(
            lock_pb2.ForceReleaseRequest(name=name), metadata=(("authorization", f"Bearer {token}"),), timeout=10)


def denied(call, *args, **kwargs) -> PermissionDenied:
    with pytest.raises(PermissionDenied) as err:
        call(*args, **kwargs)
    assert err.value.reason == "PERMISSION_DENIED"
    return err.value


def test_read_only_token_reads_but_changes_nothing(server, name):
    with client(server, WRITER) as w:
        w.queue(name).put("job")
    with client(server, READER) as r:
        assert r.lock(name).describe().held is False
        assert r.queue(name).stats().ready == 1
        assert [t.type for t in r.queue(name).peek()] == ["job"]
        assert r.semaphore(name, limit=1).describe() is not None
        err = denied(r.lock(name).acquire)
        assert err.metadata["role"] == "read-only"
        # the client acquires over the lock Session stream, which a read-only token may not open
        assert err.metadata["method"] == "/concord.lock.v1.LockService/Session"
        denied(r.queue(name).put, "job")
        denied(r.queue(name).get, timeout=0)
        with pytest.raises(PermissionDenied):
            with r.chat.subscribe(f"{name}-r") as sub:  # marks messages seen: not read-only
                next(iter(sub))
    with client(server, WRITER) as w:
        assert w.queue(name).stats().ready == 1  # the refused Dequeue leased nothing


def test_read_write_token_may_not_call_admin_methods(server, name):
    with client(server, WRITER) as w:
        lease = w.lock(name, ttl=60).acquire()
        assert lease is not None
        w.queue(name).put("job")
        with pytest.raises(grpc.RpcError) as err:
            force_release(server, WRITER, name)
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert (error_info(err.value).reason, error_info(err.value).metadata["role"]) == (
            "PERMISSION_DENIED", "read-write")
        for call, args in [(w.semaphore(name, limit=2).set_limit, (3,)),
                           (w.queue(name).purge, ()), (w.queue(name).retry_dead, ()), (w.queue(name).pause, ()),
                           (w.queue(name).resume, ()), (w.queue(name).set_policy, ())]:
            assert denied(call, *args).metadata["role"] == "read-write"
        assert w.lock(name).describe().fencing_token == lease.fencing_token  # still held: nothing was forced
        assert w.queue(name).stats().ready == 1  # nothing purged
        w.lock(name).release(lease)


def test_admin_token_force_releases_purges_and_sets_limits(server, name):
    with client(server, WRITER) as w, client(server, ADMIN) as a:
        assert w.lock(name, ttl=60).acquire() is not None
        assert force_release(server, ADMIN, name).released is True
        assert w.lock(name).describe().held is False
        w.queue(name).put("job")
        assert a.queue(name).purge() == 1
        assert a.semaphore(name, limit=2).set_limit(3) >= 0
        a.queue(name).pause()
        assert a.queue(name).stats().paused
        a.queue(name).resume()
        assert not a.queue(name).stats().paused
        assert a.lock(name, ttl=60).acquire() is not None  # admin includes read-write


def test_role_combines_with_services(server, name):
    with client(server, LOCK_READER) as c:
        assert c.lock(name).describe().held is False
        denied(c.lock(name).acquire)
        err = denied(c.queue(name).stats)  # read-only, but not its service
        assert err.metadata["service"] == "concord.queue.v1.QueueService"


def test_role_table_names_the_admin_methods_and_rejects_unknown_roles(tmp_path):
    admin = {m for m, role in methods.REQUIRED_ROLE.items() if role == "admin"}
    assert admin == {"/concord.lock.v1.LockService/ForceRelease", "/concord.semaphore.v1.SemaphoreService/SetLimit",
                     *(f"/concord.queue.v1.QueueService/{m}" for m in
                       ("Purge", "RetryDead", "SetQueuePolicy", "PauseQueue", "ResumeQueue", "SetGroupRules")),
                     *(f"/concord.ratelimit.v1.RateLimitService/{m}" for m in ("SetLimit", "Reset", "DeleteLimit"))}
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[tokens]]\ntoken = "{READER}"\ntenant = "acme"\nrole = "superuser"\n')
    with pytest.raises(ValueError, match="role must be one of read-only, read-write, admin"):
        auth.load_tokens(path)


def _session(channel: grpc.Channel, token: str):
    """A raw lock Session: (put a SessionRequest in, the response iterator)."""
    requests: queue.Queue = queue.Queue()

    def outgoing():
        while (request := requests.get()) is not None:
            yield request

    responses = lock_pb2_grpc.LockServiceStub(channel).Session(
        outgoing(), metadata=(("authorization", f"Bearer {token}"),), timeout=60)
    return requests, responses


def _acquire(rid: int, name: str, wait: float = 0) -> lock_pb2.SessionRequest:
    request = lock_pb2.SessionRequest(id=rid, acquire=lock_pb2.AcquireRequest(name=name))
    request.acquire.ttl.FromSeconds(60)
    request.acquire.wait_timeout.FromMilliseconds(int(wait * 1000))
    return request


def _ends_with(responses, code: grpc.StatusCode, reason: str) -> None:
    with pytest.raises(grpc.RpcError) as err:
        for response in responses:
            pytest.fail(f"nothing more may arrive on a revoked stream, got {response}")
    assert err.value.code() == code, err.value
    assert error_info(err.value).reason == reason


def test_revoked_token_ends_its_open_session_and_subscribe(server, token_file, name):
    held, other = f"{name}-held", f"{name}-other"
    with client(server, WRITER) as w, grpc.insecure_channel(server.target) as ch:
        holder = w.lock(held, ttl=60).acquire()
        w.chat.create(f"{name}-s", [f"{name}-r"], "first", chat_id=name)
        requests, responses = _session(ch, DOOMED)
        requests.put(_acquire(1, other))
        assert next(responses).acquire.acquired  # the session works...
        requests.put(_acquire(2, held, wait=50))  # ...and now waits for a lock someone holds
        subscription = chat_pb2_grpc.ChatServiceStub(ch).Subscribe(
            chat_pb2.SubscribeRequest(recipient=f"{name}-r"), metadata=(("authorization", f"Bearer {DOOMED}"),),
            timeout=60)
        bodies = []
        for response in subscription:  # the pending message, then caught_up
            bodies += [m.body for m in response.messages]
            if response.caught_up:
                break
        assert bodies == ["first"]
        try:
            token_file.write_text(BASE)  # DOOMED (and DEMOTED) revoked
            server.signal(signal.SIGHUP)
            _ends_with(responses, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
            _ends_with(subscription, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED")
        finally:
            token_file.write_text(BASE + REVOCABLE)
            server.signal(signal.SIGHUP)
            requests.put(None)
        w.chat.send(name, f"{name}-s", "after the revocation")  # a subscription still open would get it
        w.lock(held).release(holder)
        assert w.lock(held).describe().held is False, "the revoked session's waiting Acquire was granted"


def test_demoted_token_ends_the_streams_its_new_role_refuses(server, token_file, name):
    with grpc.insecure_channel(server.target) as ch:
        requests, responses = _session(ch, DEMOTED)
        requests.put(_acquire(1, name))
        assert next(responses).acquire.acquired
        try:
            token_file.write_text(BASE + DEMOTED_NOW)
            server.signal(signal.SIGHUP)
            _ends_with(responses, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED")
            with client(server, DEMOTED) as c:
                assert c.lock(name).describe().held is True  # read-only still reads (the lease outlives its stream)
        finally:
            token_file.write_text(BASE + REVOCABLE)
            server.signal(signal.SIGHUP)
            requests.put(None)

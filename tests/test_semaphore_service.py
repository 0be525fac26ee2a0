"""The Semaphore service end to end: real server process, real client."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import dataclass

import grpc
import pytest
from google.protobuf import duration_pb2

import concord
from concord.semaphore.v1 import semaphore_pb2 as pb
from concord.semaphore.v1 import semaphore_pb2_grpc
from support import ServerProcess, renewed_past, wait_until


def test_acquire_describe_release(client, name):
    sem = client.semaphore(name, limit=3, permits=2, ttl=10, owner="w1")
    permit = sem.acquire()
    assert permit is not None and permit.permits == 2
    info = sem.describe()
    assert (info.limit, info.held, info.waiters) == (3, 2, 0)
    assert [(h.owner, h.permits) for h in info.holders] == [("w1", 2)]
    assert client.semaphore(name, limit=3, permits=2).acquire() is None
    assert client.semaphore(name, limit=3).acquire() is not None
    permit.release()
    with pytest.raises(concord.PermitNotHeld) as err:
        permit.release()
    assert err.value.reason == "PERMIT_NOT_HELD" and err.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_with_block_renews_and_releases(client, name):
    with client.semaphore(name, limit=1, ttl=2, timeout=5) as permit:
        first = permit.expires_at
        wait_until(lambda: renewed_past(permit, first, 2.5), message="renewals past the first TTL")
        assert client.semaphore(name, limit=1).describe().held == 1
    assert client.semaphore(name, limit=1).describe().held == 0


def test_with_block_times_out_and_waiter_is_admitted_on_release(client, name):
    holder = client.semaphore(name, limit=1, ttl=30).acquire()
    with pytest.raises(concord.SemaphoreTimeout):
        with client.semaphore(name, limit=1, timeout=0.2):
            pytest.fail("must not enter")
    got: list = []
    t = threading.Thread(target=lambda: got.append(client.semaphore(name, limit=1).acquire(timeout=20)))
    t.start()
    wait_until(lambda: client.semaphore(name, limit=1).describe().waiters == 1, message="waiter queued")
    holder.release()
    t.join(20)
    assert got and got[0] is not None


async def test_async_with(aclient, name):
    async with aclient.semaphore(name, limit=2, permits=2, ttl=5, timeout=5):
        assert (await aclient.semaphore(name, limit=2).describe()).held == 2
    assert (await aclient.semaphore(name, limit=2).describe()).held == 0


def test_hold_stream_releases_on_cancel(concord_server, client, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = semaphore_pb2_grpc.SemaphoreServiceStub(ch).Hold(pb.HoldRequest(
            name=name, limit=2, permits=2, ttl=duration_pb2.Duration(seconds=1),
            wait_timeout=duration_pb2.Duration(seconds=5)))
        assert next(stream).event == pb.HOLD_EVENT_ACQUIRED
        assert next(stream).event == pb.HOLD_EVENT_REFRESHED
        assert client.semaphore(name, limit=2).describe().held == 2
        stream.cancel()
    wait_until(lambda: client.semaphore(name, limit=2).describe().held == 0, timeout=5, message="release on cancel")


@pytest.mark.parametrize("field,request_kwargs", [
    ("name", {"name": "", "limit": 1}),
    ("name", {"name": "a\nb", "limit": 1}),
    ("limit", {"name": "n", "limit": 10_001}),
    ("permits", {"name": "n", "limit": 2, "permits": 3}),
    ("permits", {"name": "n", "limit": 0, "permits": 10_001}),  # limit 0 (the stored one): at most the max
    ("ttl", {"name": "n", "limit": 1, "ttl": None}),
    ("wait_timeout", {"name": "n", "limit": 1, "wait_timeout": duration_pb2.Duration(seconds=-1)}),
    ("owner", {"name": "n", "limit": 1, "owner": "x\x00"}),
])
def test_bad_input_is_invalid_argument_and_writes_nothing(concord_server, redis_sync, field, request_kwargs):
    kwargs = {"ttl": duration_pb2.Duration(seconds=5), **request_kwargs}
    if kwargs["ttl"] is None:
        del kwargs["ttl"]
    before = set(redis_sync.keys("*:sem:*"))
    with grpc.insecure_channel(concord_server.target) as ch:
        with pytest.raises(grpc.RpcError) as err:
            semaphore_pb2_grpc.SemaphoreServiceStub(ch).Acquire(pb.AcquireRequest(**kwargs), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details()
    assert set(redis_sync.keys("*:sem:*")) <= before


@dataclass
class Attempt:
    client: int
    permits: int
    ttl: float
    wait: float
    sent: float
    replied: float | None = None
    granted: bool = False
    released: float | None = None
    cancelled: bool = False


async def sem_client(i, aclient, name, limit, history, rng, stop_at):
    while time.monotonic() < stop_at:
        permits = rng.choice([1, 1, 1, 2, 3])
        ttl = rng.choice([0.1, 0.3, 1.0])
        wait = rng.choice([0.0, 0.2, 1.0, 3.0])
        a = Attempt(i, permits, ttl, wait, time.monotonic())
        history.append(a)
        sem = aclient.semaphore(name, limit=limit, permits=permits, ttl=ttl)
        try:
            if wait and rng.random() < 0.15:
                permit = await asyncio.wait_for(sem.acquire(timeout=wait), rng.uniform(0.01, wait))
            else:
                permit = await sem.acquire(timeout=wait)
        except TimeoutError:
            a.cancelled = True
            continue
        a.replied = time.monotonic()
        if permit is None:
            continue
        a.granted = True
        await asyncio.sleep(rng.choice([0.0, 0.01, ttl * 0.5, ttl * 1.5]))  # sometimes past the TTL
        a.released = time.monotonic()
        try:
            await permit.release()
        except concord.PermitNotHeld:
            pass


async def test_semaphore_invariants_under_contention(concord_server, name):
    limit, clients_n, seconds = 4, 30, 6.0
    history: list[Attempt] = []
    rng = random.Random(name)
    clients = [concord.AsyncClient(concord_server.target) for _ in range(3)]
    try:
        stop_at = time.monotonic() + seconds
        await asyncio.gather(*(sem_client(i, clients[i % 3], name, limit, history, random.Random(rng.random()), stop_at)
                               for i in range(clients_n)))
        deadline = time.monotonic() + 10
        while True:  # no permit leaked, nobody left queued
            info = await clients[0].semaphore(name, limit=limit).describe()
            if info.held == 0 and info.waiters == 0:
                break
            assert time.monotonic() < deadline, f"leaked: {info}"
            await asyncio.sleep(0.02)
    finally:
        for c in clients:
            await c.close()

    grants = [a for a in history if a.granted]
    assert len(grants) > 50, f"too little contention: {len(grants)} grants"
    # Held permits never exceed the limit: sweep over each grant's safe interval,
    # from its reply to the earlier of its release and its TTL counted from sending.
    events = []
    for a in grants:
        start, end = a.replied, min(a.released, a.sent + a.ttl)
        if start < end:
            events += [(start, 1, a.permits), (end, 0, -a.permits)]
    held = 0
    for _, _, delta in sorted(events):
        held += delta
        assert held <= limit, f"{held} permits held at once, limit {limit}"
    # FIFO: a request sent clearly later is never granted clearly before an earlier one.
    slack = 0.1
    waited = [a for a in grants if a.replied - a.sent > slack]
    for a in waited:
        for b in grants:
            if a.sent + slack < b.sent and b.replied + slack < a.replied:
                pytest.fail(f"a request sent {b.sent - a.sent:.2f}s later was granted {a.replied - b.replied:.2f}s earlier")
    for a in history:
        if not a.cancelled:
            assert a.replied - a.sent <= a.wait + 2.0


@pytest.mark.parametrize("method", ["Release", "Refresh"])
def test_unknown_or_malformed_permit(concord_server, method, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = semaphore_pb2_grpc.SemaphoreServiceStub(ch)
        make = getattr(pb, f"{method}Request")
        extra = {"ttl": duration_pb2.Duration(seconds=5)} if method == "Refresh" else {}
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, method)(make(name=name, permit_id="0" * 32, **extra), timeout=10)
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert concord.errors.from_rpc_error(err.value).reason == "PERMIT_NOT_HELD"
        with pytest.raises(grpc.RpcError) as err:
            getattr(stub, method)(make(name=name, permit_id="", **extra), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_request_that_does_not_parse_is_invalid_argument(concord_server):
    with grpc.insecure_channel(concord_server.target) as ch:
        raw = ch.unary_unary("/concord.semaphore.v1.SemaphoreService/Acquire",
                             request_serializer=lambda b: b, response_deserializer=lambda b: b)
        with pytest.raises(grpc.RpcError) as err:
            raw(b"\x0a\x02\xff\xfe\x10\x01", timeout=10)  # name: not UTF-8; limit 1
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT


# --- the limit: stored, set by SetLimit or the first Acquire, changed only by SetLimit --------


def _state(sem) -> tuple:
    info = sem.describe()
    return info.limit, info.held, info.waiters, sorted((h.permit_id, h.owner, h.permits) for h in info.holders)


def test_an_acquire_with_another_limit_fails_and_changes_nothing(concord_server, client, name):
    holder = client.semaphore(name, limit=2, ttl=30, owner="holder").acquire()  # the first stores 2
    assert holder is not None
    before = _state(client.semaphore(name))
    for limit, timeout in ((3, 0), (1, 0), (3, 5)):
        with pytest.raises(concord.SemaphoreLimitMismatch) as err:
            client.semaphore(name, limit=limit, owner="misconfigured").acquire(timeout=timeout)
        assert err.value.reason == "SEMAPHORE_LIMIT_MISMATCH" and err.value.code == grpc.StatusCode.FAILED_PRECONDITION
        assert err.value.metadata == {"name": name, "limit": "2", "requested": str(limit)}
    # Hold is refused the same way, before anything is granted.
    with grpc.insecure_channel(concord_server.target) as ch:
        stream = semaphore_pb2_grpc.SemaphoreServiceStub(ch).Hold(pb.HoldRequest(
            name=name, limit=5, ttl=duration_pb2.Duration(seconds=5)), timeout=10)
        with pytest.raises(grpc.RpcError) as hold_err:
            next(stream)
    assert hold_err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert concord.errors.from_rpc_error(hold_err.value).reason == "SEMAPHORE_LIMIT_MISMATCH"
    assert _state(client.semaphore(name)) == before  # no holder added, no waiter, the limit as it was
    assert before[:3] == (2, 1, 0)
    holder.release()


def test_the_first_acquire_stores_the_limit_and_limit_0_uses_it(client, name):
    with pytest.raises(concord.NotFound) as err:  # no limit passed, none stored
        client.semaphore(name).acquire()
    assert err.value.code == grpc.StatusCode.NOT_FOUND and name in str(err.value)
    assert client.semaphore(name).describe().limit == 0
    first = client.semaphore(name, limit=2, owner="first").acquire()
    assert first is not None and client.semaphore(name).describe().limit == 2
    second = client.semaphore(name, owner="second").acquire()  # limit 0: the stored 2
    assert second is not None
    assert client.semaphore(name).acquire() is None  # 2 of 2 held
    with pytest.raises(concord.PermitsExceedLimit):
        client.semaphore(name, permits=3).acquire()
    first.release()
    second.release()


def test_set_limit_lowering_keeps_holders_and_holds_new_grants_until_they_fit(client, name):
    sem = client.semaphore(name, limit=3, ttl=30)
    held = [sem.acquire() for _ in range(3)]
    assert all(held)
    assert sem.set_limit(1) == 3 and sem.limit == 1  # the handle follows the limit it set
    info = sem.describe()
    assert (info.limit, info.held, len(info.holders)) == (1, 3, 3)  # nobody evicted
    assert sem.acquire() is None
    held[0].release()
    held[1].release()
    assert sem.acquire() is None  # 1 held = the new limit
    held[2].release()
    last = sem.acquire()
    assert last is not None
    last.release()


def test_set_limit_raising_admits_queued_waiters_at_once(client, name):
    holder = client.semaphore(name, limit=1, ttl=30).acquire()
    got: list = []
    waiters = [threading.Thread(target=lambda: got.append(client.semaphore(name).acquire(timeout=30)))
               for _ in range(2)]
    for t in waiters:
        t.start()
    wait_until(lambda: client.semaphore(name).describe().waiters == 2, message="two waiters queued")
    admin = client.semaphore(name)  # no limit of its own: set_limit leaves it at "the stored one"
    assert admin.set_limit(3) == 1 and admin.limit == 0
    assert admin.describe().held == 3  # granted in Redis by the SetLimit call itself
    # Granted by the SetLimit itself, not by a later release or the waiters' safety poll.
    wait_until(lambda: len(got) == 2, timeout=5, message="both waiters granted")
    for t in waiters:
        t.join(5)
    assert all(got) and client.semaphore(name).describe().held == 3
    for p in [holder, *got]:
        p.release()


def test_set_limit_fails_queued_requests_above_the_new_limit(client, name):
    holder = client.semaphore(name, limit=4, permits=4, ttl=30).acquire()
    failed: list = []

    def big() -> None:
        try:
            client.semaphore(name, permits=3).acquire(timeout=30)
        except concord.PermitsExceedLimit as exc:
            failed.append(exc)

    t = threading.Thread(target=big)
    t.start()
    wait_until(lambda: client.semaphore(name).describe().waiters == 1, message="the big request queued")
    assert client.semaphore(name).set_limit(2) == 4
    holder.release()
    t.join(10)
    assert failed and failed[0].reason == "PERMITS_EXCEED_LIMIT"


async def test_async_set_limit(aclient, name):
    sem = aclient.semaphore(name, limit=1)
    assert await sem.set_limit(2) == 0  # none before
    assert sem.limit == 2 and (await sem.describe()).limit == 2
    async with aclient.semaphore(name, permits=2, timeout=5):
        assert (await aclient.semaphore(name).describe()).held == 2
    with pytest.raises(concord.SemaphoreLimitMismatch):
        await aclient.semaphore(name, limit=1).acquire()


@pytest.mark.parametrize("field,request_kwargs", [
    ("name", {"name": "", "limit": 1}),
    ("name", {"name": "a\nb", "limit": 1}),
    ("name", {"name": "x" * 257, "limit": 1}),
    ("limit", {"name": "n", "limit": 0}),
    ("limit", {"name": "n", "limit": 10_001}),
])
def test_bad_set_limit_is_invalid_argument_and_writes_nothing(concord_server, redis_sync, field, request_kwargs):
    before = set(redis_sync.keys("*:sem:*"))
    with grpc.insecure_channel(concord_server.target) as ch:
        with pytest.raises(grpc.RpcError) as err:
            semaphore_pb2_grpc.SemaphoreServiceStub(ch).SetLimit(pb.SetLimitRequest(**request_kwargs), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in err.value.details()
    assert set(redis_sync.keys("*:sem:*")) <= before


def test_set_limit_over_grpc_returns_the_previous_limit(concord_server, name):
    with grpc.insecure_channel(concord_server.target) as ch:
        stub = semaphore_pb2_grpc.SemaphoreServiceStub(ch)
        assert stub.SetLimit(pb.SetLimitRequest(name=name, limit=5), timeout=10).previous_limit == 0
        assert stub.SetLimit(pb.SetLimitRequest(name=name, limit=7), timeout=10).previous_limit == 5
        assert stub.Describe(pb.DescribeRequest(name=name), timeout=10).limit == 7


@pytest.fixture(scope="module")
def legacy_server(redis_server, tmp_path_factory):
    """A server with the deprecated --semaphore-limit-from-acquire (and keys of its own)."""
    s = ServerProcess("--redis-url", redis_server.url, "--key-prefix", "legacy-sem", "--log-level", "WARNING",
                      "--semaphore-limit-from-acquire")
    s.start(tmp_path_factory.mktemp("legacy-sem") / "server.log")
    yield s
    assert s.stop() == 0, s.log_text()


def test_the_deprecated_option_restores_the_latest_acquire_wins(legacy_server, name):
    assert "--semaphore-limit-from-acquire is deprecated" in legacy_server.log_text()
    with concord.Client(legacy_server.target) as client:
        holder = client.semaphore(name, limit=1, ttl=30).acquire()
        got: list = []
        t = threading.Thread(target=lambda: got.append(client.semaphore(name, limit=1).acquire(timeout=30)))
        t.start()
        wait_until(lambda: client.semaphore(name).describe().waiters == 1, message="waiter queued")
        raiser = client.semaphore(name, limit=3).acquire()  # no mismatch: its limit is put in force...
        assert raiser is not None
        wait_until(lambda: got, timeout=5, message="the waiter admitted by the raised limit")  # ...admitting the waiter
        t.join(5)
        assert client.semaphore(name).describe().limit == 3
        assert client.semaphore(name, limit=1).acquire() is None  # lowers it; evicts nobody
        info = client.semaphore(name).describe()
        assert (info.limit, info.held) == (1, 3)
        assert client.semaphore(name).set_limit(4) == 1  # SetLimit and limit 0 work there too
        assert client.semaphore(name).acquire() is not None
        for p in (holder, raiser, got[0]):
            p.release()


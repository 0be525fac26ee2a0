"""Clients ride out short Redis outages: calls that are safe to repeat are retried
while the server answers UNAVAILABLE, within the caller's own budget; calls that a
repeat could do twice are not (concord._retry, clients/go/retry.go).

Each outage is real: the test's own Redis is SIGKILLed and started again on the same
port with the same append-only file (appendfsync always, so an enqueued task
survives). How long Redis stays down is the scenario, not a wait for anything.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import threading
import time

import grpc
import pytest

import concord
from concord import _retry
from support import ServerProcess, unless_unavailable, wait_until
from test_polyglot import GO_CLIENT, go, run

OUTAGE = 1.0  # seconds Redis stays down
SLACK = 2.0  # on top of a budget, for a busy two-core machine


@pytest.fixture
def server(fresh_redis, tmp_path):
    s = ServerProcess("--redis-url", fresh_redis.url, "--log-level", "WARNING").start(tmp_path / "server.log")
    yield s
    s.stop()


@pytest.fixture
def outage(fresh_redis):
    """outage() kills Redis now and starts it again OUTAGE seconds later; it returns
    the timer that does so (join it to know Redis is back). Teardown waits for every
    timer, so no Redis starts after fresh_redis's teardown killed it."""
    timers: list[threading.Timer] = []

    def start() -> threading.Timer:
        fresh_redis.kill()
        timers.append(threading.Timer(OUTAGE, fresh_redis.start))
        timers[-1].start()
        return timers[-1]

    yield start
    for t in timers:
        t.join()


def served_again(client: concord.Client, name: str) -> None:
    wait_until(lambda: unless_unavailable(client.queue(name).stats) is not None, message="Redis back")


# The policy itself (no server).


def test_backoff_is_full_jitter_up_to_the_cap():
    for attempt, ceiling in enumerate([0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0]):
        assert _retry.backoff(attempt, lambda: 0.0) == 0.0
        assert _retry.backoff(attempt, lambda: 0.999999) == pytest.approx(ceiling, rel=1e-5)
    assert _retry.backoff(10_000, lambda: 0.999999) < _retry.CAP


def test_retry_stops_at_the_budget_and_only_retries_a_servers_unavailable():
    calls = 0

    def down() -> None:
        nonlocal calls
        calls += 1
        raise concord.Unavailable("Redis is unavailable", reason="REDIS_UNAVAILABLE")

    start = time.monotonic()
    with pytest.raises(concord.Unavailable):
        _retry.retry(down, _retry.Budget(0.3))
    assert calls >= 2 and time.monotonic() - start < 0.3 + SLACK

    def refused() -> None:  # a transport failure: no ErrorInfo, so no server answered
        nonlocal calls
        calls += 1
        raise concord.Unavailable("failed to connect to all addresses")

    calls = 0
    with pytest.raises(concord.Unavailable):
        _retry.retry(refused, _retry.Budget(30))
    assert calls == 1


def test_a_retry_that_could_not_get_as_long_as_the_failed_try_took_is_not_started():
    """Each try here takes 0.2 s to fail: with 0.3 s of budget the first retry would be
    cut off by the deadline (the caller would hear DEADLINE_EXCEEDED, not the server's
    UNAVAILABLE), so the first failure is raised instead. A call that waits in the
    server is retried anyway: its retry asks the server to wait only what is left."""
    calls = 0

    def slow_down() -> None:
        nonlocal calls
        calls += 1
        time.sleep(0.2)
        raise concord.Unavailable("not confirmed", reason="REPLICATION_TIMEOUT")

    with pytest.raises(concord.Unavailable):
        _retry.retry(slow_down, _retry.Budget(0.3))
    assert calls == 1
    calls = 0
    with pytest.raises(concord.Unavailable):
        _retry.retry(slow_down, _retry.Budget(0.3), waits=True)
    assert calls == 2


async def test_the_async_retry_needs_as_long_as_the_failed_try_took_too():
    calls = 0

    async def slow_down() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        raise concord.Unavailable("not confirmed", reason="REPLICATION_TIMEOUT")

    with pytest.raises(concord.Unavailable):
        await _retry.retry_async(slow_down, _retry.Budget(0.3))
    assert calls == 1


# Sync client against a real server and a real Redis outage.


def test_get_rides_out_a_redis_restart(outage, server, name):
    with concord.Client(server.target) as client:
        q = client.queue(name)
        task_id = q.put("job", {"n": 1})
        back = outage()
        got = q.get(timeout=3)
        back.join()
        assert [t.task_id for t in got] == [task_id]
        got[0].ack()
        assert q.stats().leased == 0


def test_lock_acquire_with_a_timeout_rides_out_a_redis_restart(outage, server, name):
    with concord.Client(server.target) as client:
        back = outage()
        lease = client.lock(name, ttl=10).acquire(timeout=3)
        back.join()
        assert lease is not None
        info = client.lock(name).describe()
        assert info.held and info.fencing_token == lease.fencing_token
        lease.release()


def test_put_with_a_dedupe_key_rides_out_a_redis_restart_and_adds_one_task(outage, server, name):
    with concord.Client(server.target) as client:
        q = client.queue(name)
        back = outage()
        task_id = q.put("job", dedupe_key="order-7")
        back.join()
        assert [t.task_id for t in q.peek()] == [task_id]


def test_send_message_is_not_retried(outage, server, name):
    # The client's timeout would leave room for retries past Redis's return.
    with concord.Client(server.target, timeout=30) as client:
        chat_id = client.chat.create("ann", ["bob"], "before")
        back = outage()
        with pytest.raises(concord.Unavailable):
            client.chat.send(chat_id, "ann", "during")
        with pytest.raises(concord.Unavailable):
            client.queue(name).put("no dedupe key")
        back.join()
        served_again(client, name)
        assert [m.body for m in client.chat.history(chat_id)] == ["before"]
        assert client.queue(name).stats().ready == 0


def test_retries_stop_at_the_callers_budget(fresh_redis, server, name):
    with concord.Client(server.target, timeout=1) as client:
        fresh_redis.kill()  # and it stays down
        for call in (client.lock(name).describe,  # budget: the client's timeout
                     lambda: client.queue(name).get(timeout=1),  # budget: its wait
                     lambda: client.lock(name, ttl=5).acquire(timeout=1)):
            start = time.monotonic()
            with pytest.raises(concord.Unavailable):
                call()
            assert time.monotonic() - start < 1 + SLACK
    fresh_redis.start()  # the server's shutdown is quick with Redis there


# The same through AsyncClient.


async def test_async_get_and_acquire_ride_out_a_redis_restart(outage, server, name):
    async with concord.AsyncClient(server.target) as client:
        q = client.queue(name)
        task_id = await q.put("job")
        back = outage()
        got = await q.get(timeout=3)
        assert [t.task_id for t in got] == [task_id]
        await got[0].ack()
        await asyncio.to_thread(back.join)

        back = outage()
        lease = await client.lock(name, ttl=10).acquire(timeout=3)
        await asyncio.to_thread(back.join)
        assert lease is not None
        await lease.release()


async def test_async_send_message_is_not_retried_and_retries_stop_at_the_budget(fresh_redis, server, name):
    async with concord.AsyncClient(server.target, timeout=1) as client:
        chat_id = await client.chat.create("ann", ["bob"], "before")
        fresh_redis.kill()  # and it stays down
        with pytest.raises(concord.Unavailable):
            await client.chat.send(chat_id, "ann", "during")
        for call in (client.lock(name).describe, lambda: client.queue(name).get(timeout=1)):
            start = time.monotonic()
            with pytest.raises(concord.Unavailable):
                await call()
            assert time.monotonic() - start < 1 + SLACK
    await asyncio.to_thread(fresh_redis.start)


# Go: an Acquire on NewClient's connection rides out a Redis restart.


@pytest.mark.timeout(240)
def test_go_lock_rides_out_a_redis_restart(fresh_redis, server, tmp_path):
    binary = tmp_path / "concord.test"
    run([go(), "test", "-c", "-o", str(binary), "."], cwd=GO_CLIENT, timeout=180)  # the package is the module root
    fresh_redis.kill()
    proc = subprocess.Popen([str(binary), "-test.run", "^TestLockRidesOutARedisRestart$", "-test.v", "-test.count=1"],
                            env={**os.environ, "CONCORD_OUTAGE_ADDR": server.target}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    back = threading.Timer(OUTAGE, fresh_redis.start)
    try:
        line = proc.stdout.readline()
        while line and line.strip() != "acquiring":
            line = proc.stdout.readline()
        assert line, "the Go test ended before acquiring"
        back.start()
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
        proc.wait()
        if back.is_alive():
            back.join()
    assert proc.returncode == 0 and "--- PASS: TestLockRidesOutARedisRestart" in out, out


async def test_a_thousand_calls_in_flight_on_one_client_all_land_once(concord_server, name):
    """More calls in flight than the server's per-connection stream cap (100): the
    server refuses some streams at the HTTP/2 layer (REFUSED_STREAM, never processed),
    and the client sends them again, even SendMessage, which is not safe to repeat once
    processed. Every call lands, each exactly once."""
    calls = 1000
    async with concord.AsyncClient(concord_server.target, timeout=60) as client:
        chat_id = await client.chat.create("a", ["b"], "first")
        ids = await asyncio.gather(*(client.chat.send(chat_id, "a", f"m{i}") for i in range(calls)))
        assert len(set(ids)) == calls
        bodies = []
        after = 0
        while page := await client.chat.history(chat_id, after=after, limit=500):
            bodies += [m.body for m in page]
            after = page[-1].message_id
        assert sorted(bodies) == sorted(["first", *(f"m{i}" for i in range(calls))])


def test_refused_means_only_an_http2_refusal():
    """The one UNAVAILABLE every call may repeat is the transport's REFUSED_STREAM."""

    class Err(grpc.RpcError):
        def __init__(self, code, details):
            self._c, self._d = code, details

        def code(self):
            return self._c

        def details(self):
            return self._d

    assert _retry.refused(Err(grpc.StatusCode.UNAVAILABLE,
                              "Stream removed (RST_STREAM (Received RST_STREAM with error code 7))"))
    assert not _retry.refused(Err(grpc.StatusCode.UNAVAILABLE, "Redis is unavailable"))
    assert not _retry.refused(Err(grpc.StatusCode.UNAVAILABLE, "Socket closed"))
    assert not _retry.refused(Err(grpc.StatusCode.CANCELLED, "Received RST_STREAM with error code 7"))

"""The web console (--console-listen), over HTTP with aiohttp's client, against a real
server with tokens of two tenants: log in with a token, tenants see only their own
locks, a read-only token is refused actions, the event stream delivers a lock taken
through the gRPC API, a force-release hands the lock to the next waiter."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import signal
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest

import concord
from console_support import Logins, snapshot
from support import ServerProcess, free_port, wait_until

ACME_ADMIN, ACME_READER, ACME_WRITER, GLOBEX_ADMIN = (
    f"console-{who}-0123456789abcdef" for who in ("acme-admin", "acme-reader", "acme-writer", "globex-admin"))
TOKENS = f"""
[[tokens]]
token = "{ACME_ADMIN}"
tenant = "acme"
role = "admin"

[[tokens]]
token = "{ACME_READER}"
tenant = "acme"
role = "read-only"

[[tokens]]
token = "{ACME_WRITER}"
tenant = "acme"

[[tokens]]
token = "{GLOBEX_ADMIN}"
tenant = "globex"
role = "admin"
"""
DEADLINE = 3.0  # seconds for a change made through the API to show in the console


@pytest.fixture(scope="module")
def console_server(redis_server, tmp_path_factory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("console")
    (folder / "tokens.toml").write_text(TOKENS)
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--auth-tokens", str(folder / "tokens.toml"),
                           "--console-listen", f"127.0.0.1:{port}", "--console-history-interval", "1s")
    server.console = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    server.start(folder / "server.log")
    yield server
    assert server.stop() == 0, server.log_text()


@pytest.fixture
async def session_of(console_server) -> AsyncIterator[Any]:
    """session_of(token): an aiohttp session logged in to the console with that token."""
    logins = Logins()
    yield lambda token: logins(console_server.console, token)
    await logins.aclose()


def _lock(snapshot: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((lock for lock in snapshot["locks"]["items"] if lock["name"] == name), None)


async def test_a_token_logs_in_with_an_http_only_strict_cookie(console_server, session_of):
    s = await session_of(None)
    async with s.get("/api/me") as r:
        assert await r.json() == {"logged_in": False, "needs_token": True}
    async with s.get("/api/snapshot") as r:
        assert r.status == 401 and (await r.json())["reason"] == "UNAUTHENTICATED"
    async with s.post("/api/login", json={"token": "not-a-token-of-this-server"}) as r:
        assert r.status == 401 and (await r.json())["reason"] == "UNAUTHENTICATED"
    async with s.post("/api/login", json={"token": ACME_READER}) as r:
        assert r.status == 200
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and re.search(r"SameSite=Strict", cookie, re.I) and "Path=/" in cookie
        assert ACME_READER not in cookie
    async with s.get("/api/me") as r:
        me = await r.json()
    assert (me["tenant"], me["role"], me["may"]) == ("acme", "read-only", {
        "list_locks": True, "force_release": False, "list_semaphores": True, "list_queues": True,
        "see_processes": False, "search_tasks": True, "list_schedules": True, "retry_dead": False,
        "delete_dead": False, "cancel": False, "purge": False, "pause_queue": False, "pause_schedule": False,
        "list_rwlocks": True, "list_elections": True, "list_chats": True, "list_indexes": True,
        "list_file_groups": True, "suggest": True, "list_limits": True, "reset_limit": False, "delete_limit": False})
    assert ACME_READER not in json.dumps(me)
    snap = await snapshot(s)
    assert snap["overview"]["redis"]["serving"] is True and "items" in snap["locks"]
    assert "processes" not in snap  # server-wide: admin tokens only
    # A form post (not JSON), as a cross-site page could send, is refused.
    async with s.post("/api/locks/force-release", data={"name": "x"}) as r:
        assert r.status == 400
    async with s.post("/api/logout", json={}) as r:
        assert r.status == 200
    async with s.get("/api/snapshot") as r:
        assert r.status == 401


async def test_a_tenant_sees_only_its_own_locks(console_server, session_of, name):
    acme, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        lease = await client.lock(name, ttl=60, owner="acme-worker").acquire()
        try:
            mine = _lock(await snapshot(acme), name)
            assert mine is not None and mine["held"] and mine["owner"] == "acme-worker"
            assert mine["fencing_token"] == lease.fencing_token and 0 < mine["ttl_ms"] <= 60_000
            assert _lock(await snapshot(globex), name) is None
            # ... and globex cannot release it either: the name is its own, and free.
            async with globex.post("/api/locks/force-release", json={"name": name}) as r:
                assert r.status == 200 and (await r.json()) == {"released": False}
            assert (await client.lock(name).describe()).fencing_token == lease.fencing_token
        finally:
            await lease.release()


async def test_a_read_only_token_is_refused_force_release(console_server, session_of, name):
    reader, writer = await session_of(ACME_READER), await session_of(ACME_WRITER)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        lease = await client.lock(name, ttl=60).acquire()
        try:
            for s in (reader, writer):  # ForceRelease needs an admin token, in the console as in the API
                async with s.post("/api/locks/force-release", json={"name": name}) as r:
                    body = await r.json()
                    assert r.status == 403, body
                    assert body["reason"] == "PERMISSION_DENIED" and body["code"] == "PERMISSION_DENIED"
            state = await client.lock(name).describe()
            assert state.held and state.fencing_token == lease.fencing_token
        finally:
            await lease.release()
    assert re.search(rf"console: tenant=acme role=read-only token=sha256:\w+ from \S+ was refused force-releasing "
                     rf"lock '{name}'", console_server.log_text())


async def test_the_event_stream_delivers_a_lock_taken_through_the_api(console_server, session_of, name):
    s = await session_of(ACME_READER)
    async with s.get("/api/events") as events:
        assert events.status == 200 and events.headers["Content-Type"].startswith("text/event-stream")
        async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
            async with client.lock(name, ttl=30, owner="streamed"):
                started = time.monotonic()
                found = await asyncio.wait_for(_first_event_with(events, name), DEADLINE)
                assert found["held"] and found["owner"] == "streamed"
                assert time.monotonic() - started < DEADLINE


async def _first_event_with(events: aiohttp.ClientResponse, name: str) -> dict[str, Any]:
    data = b""
    async for line in events.content:
        if line.startswith(b"data: "):
            data = line[6:]
        elif line == b"\n" and data:
            lock = _lock(json.loads(data), name)
            if lock is not None:
                return lock
            data = b""
    raise AssertionError("the event stream ended")


async def _snapshot_until(s: aiohttp.ClientSession, found: Any, what: str) -> Any:
    """Polls the snapshot until found(snapshot) is truthy (its value), within DEADLINE."""
    deadline = time.monotonic() + DEADLINE
    while not (value := found(await snapshot(s))):
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE} s"
        await asyncio.sleep(0.05)
    return value


async def test_the_locks_view_lists_waiters_in_fifo_order_with_how_long_each_waited(console_server, session_of,
                                                                                    name):
    acme, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        held = await client.lock(name, ttl=60, owner="holder").acquire()
        waiting = []
        try:
            for who in ("first", "second", "third"):  # each queued before the next asks
                waiting.append(asyncio.create_task(client.lock(name, ttl=60, owner=who).acquire(timeout=30)))
                n = len(waiting)
                await _snapshot_until(acme, lambda snap: (lock := _lock(snap, name)) and lock["waiters"] == n,
                                      f"{n} waiters")
            lock = _lock(await snapshot(acme), name)
            assert [w["owner"] for w in lock["queue"]] == ["first", "second", "third"]
            waited = [w["waited_ms"] for w in lock["queue"]]
            assert waited == sorted(waited, reverse=True) and 0 <= waited[-1] and waited[0] < 60_000
            assert _lock(await snapshot(globex), name) is None
        finally:
            await held.release()
            for task in waiting:
                grant = await asyncio.wait_for(task, DEADLINE)
                await grant.release()


async def test_force_release_hands_the_lock_to_the_next_waiter(console_server, session_of, name):
    admin = await session_of(ACME_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as holder_client, \
            concord.AsyncClient(console_server.target, token=ACME_WRITER) as waiter_client:
        held = await holder_client.lock(name, ttl=60, owner="stuck").acquire()
        waiting = asyncio.create_task(waiter_client.lock(name, ttl=60, owner="next").acquire(timeout=30))
        deadline = time.monotonic() + DEADLINE
        while (lock := _lock(await snapshot(admin), name)) is None or lock["waiters"] < 1:
            assert time.monotonic() < deadline, lock
            await asyncio.sleep(0.05)
        async with admin.post("/api/locks/force-release", json={"name": name}) as r:
            assert r.status == 200
            assert await r.json() == {"released": True, "owner": "stuck", "fencing_token": held.fencing_token}
        granted = await asyncio.wait_for(waiting, DEADLINE)
        assert granted is not None and granted.fencing_token > held.fencing_token
        lock = _lock(await snapshot(admin), name)
        assert lock["owner"] == "next" and lock["fencing_token"] == granted.fencing_token
        await granted.release()
    assert re.search(rf"console: tenant=acme role=admin token=sha256:\w+ from \S+ force-released lock '{name}' "
                     rf"from owner 'stuck' \(fencing token {held.fencing_token}\)", console_server.log_text())


def _named(snapshot: dict[str, Any], part: str, name: str) -> dict[str, Any] | None:
    return next((row for row in snapshot[part]["items"] if row["name"] == name), None)


async def _first_event(events: aiohttp.ClientResponse, found: Any) -> Any:
    """The first value found(snapshot) gives that is truthy, reading the event stream."""
    data = b""
    async for line in events.content:
        if line.startswith(b"data: "):
            data = line[6:]
        elif line == b"\n" and data:
            value = found(json.loads(data))
            if value:
                return value
            data = b""
    raise AssertionError("the event stream ended")


async def test_the_coordination_view_streams_semaphores_with_holders_and_waiters(console_server, session_of, name):
    acme, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with acme.get("/api/events") as events, \
            concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        first = await client.semaphore(name, limit=2, permits=2, ttl=60, owner="crawler-a").acquire()
        waiting = asyncio.create_task(client.semaphore(name, permits=1, ttl=60, owner="crawler-b").acquire(timeout=30))
        try:
            started = time.monotonic()
            sem = await asyncio.wait_for(_first_event(events, lambda snap: (row := _named(snap, "semaphores", name))
                                                      and row["waiters"] == 1 and row), DEADLINE)
            assert time.monotonic() - started < DEADLINE
            assert (sem["limit"], sem["held"], sem["holder_count"]) == (2, 2, 1)
            assert [(h["owner"], h["permits"]) for h in sem["holders"]] == [("crawler-a", 2)]
            assert 0 < sem["holders"][0]["ttl_ms"] <= 60_000
            assert _named(await snapshot(globex), "semaphores", name) is None
        finally:
            await client.semaphore(name).release(first)
            granted = await asyncio.wait_for(waiting, DEADLINE)
            await client.semaphore(name).release(granted)


async def _dead_task(client: concord.AsyncClient, queue: str, error: str) -> str:
    """A task of queue, killed at its one attempt with error; its id."""
    q = client.queue(queue)
    handle = await q.put("resize", b"payload", max_attempts=1)
    (task,) = await q.get(1, lease_ttl=30, timeout=10)
    assert task.task_id == handle.task_id
    await q.nack(task, error, retryable=False)
    return task.task_id


async def test_the_queues_view_streams_counts_by_state_and_dead_tasks_with_their_error(console_server, session_of,
                                                                                     name):
    acme, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with acme.get("/api/events") as events, \
            concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        dead_id = await _dead_task(client, name, "disk full")
        await client.queue(name).put("resize", b"later", delay=600)
        await client.queue(name).put("resize", b"now")
        started = time.monotonic()
        row = await asyncio.wait_for(_first_event(events, lambda snap: (r := _named(snap, "queues", name))
                                                  and r["ready"] == 1 and r["delayed"] == 1 and r), DEADLINE)
        assert time.monotonic() - started < DEADLINE
        assert (row["dead"], row["leased"], row["paused"]) == (1, 0, False)
        assert row["oldest_ready_age_ms"] >= 0
        assert [(t["task_id"], t["last_error"], t["type"]) for t in row["dead_tasks"]] == [(dead_id, "disk full",
                                                                                           "resize")]
        assert "payload" not in json.dumps(row)  # payloads stay out of the snapshot
        assert _named(await snapshot(globex), "queues", name) is None


async def test_retry_dead_needs_an_admin_token_and_is_logged_with_who_did_it(console_server, session_of, name):
    reader, writer, admin = await session_of(ACME_READER), await session_of(ACME_WRITER), await session_of(ACME_ADMIN)
    globex = await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        dead_id = await _dead_task(client, name, "bad input")
        for s in (reader, writer):  # RetryDead needs an admin token, in the console as in the API
            async with s.post("/api/queues/retry-dead", json={"queue": name, "task_id": dead_id}) as r:
                body = await r.json()
                assert r.status == 403 and body["reason"] == "PERMISSION_DENIED", body
        # Another tenant's admin names the task in its own tenant, where there is none.
        async with globex.post("/api/queues/retry-dead", json={"queue": name, "task_id": dead_id}) as r:
            assert r.status == 200 and await r.json() == {"retried": 0}
        assert (await client.queue(name).stats()).dead == 1
        async with admin.post("/api/queues/retry-dead", json={"queue": name, "task_id": dead_id}) as r:
            assert r.status == 200 and await r.json() == {"retried": 1}
        row = await _snapshot_until(admin, lambda snap: (q := _named(snap, "queues", name)) and q["ready"] == 1 and q,
                                    "the task ready again")
        assert row["dead"] == 0 and row["dead_tasks"] == []
        (task,) = await client.queue(name).get(1, lease_ttl=30, timeout=10)
        assert task.task_id == dead_id
        await client.queue(name).ack(task)
    log = console_server.log_text()
    assert re.search(rf"console: tenant=acme role=read-only token=sha256:\w+ from \S+ was refused retrying dead task "
                     rf"'{dead_id}' of queue '{name}'", log)
    assert re.search(rf"console: tenant=acme role=admin token=sha256:\w+ from \S+ retried dead task '{dead_id}' of "
                     rf"queue '{name}': back to ready", log)


def test_without_tokens_the_console_needs_no_login_and_its_address_is_printed(redis_server, tmp_path):
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--console-listen", f"127.0.0.1:{port}")
    server.start(tmp_path / "server.log")
    try:
        wait_until(lambda: f"web console at http://127.0.0.1:{port}/" in server.log_text(), timeout=5,
                   message="the console's address in the start-up log")

        async def check() -> None:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{port}") as s:
                async with s.get("/api/me") as r:
                    me = await r.json()
                assert me["logged_in"] and not me["needs_token"] and me["may"]["force_release"]
                async with s.get("/") as r:
                    assert r.status == 200 and "default-src 'self'" in r.headers["Content-Security-Policy"]
                    assert '<script type="module" src="/static/console.js">' in await r.text()
                for asset in ("console.js", "console.css"):
                    async with s.get(f"/static/{asset}") as r:
                        assert r.status == 200

        asyncio.run(check())
    finally:
        assert server.stop() == 0, server.log_text()


async def test_viewers_of_one_tenant_share_one_snapshot_per_interval_and_streams_are_capped():
    """live.Hub on its own (no server): however many pages watch a tenant, its snapshot
    is computed once per interval, with the parts its pages show and no others; past
    the cap a stream is refused RESOURCE_EXHAUSTED."""
    from concord_server import tenants
    from concord_server.console.live import Hub
    from concord_server.errors import ResourceExhausted

    computed: list[tuple[str | None, frozenset[str]]] = []

    async def snapshot(parts: frozenset[str]) -> dict[str, Any]:
        computed.append((tenants.current.get(), parts))  # each feed runs in its tenant
        return {"n": len(computed)}

    hub = Hub(lambda: snapshot, interval=0.2, max_streams=5)
    locks, queues = frozenset({"locks"}), frozenset({"queues"})
    async with contextlib.AsyncExitStack() as stack:
        acme = [await stack.enter_async_context(hub.subscribe("acme", parts)) for parts in (locks, locks, locks, queues)]
        globex = await stack.enter_async_context(hub.subscribe("globex", frozenset()))
        with pytest.raises(ResourceExhausted):
            await stack.enter_async_context(hub.subscribe("acme", locks))
        await asyncio.sleep(1.0)
        seen = [(await queue.get())["n"] for _, queue in acme]
        assert len(set(seen)) == 1, seen  # the same snapshot went to every acme viewer
        assert 8 <= len(computed) <= 16, computed  # about 5 per second per tenant, not per viewer
        assert {tenant for tenant, _ in computed} == {"acme", "globex"}
        assert computed[-1] in (("acme", locks | queues), ("globex", frozenset()))
        assert {parts for tenant, parts in computed if tenant == "globex"} == {frozenset()}  # the overview alone
        assert acme[0][0] is acme[3][0] and globex[0] is not acme[0][0]
    assert hub.open_streams == 0
    await hub.aclose()


async def test_a_token_removed_from_the_file_ends_its_console_session(redis_server, tmp_path):
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(TOKENS)
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--auth-tokens", str(tokens),
                           "--console-listen", f"127.0.0.1:{port}")
    server.start(tmp_path / "server.log")
    try:
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
            async with s.post("/api/login", json={"token": ACME_READER}) as r:
                assert r.status == 200
            async with s.get("/api/events") as events:
                assert (await events.content.readline()).startswith(b"retry:")
                tokens.write_text(TOKENS.replace(ACME_READER, "console-someone-else-0123456789"))
                server.signal(signal.SIGHUP)
                # The open stream ends at its next event, and the session with it.
                await asyncio.wait_for(events.content.read(), DEADLINE)
            async with s.get("/api/snapshot") as r:
                assert r.status == 401 and (await r.json())["reason"] == "UNAUTHENTICATED"
    finally:
        assert server.stop() == 0, server.log_text()

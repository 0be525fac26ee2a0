"""The console's task search and queue actions (console/queue_actions.py) over HTTP,
against the real server of tests/test_console.py (tokens of two tenants): a search
served by SearchTasks with its page token, and each action done by an admin token and
logged with who did it, refused to read-only and read-write tokens (403
PERMISSION_DENIED, logged too), never reaching another tenant."""

from __future__ import annotations

import re
from typing import Any

import aiohttp

import concord
from concord_server.console.queue_actions import MAX_SELECTED
from test_console import (ACME_ADMIN, ACME_READER, ACME_WRITER, GLOBEX_ADMIN, console_server,  # noqa: F401 (fixtures)
                          session_of)

WHO = r"console: tenant=acme role=admin token=sha256:\w+ from \S+"
REFUSED = r"console: tenant=acme role=(read-only|read-write) token=sha256:\w+ from \S+ was refused"


async def post(s: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    async with s.post(f"/api/queues/{path}", json=body) as r:
        return r.status, await r.json()


async def _dead(q: concord.AsyncQueue, error: str, type: str = "resize", payload: bytes = b"{}") -> str:
    """A task killed at its one attempt with error."""
    handle = await q.put(type, payload, max_attempts=1, priority=1000)  # taken before any ready task
    (task,) = await q.get(1, lease_ttl=30)
    assert task.task_id == handle.task_id
    await q.nack(task, error, retryable=False)
    return task.task_id


async def test_search_pages_through_the_queue_and_sees_only_the_tenants_tasks(console_server, session_of, name):
    reader, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        dead = [await _dead(q, f"disk full on node {i}") for i in range(3)]
        await q.put("resize", b'{"file": "cat.png"}')
        found, token, pages = [], "", 0
        while True:  # a read: a read-only token may search
            status, page = await post(reader, "search", {"queue": name, "error": "DISK FULL", "page_size": 1,
                                                         "page_token": token})
            assert status == 200, page
            found += [(t["task_id"], t["state"], t["last_error"]) for t in page["tasks"]]
            pages += 1
            token = page["next_page_token"]
            if not token:
                break
        assert found == [(i, "dead", f"disk full on node {n}") for n, i in enumerate(dead)] and pages >= 3
        status, page = await post(reader, "search", {"queue": name, "payload": "cat.png", "states": ["ready"]})
        assert status == 200 and [t["payload_preview"] for t in page["tasks"]] == ['{"file": "cat.png"}']
        status, page = await post(globex, "search", {"queue": name})
        assert status == 200 and page["tasks"] == [] and page["next_page_token"] == ""
        status, error = await post(reader, "search", {"queue": name, "type": "a", "type_prefix": "a"})
        assert status == 400 and (error["reason"], error["code"]) == ("INVALID_ARGUMENT", "INVALID_ARGUMENT")
        status, error = await post(reader, "search", {"queue": name, "page_token": "not-a-token"})
        assert status == 400 and "page_token" in error["message"]


async def test_retry_and_delete_dead_tasks_one_selected_and_all_matching(console_server, session_of, name):
    admin, reader, writer = await session_of(ACME_ADMIN), await session_of(ACME_READER), await session_of(ACME_WRITER)
    globex = await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        quota = [await _dead(q, f"quota exceeded #{i}") for i in range(6)]
        other = [await _dead(q, "bad input") for _ in range(2)]
        for s in (reader, writer):  # an admin token only, whatever the gRPC method's role
            for path, body in (("retry-dead", {"task_ids": quota[:2]}), ("delete-dead", {"task_ids": other}),
                               ("retry-matching", {"error": "quota"}), ("delete-matching", {"error": "bad"})):
                status, error = await post(s, path, {"queue": name, **body})
                assert status == 403 and error["reason"] == "PERMISSION_DENIED", (path, error)
        status, _ = await post(globex, "retry-matching", {"queue": name})
        assert (await q.stats()).dead == 8  # nothing changed, the other tenant's admin included

        status, reply = await post(admin, "retry-dead", {"queue": name, "task_ids": quota[:2]})
        assert status == 200 and reply == {"retried": 2}
        status, reply = await post(admin, "delete-dead", {"queue": name, "task_ids": [quota[0], other[0]]})
        assert status == 200 and reply == {"deleted": 1}  # quota[0] is ready again: left as it is, not cancelled
        assert (await q.get_task(quota[0])).state == "ready"
        status, reply = await post(admin, "retry-matching", {"queue": name, "error": "QUOTA"})
        assert status == 200 and reply["retried"] == 4 and reply["next_page_token"] == ""
        status, reply = await post(admin, "delete-matching", {"queue": name, "error": "bad input"})
        assert status == 200 and reply["deleted"] == 1
        stats = await q.stats()
        assert (stats.dead, stats.ready) == (0, 6)
        assert sorted(t.task_id for t in await q.peek("ready", 10)) == sorted(quota)
        status, error = await post(admin, "retry-dead", {"queue": name, "task_ids": ["1"] * (MAX_SELECTED + 1)})
        assert status == 400 and error["reason"] == "INVALID_ARGUMENT"
    log = console_server.log_text()
    assert re.search(rf"{REFUSED} retrying dead task 2 tasks {quota[0]}, {quota[1]} of queue '{name}'", log)
    assert re.search(rf"{WHO} retried dead task 2 tasks {quota[0]}, {quota[1]} of queue '{name}': 2 back to ready",
                     log)
    assert re.search(rf"{WHO} deleted dead task 2 tasks {quota[0]}, {other[0]} of queue '{name}': 1 deleted", log)
    assert re.search(rf"{WHO} retried 4 dead task\(s\) of queue '{name}' matching {{error='QUOTA'}}", log)
    assert re.search(rf"{WHO} deleted 1 dead task\(s\) of queue '{name}' matching {{error='bad input'}}", log)


async def test_cancel_purge_and_pause_a_queue(console_server, session_of, name):
    admin, writer = await session_of(ACME_ADMIN), await session_of(ACME_WRITER)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        doomed = await q.put("resize", b"{}", delay=600)
        for path, body in (("cancel", {"task_id": doomed}), ("purge", {}), ("pause", {"paused": True})):
            status, error = await post(writer, path, {"queue": name, **body})
            assert status == 403 and error["reason"] == "PERMISSION_DENIED", (path, error)
        status, reply = await post(admin, "cancel", {"queue": name, "task_id": doomed})
        assert status == 200 and reply == {"cancelled": True}
        assert (await q.get_task(doomed)).state == "cancelled"
        status, error = await post(admin, "cancel", {"queue": name, "task_id": doomed})
        assert status == 409 and error["reason"] == "TASK_FINISHED"
        status, reply = await post(admin, "pause", {"queue": name, "paused": True})
        assert status == 200 and reply == {"was_paused": False} and (await q.stats()).paused
        status, reply = await post(admin, "pause", {"queue": name, "paused": False})
        assert status == 200 and reply == {"was_paused": True} and not (await q.stats()).paused
        for _ in range(3):
            await q.put("resize", b"{}")
        status, reply = await post(admin, "purge", {"queue": name})
        assert status == 200 and reply == {"deleted": 3} and (await q.stats()).ready == 0
    log = console_server.log_text()
    assert re.search(rf"{REFUSED} cancelling task '{doomed}' of queue '{name}'", log)
    assert re.search(rf"{WHO} cancelled task '{doomed}' of queue '{name}'", log)
    assert re.search(rf"{WHO} paused queue '{name}' \(it was running\)", log)
    assert re.search(rf"{WHO} resumed queue '{name}' \(it was paused\)", log)
    assert re.search(rf"{WHO} purged queue '{name}': 3 ready and delayed task\(s\) deleted", log)


async def test_schedules_are_listed_and_paused_and_resumed(console_server, session_of, name):
    admin, reader = await session_of(ACME_ADMIN), await session_of(ACME_READER)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        await client.queue(name).schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin", type="report")
        status, listed = await post(reader, "schedules", {"queue": name})
        assert status == 200 and [(s["name"], s["paused"], s["when"]) for s in listed["schedules"]] == [
            ("nightly", False, "cron 30 2 * * * (Europe/Berlin)")]
        status, error = await post(reader, "schedule-pause", {"queue": name, "name": "nightly", "paused": True})
        assert status == 403 and error["reason"] == "PERMISSION_DENIED"
        status, reply = await post(admin, "schedule-pause", {"queue": name, "name": "nightly", "paused": True})
        assert status == 200 and reply["paused"] and (await client.queue(name).get_schedule("nightly")).paused
        status, reply = await post(admin, "schedule-pause", {"queue": name, "name": "nightly", "paused": False})
        assert status == 200 and not reply["paused"] and reply["next_run_ms"] > 0
        status, error = await post(admin, "schedule-pause", {"queue": name, "name": "nope", "paused": True})
        assert status == 404 and error["reason"] == "SCHEDULE_NOT_FOUND"
    log = console_server.log_text()
    assert re.search(rf"{WHO} paused schedule 'nightly' of queue '{name}'", log)
    assert re.search(rf"{WHO} resumed schedule 'nightly' of queue '{name}'", log)

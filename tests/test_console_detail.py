"""The console's detail pages over HTTP (console/queue_detail.py), against the real
server of tests/test_console.py (tokens of two tenants): a queue's page (delayed tasks
by due time, leased ones with their lease's Dequeue call and expiry, dead ones, groups,
flow control, schedules), each list paged by its score cursor; a task with its whole
event history from the queue's event stream, and what the page says once older events
were trimmed; a lock's waiters walked page by page in FIFO order, 10,000 of them;
read-only tokens may read, another tenant finds nothing, bad parameters are 400 with
the field's name."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import grpc
from google.protobuf.duration_pb2 import Duration

import concord
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.queues import LeaseRate, NewTask
from concord_server.console.queue_detail import MAX_LIST, MAX_WAITERS_PAGE
from support import async_wait_until
from test_console import ACME_ADMIN, ACME_READER, ACME_WRITER, GLOBEX_ADMIN, console_server, session_of  # noqa: F401

MASS_WAITERS = 10_000  # on one lock, through one server (ten Session streams of 1,000 acquires each)
PER_SESSION = 1000  # a Session allows 1,024 requests in flight


async def get(s: aiohttp.ClientSession, path: str, **query: Any) -> tuple[int, dict[str, Any]]:
    async with s.get(path, params={k: str(v) for k, v in query.items()}) as r:
        return r.status, await r.json()


async def test_a_queues_page_shows_its_delayed_leased_and_dead_tasks_groups_and_schedules(console_server, session_of,
                                                                                          name):
    reader, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        late = await q.put("report", b"{}", delay=900)
        soon = await q.put("report", b"{}", delay=300)
        grouped = await q.put("report", b"{}", delay=600, group="tenant-7")
        running = await q.put("resize", b"{}", priority=1000)
        (leased,) = await q.get(1, lease_ttl=60, timeout=10)
        assert leased.task_id == running.task_id
        dead = await q.put("resize", b"{}", max_attempts=1, priority=1000)
        (task,) = await q.get(1, lease_ttl=30, timeout=10)
        await q.nack(task, "disk full on node 3", retryable=False)
        async with concord.AsyncClient(console_server.target, token=ACME_ADMIN) as admin:  # policy: admin only
            await admin.queue(name).set_policy(max_leased=8, rate=LeaseRate(100, 1.0, 20))
            await admin.queue(name).set_group("tenant-7", max_leased=2, weight=3)
        await q.schedule("nightly", cron="30 2 * * *", tz="Europe/Berlin", type="report")

        status, page = await get(reader, f"/api/queues/{name}")  # a read: a read-only token may
        assert status == 200, page
        assert page["stats"] | {"oldest_ready_age_ms": 0} == {
            "ready": 0, "delayed": 3, "leased": 1, "dead": 1, "done": 0, "paused": False, "oldest_ready_age_ms": 0}
        delayed = page["delayed"]["tasks"]
        assert [t["task_id"] for t in delayed] == [soon.task_id, grouped.task_id, late.task_id]  # by due time
        assert page["delayed"]["next"] == ""
        assert 295_000 < delayed[0]["due_in_ms"] <= 300_000 and delayed[0]["ready_at_ms"] - page["now_ms"] == \
            delayed[0]["due_in_ms"]
        assert delayed[1]["group"] == "tenant-7"
        (held,) = page["leased"]["tasks"]
        assert held["task_id"] == running.task_id and re.fullmatch(r"[0-9a-f]{8}", held["worker"])
        assert held["worker"] == leased.lease[:8] and leased.lease not in str(page)  # the call, not the lease
        assert 55_000 < held["expires_in_ms"] <= 60_000 and held["attempt"] == 1
        (gone,) = page["dead"]["tasks"]
        assert (gone["task_id"], gone["last_error"]) == (dead.task_id, "disk full on node 3")
        (group,) = page["groups"]["items"]
        assert (group["name"], group["max_leased"], group["weight"], group["leased"]) == ("tenant-7", 2, 3, 0)
        assert page["policy"]["max_leased"] == 8 and page["policy"]["rate"] == {
            "count": 100, "period_ms": 1000, "burst": 20}
        assert [(s["name"], s["when"]) for s in page["schedules"]["items"]] == [
            ("nightly", "cron 30 2 * * * (Europe/Berlin)")]
        assert page["events"]["last"] >= 7 and page["events"]["first_kept"] == 1

        # Paged by score cursor, one task a page here: every delayed task once, in due order.
        walked, after = [], ""
        while True:
            status, page = await get(reader, f"/api/queues/{name}", limit=1, delayed_after=after)
            assert status == 200 and len(page["delayed"]["tasks"]) <= 1, page
            walked += [t["task_id"] for t in page["delayed"]["tasks"]]
            after = page["delayed"]["next"]
            if not after:
                break
        assert walked == [t["task_id"] for t in delayed]

        # Another tenant: no such queue. Bad parameters: 400 with the field.
        status, error = await get(globex, f"/api/queues/{name}")
        assert status == 404 and (error["code"], error["reason"]) == ("NOT_FOUND", "NOT_FOUND")
        status, error = await get(reader, f"/api/queues/{name}-nothing-here")
        assert status == 404 and error["reason"] == "NOT_FOUND"
        for query, field in (({"limit": 0}, "limit"), ({"limit": MAX_LIST + 1}, "limit"), ({"limit": "x"}, "limit"),
                             ({"delayed_after": "nonsense"}, "delayed_after"),
                             ({"dead_after": walked_token(delayed)}, "dead_after")):
            status, error = await get(reader, f"/api/queues/{name}", **query)
            assert status == 400 and (error["reason"], error["field"]) == ("INVALID_ARGUMENT", field), (query, error)


def walked_token(delayed: list[dict[str, Any]]) -> str:
    """A position in the delayed list ("2:<score>:<id>"), not the dead one."""
    t = delayed[0]
    return f"2:{t['ready_at_ms']}:{t['task_id']}"


async def test_a_tasks_page_shows_its_whole_history_and_says_when_older_events_were_trimmed(console_server,
                                                                                           session_of, name):
    reader, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with concord.AsyncClient(console_server.target, token=ACME_WRITER) as client:
        q = client.queue(name)
        handle = await q.put("resize", b'{"file": "cat.png"}')
        (task,) = await q.get(1, lease_ttl=30, timeout=10)
        await q.nack(task, "timeout talking to S3", retry_delay=0)
        (task,) = await q.get(1, lease_ttl=30, timeout=10)
        await q.ack(task, b"done")

        status, page = await get(reader, f"/api/tasks/{name}/{handle.task_id}")
        assert status == 200, page
        t = page["task"]
        assert (t["state"], t["attempt"], t["type"], t["payload_preview"], t["result_preview"]) == (
            "succeeded", 2, "resize", '{"file": "cat.png"}', "done")
        events = page["events"]
        assert events["whole"] and not events["trimmed"] and events["next_before"] == 0
        history = [(e["kind"], e["attempt"], e["error"]) for e in reversed(events["items"])]
        assert history == [("enqueued", 0, ""), ("leased", 1, ""), ("failed", 1, "timeout talking to S3"),
                           ("leased", 2, ""), ("succeeded", 2, "")]
        positions = [e["position"] for e in events["items"]]
        assert positions == sorted(positions, reverse=True)

        status, error = await get(globex, f"/api/tasks/{name}/{handle.task_id}")
        assert status == 404 and (error["code"], error["reason"]) == ("NOT_FOUND", "TASK_NOT_FOUND")
        status, error = await get(reader, f"/api/tasks/{name}/0000ffffffff")
        assert status == 404 and error["reason"] == "TASK_NOT_FOUND"
        status, error = await get(reader, f"/api/tasks/{name}/{handle.task_id}", before="-1")
        assert status == 400 and error["field"] == "before"

        # 1,300 later tasks: the stream keeps about the latest 1,000 events, so the first
        # task's are gone. One request looks at 1,000 events; the next goes on below them.
        for _ in range(2):
            await q.put_many([NewTask("filler", b"") for _ in range(650)])
        status, page = await get(reader, f"/api/tasks/{name}/{handle.task_id}")
        events = page["events"]
        assert status == 200 and events["items"] == [] and events["looked"] == 1000 and events["next_before"] > 0
        status, page = await get(reader, f"/api/tasks/{name}/{handle.task_id}", before=events["next_before"])
        events = page["events"]
        assert status == 200 and events["trimmed"] and not events["whole"] and events["next_before"] == 0
        assert events["first_kept"] > 5 and events["items"] == []


@contextlib.asynccontextmanager
async def waiting(target: str, token: str, lock: str, n: int) -> AsyncIterator[list[str]]:
    """n Acquires of lock waiting in one server, sent on Session streams (PER_SESSION
    each) from this process: owners w00000, w00001, ...; the streams are cancelled at
    the end, which gives their waits up."""
    metadata = (("authorization", f"Bearer {token}"),)
    channel = grpc.aio.insecure_channel(target)
    stub = lock_pb2_grpc.LockServiceStub(channel)
    ttl, wait = Duration(seconds=60), Duration(seconds=600)
    owners = [f"w{i:05d}" for i in range(n)]
    held = await stub.Acquire(lock_pb2.AcquireRequest(name=lock, ttl=ttl, owner="holder"), metadata=metadata)
    assert held.acquired
    calls = []
    for first in range(0, n, PER_SESSION):
        requests = [lock_pb2.SessionRequest(id=i + 1, acquire=lock_pb2.AcquireRequest(
            name=lock, ttl=ttl, wait_timeout=wait, owner=owners[i])) for i in range(first, min(first + PER_SESSION, n))]
        calls.append(stub.Session(_then_wait(requests), metadata=metadata))
    try:
        yield owners
    finally:
        for call in calls:
            call.cancel()
        await stub.Release(lock_pb2.ReleaseRequest(name=lock, lease=held.lease), metadata=metadata)
        await channel.close()


async def _then_wait(requests: list[Any]) -> AsyncIterator[Any]:
    for r in requests:
        yield r
    await asyncio.Event().wait()  # the stream stays open (half-closing would end it once answered)


async def walk(s: aiohttp.ClientSession, lock: str) -> list[dict[str, Any]]:
    """Every waiter of the lock, page after page (MAX_WAITERS_PAGE each)."""
    found, offset = [], 0
    while offset is not None:
        status, page = await get(s, f"/api/locks/{lock}/waiters", offset=offset, limit=MAX_WAITERS_PAGE)
        assert status == 200 and len(page["waiters"]) <= MAX_WAITERS_PAGE, page
        found += page["waiters"]
        offset = page["next_offset"]
    return found


async def test_ten_thousand_waiters_of_one_lock_are_walked_page_by_page_in_fifo_order(console_server, session_of,
                                                                                      redis_sync, name):
    reader, globex = await session_of(ACME_READER), await session_of(GLOBEX_ADMIN)
    async with waiting(console_server.target, ACME_WRITER, name, MASS_WAITERS) as owners:
        async def all_queued() -> bool:
            status, page = await get(reader, f"/api/locks/{name}/waiters", limit=1)
            return status == 200 and page["queued"] == MASS_WAITERS

        await async_wait_until(all_queued, timeout=120, interval=0.2, message="every waiter queued")
        found = await walk(reader, name)
        # FIFO: the order of the lock's queue in Redis (arrival time, Redis's clock), each once.
        queue_key = next(k for k in redis_sync.scan_iter(match=f"*@acme:lock:{name}}}:queue", count=1000))
        leases = redis_sync.zrange(queue_key, 0, -1)
        entries = redis_sync.hmget(queue_key.rpartition(":queue")[0] + ":waiters", leases)
        in_redis = [e.split(" ", 4)[4] for e in entries]
        assert [w["owner"] for w in found] == in_redis
        assert sorted(in_redis) == owners and [w["position"] for w in found] == list(range(MASS_WAITERS))
        since = [w["since_ms"] for w in found]
        assert since == sorted(since)
        # The snapshot still shows only the first 50; another tenant sees no waiter; bad pages are 400.
        status, page = await get(globex, f"/api/locks/{name}/waiters")
        assert status == 200 and page["queued"] == 0 and page["waiters"] == []
        for query, field in (({"limit": MAX_WAITERS_PAGE + 1}, "limit"), ({"offset": -1}, "offset")):
            status, error = await get(reader, f"/api/locks/{name}/waiters", **query)
            assert status == 400 and (error["reason"], error["field"]) == ("INVALID_ARGUMENT", field)

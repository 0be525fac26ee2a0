"""What the console keeps in Redis, against real servers: the process registry (every
process of one Redis is listed by every console; a killed one goes when its record's
TTL ends, a stopped one at once), a queue's history (grows, survives a restart of
the server, is its tenant's own), the tenant's lock activity (handoffs, deadlocks
broken), the same on a Redis Cluster, and the bounds: one sample per interval, a
bounded list, at most MAX_LISTED processes listed, at most MAX_PER_TICK queues
sampled a tick with the tenants taken in turn, one sampler at a time."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

import concord
import concord_server
from concord.errors import Deadlock
from concord_server import tenants
from concord_server.console import sampler as sampler_module
from concord_server.console.sampler import HistorySampler
from concord_server.keys import KeySpace
from concord_server.primitives.queue import NewTask, Queues
from concord_server.primitives.queue_history import QueueHistory, Sample, rates
from concord_server.process_registry import _BEAT, MAX_INDEXED, MAX_LISTED, TTL_BEATS, ProcessRegistry
from console_support import Logins, snapshot
from support import ServerProcess, async_wait_until, free_port, queue_primitive
from test_console import ACME_ADMIN, ACME_WRITER, GLOBEX_ADMIN, TOKENS

BEAT_S = 2.0  # process_registry.BEAT
DEADLINE = 10.0


def _server(redis_server, folder: Path, prefix: str, *extra: str) -> ServerProcess:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokens.toml").write_text(TOKENS)
    port = free_port()
    server = ServerProcess("--redis-url", redis_server.url, "--key-prefix", prefix, "--auth-tokens",
                           str(folder / "tokens.toml"), "--console-listen", f"127.0.0.1:{port}", *extra)
    server.console = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return server.start(folder / f"server-{port}.log")


@pytest.fixture
async def logged_in() -> AsyncIterator[Any]:
    """logged_in(server, token): an aiohttp session on the server's console."""
    logins = Logins()
    yield lambda server, token: logins(server.console, token)
    await logins.aclose()


async def _pids(s: aiohttp.ClientSession) -> set[int]:
    return {p["pid"] for p in (await snapshot(s))["processes"]["items"]}


async def _history(s: aiohttp.ClientSession, name: str) -> dict[str, Any]:
    async with s.post("/api/queues/history", json={"queues": [name]}) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_every_console_lists_every_live_process_a_killed_one_goes_after_its_ttl(redis_server, tmp_path,
                                                                                      logged_in, redis_sync):
    prefix = f"reg{uuid.uuid4().hex[:8]}"
    a = _server(redis_server, tmp_path / "a", prefix)
    b = _server(redis_server, tmp_path / "b", prefix)
    c = None
    try:
        on_a, on_b = await logged_in(a, ACME_ADMIN), await logged_in(b, ACME_ADMIN)
        both = {a.proc.pid, b.proc.pid}
        for s in (on_a, on_b):  # each console lists both processes, from the registry in Redis
            await async_wait_until(lambda s=s: _has(s, both), DEADLINE, message="both processes listed")
        processes = (await snapshot(on_b))["processes"]
        mine = {p["pid"]: p for p in processes["items"]}
        for server in (a, b):
            p = mine[server.proc.pid]
            assert p["listen"] == server.target and p["console"] == server.console.removeprefix("http://")
            assert p["version"] == concord_server.__version__ and p["state"] == "serving"
            # ok, or slow: its first beat covers its start-up, which holds the loop a while
            assert p["health"] in ("ok", "slow") and p["redis_serving"] and p["calls"]["available"]
            assert p["rss_bytes"] > 0 and p["started_at_ms"] > 0 and "loop_lag_ms" in p
            key = f"{{{prefix}#processes}}:{p['id']}"
            assert 0 < redis_sync.pttl(key) <= TTL_BEATS * BEAT_S * 1000
        assert redis_sync.zcard(f"{{{prefix}#processes}}") == 2
        # The overview's call rates are summed over the processes that count them.
        assert processes["calls"]["processes_counting"] == 2

        b_id = mine[b.proc.pid]["id"]
        b.kill()  # no goodbye: its record expires
        await async_wait_until(lambda: _has(on_a, {a.proc.pid}), TTL_BEATS * BEAT_S + DEADLINE,
                               message="the killed process gone from the list")
        assert not redis_sync.exists(f"{{{prefix}#processes}}:{b_id}")

        c = _server(redis_server, tmp_path / "c", prefix)
        await async_wait_until(lambda: _has(on_a, {a.proc.pid, c.proc.pid}), DEADLINE, message="a new process listed")
        c_id = next(p["id"] for p in (await snapshot(on_a))["processes"]["items"] if p["pid"] == c.proc.pid)
        assert c.stop() == 0, c.log_text()
        assert not redis_sync.exists(f"{{{prefix}#processes}}:{c_id}")  # a clean stop deletes its record at once
        assert redis_sync.zscore(f"{{{prefix}#processes}}", c_id) is None
    finally:
        for server in (a, b, c):
            if server is not None:
                server.stop()


async def _has(s: aiohttp.ClientSession, pids: set[int]) -> bool:
    return await _pids(s) == pids


async def test_a_queue_history_grows_survives_a_restart_and_is_its_tenant_own(redis_server, tmp_path, logged_in,
                                                                              redis_sync):
    prefix = f"hist{uuid.uuid4().hex[:8]}"
    name = f"emails-{uuid.uuid4().hex[:6]}"
    args = ("--console-history-interval", "200ms")
    server = _server(redis_server, tmp_path / "one", prefix, *args)
    try:
        async with concord.AsyncClient(server.target, token=ACME_WRITER) as client:
            for _ in range(3):
                await client.queue(name).put("send", b"x")
            acme = await logged_in(server, ACME_ADMIN)
            found = await async_wait_until(lambda: _samples_where(acme, name, lambda s: s[-1][1] == 3 and len(s) >= 2),
                                           DEADLINE, message="two samples of 3 ready tasks")
            assert found[-1][5] == 3  # enqueued: the queue's task counter
            for _ in range(2):
                await client.queue(name).put("send", b"y")
            (task,) = await client.queue(name).get(1, lease_ttl=30, timeout=10)
            await client.queue(name).ack(task)
            found = await async_wait_until(lambda: _samples_where(acme, name, lambda s: s[-1][1] == 4 and s[-1][5] == 5),
                                           DEADLINE, message="a sample after 2 more enqueued and 1 acked")
        before = found
        assert all(later[0] > earlier[0] for earlier, later in zip(before, before[1:]))  # one per interval
        # The list lives in the tenant's own key space, beside its queue.
        assert redis_sync.llen(f"{{{prefix}@acme:queue:{name}}}:series") >= len(before)
        assert not redis_sync.exists(f"{{{prefix}@globex:queue:{name}}}:series")
    finally:
        assert server.stop() == 0, server.log_text()

    again = _server(redis_server, tmp_path / "two", prefix, *args)
    try:
        acme = await logged_in(again, ACME_ADMIN)
        history = (await _history(acme, name))["queues"][name]
        assert history["samples"][:len(before)] == before  # nothing lost with the restart
        grown = await async_wait_until(lambda: _samples_where(acme, name, lambda s: len(s) > len(before)), DEADLINE,
                                       message="the history growing after the restart")
        assert grown[-1][0] > before[-1][0] and grown[-1][1] == 4
        globex = await logged_in(again, GLOBEX_ADMIN)
        theirs = await _history(globex, name)
        assert theirs["queues"][name]["samples"] == []  # the same name in another tenant: nothing
        assert all(q["name"] != name for q in (await snapshot(globex))["queues"]["items"])
    finally:
        assert again.stop() == 0, again.log_text()


async def _samples_where(s: aiohttp.ClientSession, name: str, ok: Any) -> list[list[int]] | None:
    samples = (await _history(s, name))["queues"][name]["samples"]
    return samples if samples and ok(samples) else None


async def test_lock_handoffs_and_deadlocks_broken_show_for_their_tenant_only(redis_server, tmp_path, logged_in):
    prefix = f"act{uuid.uuid4().hex[:8]}"
    server = _server(redis_server, tmp_path / "s", prefix)
    name = f"lk-{uuid.uuid4().hex[:6]}"
    try:
        async with concord.AsyncClient(server.target, token=ACME_WRITER) as one, \
                concord.AsyncClient(server.target, token=ACME_WRITER) as two:
            held = await one.lock(name, ttl=30, owner="first").acquire()
            waiting = asyncio.create_task(two.lock(name, ttl=30, owner="second").acquire(timeout=20))
            await async_wait_until(lambda: _waiters(one, name), DEADLINE, message="a waiter queued")
            await held.release()
            granted = await asyncio.wait_for(waiting, DEADLINE)  # a handoff
            await granted.release()
            # A deadlock: each holds one lock and waits for the other's.
            a = await one.lock(f"{name}-a", ttl=30, owner="alice").acquire()
            b = await two.lock(f"{name}-b", ttl=30, owner="bob").acquire()
            waits = [asyncio.create_task(one.lock(f"{name}-b", ttl=30, owner="alice").acquire(timeout=10)),
                     asyncio.create_task(two.lock(f"{name}-a", ttl=30, owner="bob").acquire(timeout=10))]
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            (victim,) = done
            assert isinstance(victim.exception(), Deadlock), victim
            # The victim lets go of the lock it holds: the other wait is handed it.
            await (b if victim is waits[1] else a).release()
            survivor = await asyncio.wait_for(waits[0] if victim is waits[1] else waits[1], DEADLINE)
            await survivor.release()
            await (a if victim is waits[1] else b).release()
        acme, globex = await logged_in(server, ACME_ADMIN), await logged_in(server, GLOBEX_ADMIN)

        async def shown() -> dict[str, Any] | None:
            activity = (await snapshot(acme))["locks"]["activity"]
            return activity if activity["handoffs_last_hour"]["lock"] >= 2 and activity["deadlocks_broken"] == 1 \
                else None

        # Two handoffs: the release's, and the lock the deadlock's victim let go, granted to the other wait.
        activity = await async_wait_until(shown, DEADLINE, message="the handoffs and the deadlock in acme's view")
        assert activity["last_deadlock_at_ms"] > 0
        theirs = (await snapshot(globex))["locks"]["activity"]
        assert theirs["deadlocks_broken"] == 0 and sum(theirs["handoffs_last_hour"].values()) == 0
    finally:
        assert server.stop() == 0, server.log_text()


async def _waiters(client: concord.AsyncClient, name: str) -> bool:
    return (await client.lock(name).describe()).waiters == 1


async def test_a_history_keeps_one_sample_per_interval_and_at_most_keep(redis_server, name):
    async with queue_primitive(redis_server.url) as queues:
        history = QueueHistory(queues._redis, queues._keys, queues.weight, keep=3)
        await queues.enqueue(name, [NewTask("t"), NewTask("t", delay_ms=600_000)])
        assert await history.sample(name, 3_600_000) is True
        assert await history.sample(name, 3_600_000) is False  # this hour has its sample
        (only,) = await history.read(name)
        assert (only.ready, only.delayed, only.leased, only.dead, only.enqueued) == (1, 1, 0, 0, 2)
        added = 0
        while added < 5:  # 5 more samples, each in its own 2 ms interval
            added += await history.sample(name, 2)
        kept = await history.read(name)
        assert len(kept) == 3 and [s.at_ms for s in kept] == sorted({s.at_ms for s in kept})
        assert await queues._redis.execute_command("PTTL", queues._keys.queue(name).series) > 0


def test_rates_in_and_out_come_from_two_samples():
    older, newer = Sample(0, 5, 1, 2, 0, 100), Sample(10_000, 3, 1, 2, 1, 130)
    came, left = rates(older, newer)
    assert (came, left) == (3.0, 3.2)  # 30 in; the live tasks fell by 2, so 32 left (1 of them dead)


async def test_the_registry_lists_at_most_max_listed_and_indexes_at_most_max_indexed(redis_server):
    async with queue_primitive(redis_server.url) as queues:
        commands, keyspace = queues._redis, queues._keys
        keys = keyspace.processes
        ids = [f"p{i:05d}" for i in range(MAX_INDEXED + 5)]
        await asyncio.gather(*(_BEAT.run(commands, [keys.index, keys.record(i)], [i, '{"pid": 1}', 60_000,
                                                                                  MAX_INDEXED, 0]) for i in ids))
        assert await commands.execute_command("ZCARD", keys.index) == MAX_INDEXED
        reader = ProcessRegistry(commands, keyspace, "reader", None, None, listen="", console=None)  # type: ignore[arg-type]
        listed = await reader.processes(limit=10 * MAX_LISTED)
        assert len(listed.records) == MAX_LISTED and listed.now_ms > 0
        assert all(r["pid"] == 1 and r["beat_ms"] <= listed.now_ms for r in listed.records)


@dataclasses.dataclass(frozen=True)
class _Parts:
    queues: Queues
    history: QueueHistory


async def test_the_sampler_takes_one_lease_and_at_most_max_per_tick_with_tenants_in_turn(redis_server, monkeypatch):
    monkeypatch.setattr(sampler_module, "MAX_PER_TICK", 3)
    async with queue_primitive(redis_server.url) as shared:
        commands, root = shared._redis, shared._keys

        def build(space: KeySpace) -> _Parts:
            q = Queues(commands, space, shared._doorbells, shared._outcomes, shared._watch_bells)
            return _Parts(q, QueueHistory(commands, space, q.weight))

        parts = tenants.route(root, build, tenanted=True)
        names = {t: [f"{t}-q1", f"{t}-q2"] for t in ("a", "b", "c")}
        for t, queues in names.items():
            token = tenants.current.set(t)
            try:
                for q in queues:
                    await parts.queues.enqueue(q, [NewTask("t")])
            finally:
                tenants.current.reset(token)
        first = HistorySampler(commands, root, "first", parts, lambda: ["a", "b", "c"], interval=3600)
        lease = [root.history_sampler]
        assert await sampler_module._LEASE.run(commands, lease, ["first", 60_000, "take"]) == 1
        assert await sampler_module._LEASE.run(commands, lease, ["second", 60_000, "take"]) == 0  # one at a time
        assert await sampler_module._LEASE.run(commands, lease, ["first", 60_000, "take"]) == 1  # renewed
        assert await first.tick() == 3
        sampled = await _sampled(commands, root, names)
        assert len(sampled) == 3  # the cap held

        for _ in range(2):  # the next ticks go on with the tenants left out, in turn
            await first.tick()
        assert await _sampled(commands, root, names) == {(t, q) for t, qs in names.items() for q in qs}
        assert await sampler_module._LEASE.run(commands, lease, ["first", 60_000, "drop"]) == 1
        assert await sampler_module._LEASE.run(commands, lease, ["second", 60_000, "take"]) == 1


async def _sampled(commands: Any, root: KeySpace, names: dict[str, list[str]]) -> set[tuple[str, str]]:
    found = set()
    for t, queues in names.items():
        for q in queues:
            if await commands.execute_command("EXISTS", root.tenant(t).queue(q).series):
                found.add((t, q))
    return found


async def test_on_a_redis_cluster_the_registry_and_the_history_work_unchanged(redis_cluster, tmp_path):
    """Each script touches one slot: the registry's keys share a tag, a queue's series is in its queue's."""
    port, name = free_port(), f"cq-{uuid.uuid4().hex[:6]}"
    server = ServerProcess("--redis-url", redis_cluster.url, "--redis-cluster", "--key-prefix",
                           f"cl{uuid.uuid4().hex[:8]}", "--console-listen", f"127.0.0.1:{port}",
                           "--console-history-interval", "200ms")
    server.start(tmp_path / "server.log")
    try:
        async with concord.AsyncClient(server.target) as client, \
                aiohttp.ClientSession(f"http://127.0.0.1:{port}") as s:  # no tokens: no login
            await client.queue(name).put("send", b"x")
            await async_wait_until(lambda: _has(s, {server.proc.pid}), DEADLINE, message="the process listed")
            samples = await async_wait_until(lambda: _samples_where(s, name, lambda found: found[-1][1] == 1),
                                             DEADLINE, message="a sample of the queue")
            assert samples[-1][5] == 1
    finally:
        assert server.stop() == 0, server.log_text()

"""Queue delay: how late a delayed task reaches a waiting worker, p50 and p99.

WORKERS workers wait in Dequeue(max_tasks 1, wait_timeout 30 s) on one queue while a
producer enqueues TASKS tasks (fewer with --quick), one every GAP s, each with a
`delay` drawn uniformly from 50-500 whole ms (the server keeps whole ms); every
implementation gets the same draws within a repetition. A worker notes when each
Dequeue reply arrives, then acks the task. All readings are time.monotonic() in the
bench process, whose one event loop runs the producer and the workers.

  lateness              Dequeue reply arrival - (Enqueue reply arrival + delay). The
                        server sets the ready time to Redis's now + delay while the
                        Enqueue is in flight, so the real ready time is a little
                        earlier: this is a lower bound, short by at most the
                        Enqueue reply's trip back (well under a millisecond here).
  lateness, Redis clock the Dequeue script's now (lease_expires_at - lease_ttl) minus
                        the task's ready_at: whole ms of the Redis clock; the part
                        of the lateness that happens before the reply leaves Redis.

Baseline in the same run: the round trip of an empty call (health Check) sent every
PROBE_GAP s from the same event loop and channel during the Concord runs, so under
the same load: one gRPC hop, the least a worker's wake-up can add.

Then the same workload on the same Valkey with the book's delayed tasks ("Redis in
Action" 6.4.2, queue_book.py): the producer ZADDs each item with score
time.time() + delay, one poller moves due items to the list (sleeping 10 ms when
none is due) and WORKERS consumers BLPOP it, all redis.asyncio coroutines in the same
event loop. Its lateness is exact: BLPOP reply - (the moment the score was computed
+ delay). Its rows use Concord's figures as their baseline.

Each implementation runs min(--reps, 3) times; rows show medians of the per-run
figures (the probe's percentiles are over all its round trips).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Awaitable, Callable

import grpc
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, percentile, redis_server
from ..report import Row, fmt
from . import Context
from . import queue_book as book
from .handoff import PROBE_GAP
from .queue_cost import ack, medians, new_task

SC = "queue-delay"
IMPLS = ("concord", "book")
LABELS = {"concord": "Concord", "book": "book (delayed zset + 10 ms poller + BLPOP)"}
# The target holds "while a worker waits": enough workers that one is free when a
# task falls due. With 4, bursts of due tasks found all of them busy acking, and
# that wait (worker capacity, not the wake-up) dominated the p99.
WORKERS = 8
GAP = 0.008
DELAY_MS = (50, 500)
LEASE_MS = 30_000
WAIT = 30.0
GRACE = 5.0  # a task not delivered this long after its time counts as lost
TARGET_P99 = 0.005

# put(i, delay) -> (key, due): enqueues task i; due is when it should be ready (monotonic).
# take() -> (key, settle) or None: one task from a worker's blocking wait; settle is
# awaited once its arrival is noted (the ack), or None.
Put = Callable[[int, float], Awaitable[tuple[str, float]]]
Take = Callable[[], Awaitable[tuple[str, Awaitable | None] | None]]


async def _deliver(put: Put, take: Take, delays: list[float]) -> dict:
    """The producer enqueues one task per delay, GAP s apart, while WORKERS workers take
    them; the lateness of each task, and how many never arrived."""
    due: dict[str, float] = {}
    arrived: dict[str, float] = {}
    all_in, stop = asyncio.Event(), asyncio.Event()

    async def worker() -> None:
        while not stop.is_set():  # also ends a worker whose cancellation redis-py swallowed
            got = await take()
            if got is None:
                continue
            key, settle = got
            arrived[key] = time.monotonic()
            if len(arrived) == len(delays):
                all_in.set()
            if settle is not None:
                await settle

    workers = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    try:
        for i, delay in enumerate(delays):
            key, ready_at = await put(i, delay)
            due[key] = ready_at
            await asyncio.sleep(GAP)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(all_in.wait(), max(due.values()) + GRACE - time.monotonic())
    finally:
        stop.set()
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    late = [arrived[k] - due[k] for k in due if k in arrived]
    return {"tasks": len(delays), "lost": len(due) - len(late), **_spread("late", late)}


def _spread(name: str, values: list[float]) -> dict:
    return {f"{name}_p50_s": percentile(values, 50), f"{name}_p99_s": percentile(values, 99),
            f"{name}_max_s": max(values, default=math.nan)}


async def _empty_call_probe(health: health_pb2_grpc.HealthStub, rtts: list[float]) -> None:
    """An empty call every PROBE_GAP s, until cancelled: its round trips go to ``rtts``."""
    check = health_pb2.HealthCheckRequest()
    while True:
        await asyncio.sleep(PROBE_GAP)
        t0 = time.monotonic()
        await health.Check(check, timeout=5)
        rtts.append(time.monotonic() - t0)


async def _concord(target: str, queue: str, delays: list[float]) -> dict:
    async with grpc.aio.insecure_channel(target) as channel:
        queues = queue_pb2_grpc.QueueServiceStub(channel)
        health = health_pb2_grpc.HealthStub(channel)
        await health.Check(health_pb2.HealthCheckRequest(), timeout=5)  # connected before the first task
        request = pb.DequeueRequest(queues=[queue], max_tasks=1, lease_ttl=duration(LEASE_MS / 1000),
                                    wait_timeout=duration(WAIT))
        redis_late: list[float] = []

        async def put(i: int, delay: float) -> tuple[str, float]:
            task = new_task(i)
            task.delay.CopyFrom(duration(delay))
            reply = await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=[task]), timeout=10)
            return reply.results[0].task_id, time.monotonic() + delay

        async def take() -> tuple[str, Awaitable] | None:
            tasks = (await queues.Dequeue(request, timeout=WAIT + 5)).tasks
            if not tasks:
                return None
            t = tasks[0]
            redis_late.append((t.lease_expires_at.ToMilliseconds() - LEASE_MS - t.ready_at.ToMilliseconds()) / 1000)
            return t.task_id, ack(queues, t)

        rtts: list[float] = []
        probe = asyncio.create_task(_empty_call_probe(health, rtts))
        try:
            result = await _deliver(put, take, delays)
        finally:
            probe.cancel()
            await asyncio.gather(probe, return_exceptions=True)
    return {**result, **_spread("redis_late", redis_late), "probe_rtts": rtts}


async def _book(port: int, queue: str, delays: list[float]) -> dict:
    conn = aioredis.Redis(host="127.0.0.1", port=port, client_name="bench")

    async def put(i: int, delay: float) -> tuple[str, float]:
        due = time.monotonic() + delay  # put_later computes time.time() + delay right away
        await book.put_later(conn, str(i), queue, "noop", [i], delay)
        return str(i), due

    async def take() -> tuple[str, None] | None:
        item = await book.take(conn, queue, 1)
        return None if item is None else (item[0], None)

    poller = asyncio.create_task(book.poll_delayed(conn))
    try:
        return await _deliver(put, take, delays)
    finally:
        poller.cancel()
        await asyncio.gather(poller, return_exceptions=True)
        await conn.aclose()


def run(ctx: Context) -> tuple[list[Row], dict]:
    n = 150 if ctx.quick else 400
    reps = min(ctx.reps, 3)
    runs: dict[str, list[dict]] = {impl: [] for impl in IMPLS}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        for rep in range(reps):
            rng = random.Random(rep)
            delays = [rng.randint(*DELAY_MS) / 1000 for _ in range(n)]
            queue = f"bench:queue-delay:{rep}"
            runs["concord"].append(asyncio.run(_concord(srv.target, queue, delays)))
            runs["book"].append(asyncio.run(_book(rds.port, queue, delays)))
    return _rows(runs), {"workers": WORKERS, "tasks": n, "gap_s": GAP, "delay_ms": DELAY_MS, "reps": reps,
                         "runs": runs}


def _rows(runs: dict[str, list[dict]]) -> list[Row]:
    probe = [x for r in runs["concord"] for x in r.pop("probe_rtts")]
    empty = {p: percentile(probe, p) for p in (50, 99)}
    c = {k: medians(runs["concord"], k) for k in ("late_p50_s", "late_p99_s", "late_max_s", "redis_late_p50_s",
                                                 "redis_late_p99_s")}
    n = runs["concord"][0]["tasks"]
    rows = [
        Row(SC, f"baseline: empty call RTT during the Concord runs (every {PROBE_GAP * 1e3:.0f} ms), p50", empty[50],
            "s", note=f"p99 {fmt(empty[99], 's')}, {len(probe)} probes"),
        Row(SC, "Concord: p50 lateness", c["late_p50_s"][0], "s", baseline=empty[50], baseline_label="empty call p50",
            runs=c["late_p50_s"][1], note=f"{n} tasks per run, {WORKERS} workers"),
        Row(SC, "Concord: p99 lateness", c["late_p99_s"][0], "s", baseline=empty[99], baseline_label="empty call p99",
            target=f"≤ {TARGET_P99 * 1e3:.0f} ms", passed=c["late_p99_s"][0] <= TARGET_P99, runs=c["late_p99_s"][1],
            note=f"max {fmt(c['late_max_s'][0], 's')}"),
        Row(SC, "Concord: p99 lateness by the Redis clock (dequeue - ready_at)", c["redis_late_p99_s"][0], "s",
            runs=c["redis_late_p99_s"][1], note=f"p50 {fmt(c['redis_late_p50_s'][0], 's')}; whole ms"),
    ]
    b = {k: medians(runs["book"], k) for k in ("late_p50_s", "late_p99_s", "late_max_s")}
    rows += [
        Row(SC, f"{LABELS['book']}: p50 lateness", b["late_p50_s"][0], "s", baseline=c["late_p50_s"][0],
            baseline_label="Concord", runs=b["late_p50_s"][1]),
        Row(SC, f"{LABELS['book']}: p99 lateness", b["late_p99_s"][0], "s", baseline=c["late_p99_s"][0],
            baseline_label="Concord", runs=b["late_p99_s"][1], note=f"max {fmt(b['late_max_s'][0], 's')}"),
    ]
    for impl in IMPLS:
        lost = sum(r["lost"] for r in runs[impl])
        if lost:
            rows.append(Row(SC, f"{LABELS[impl]}: tasks not delivered within {GRACE:.0f} s of their time", lost, "",
                            target="0", passed=False))
    return rows

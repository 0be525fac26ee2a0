"""Schedule tick lateness: how late a schedule's tick is enqueued, against how late a
delayed task reaches a worker (queue-delay's measure), on the same server.

SCHEDULES schedules (fewer with --quick), spread over QUEUES queues, each ticking
every second (`every` 1 s) for TICKS ticks, all with the same `start_at`, a whole
second: every tick of every schedule falls on the same instant, as cron schedules do
(they tick on whole seconds). Nothing consumes the tasks while they tick. Then the
schedules are deleted (their tasks stay) and every task they enqueued is read with
GetTask:

  tick lateness   enqueued_at - scheduled_at: both set by the claim script from
                  Redis's clock, whole ms. The ticker's timer, its read of what is
                  due, the plan, and the claim; not the trip to a worker.

Checked on the way (a ❌ row if not): each schedule's ticks are enqueued once each,
none missing from its first to its last, none early.

Baseline in the same run, on the same server after the schedules are gone:
queue-delay's workload and measure (queue_delay._concord: 400 tasks, 150 with
--quick, delays 50-500 ms, WORKERS workers waiting in Dequeue; lateness = Dequeue
reply arrival - (Enqueue reply arrival + delay), bench monotonic clock), whose p99
the tick p99 is compared with. Its Redis-clock lateness (the Dequeue script's now -
ready_at, whole ms, the part comparable with a tick's) is in the notes.

Each repetition (min(--reps, 3)) runs both; rows show medians of the per-run figures.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter

import grpc
import psutil

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, cpu_seconds, percentile, redis_server
from ..report import Row, fmt
from . import Context
from .queue_cost import medians
from .queue_delay import DELAY_MS, WORKERS
from .queue_delay import _concord as delayed_lateness

SC = "schedule-lateness"
SCHEDULES, QUEUES, TICKS = 20, 5, 20
QUICK = (10, 5, 10)
EVERY_MS = 1000
LEAD_S = 1.5  # the first tick is the first whole second at least this far from creation
TARGET_RATIO = 2.0  # tick p99 / delayed-task p99


def _ms(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


async def _ticks(target: str, rep: int, schedules: int, queues: int, ticks: int, ps: psutil.Process) -> dict:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = queue_pb2_grpc.QueueServiceStub(channel)
        names = [(f"bench:schedule-lateness:{rep}:{i % queues}", f"s{i}") for i in range(schedules)]
        start_ms = (math.ceil(time.time() + LEAD_S)) * 1000  # the host's clock is Redis's (same machine)
        spec = dict(every=duration(EVERY_MS / 1000), type="tick", payload=b"p",
                    start_at={"seconds": start_ms // 1000})
        for queue, name in names:
            await stub.CreateSchedule(pb.CreateScheduleRequest(queue=queue, name=name, spec=pb.ScheduleSpec(**spec)),
                                      timeout=10)
        last_ms = start_ms + (ticks - 1) * EVERY_MS
        await asyncio.sleep(max(0.0, start_ms / 1000 - time.time()))
        cpu0, t0 = cpu_seconds(ps), time.monotonic()
        await asyncio.sleep(max(0.0, last_ms / 1000 - time.time()))
        deadline = time.monotonic() + 10
        while True:  # until every schedule has enqueued its last tick (or 10 s: counted missing)
            got = await asyncio.gather(*(stub.GetSchedule(pb.GetScheduleRequest(queue=q, name=n), timeout=10)
                                         for q, n in names))
            if all(_ms(g.schedule.last_run_at) >= last_ms for g in got) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        cpu = (cpu_seconds(ps) - cpu0) / (time.monotonic() - t0)
        for queue, name in names:
            await stub.DeleteSchedule(pb.DeleteScheduleRequest(queue=queue, name=name), timeout=10)
        tasks = []
        for queue in sorted({q for q, _ in names}):
            peeked = (await stub.Peek(pb.PeekRequest(queue=queue, state=pb.TASK_STATE_READY, limit=1000),
                                      timeout=10)).tasks
            tasks += [r.task for r in await asyncio.gather(*(
                stub.GetTask(pb.GetTaskRequest(queue=queue, task_id=t.task_id), timeout=10) for t in peeked))]
            await stub.Purge(pb.PurgeRequest(queue=queue), timeout=10)
    grid = range(start_ms, last_ms + 1, EVERY_MS)
    late, bad, each = [], Counter(), []
    by_schedule: dict[tuple[str, str], list[int]] = {}
    for t in tasks:
        at, enq = _ms(t.scheduled_at), _ms(t.enqueued_at)
        bad["early"] += enq < at
        if at > last_ms:
            continue  # a tick after the last measured one, claimed before the delete
        bad["off_grid"] += at not in grid
        late.append((enq - at) / 1000)
        each.append([(at - start_ms) // EVERY_MS, t.queue.rsplit(":", 1)[1], t.schedule, enq - at])
        by_schedule.setdefault((t.queue, t.schedule), []).append(at)
    for key in names:
        got = by_schedule.get(key, [])
        bad["twice"] += len(got) - len(set(got))
        bad["missing"] += len(set(grid) - set(got))
    return {"ticks": len(late), "late_p50_s": percentile(late, 50), "late_p99_s": percentile(late, 99),
            "late_max_s": max(late, default=math.nan), "server_cpu": cpu, **bad,
            "each": sorted(each)}  # [tick number, queue number, schedule, lateness ms]


def run(ctx: Context) -> tuple[list[Row], dict]:
    schedules, queues, ticks = QUICK if ctx.quick else (SCHEDULES, QUEUES, TICKS)
    n_delayed = 150 if ctx.quick else 400
    reps = min(ctx.reps, 3)
    runs: dict[str, list[dict]] = {"ticks": [], "delayed": []}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        for rep in range(reps):
            runs["ticks"].append(asyncio.run(_ticks(srv.target, rep, schedules, queues, ticks, srv.ps)))
            rng = random.Random(rep)
            delays = [rng.randint(*DELAY_MS) / 1000 for _ in range(n_delayed)]
            delayed = asyncio.run(delayed_lateness(srv.target, f"bench:schedule-lateness:delayed:{rep}", delays))
            delayed.pop("probe_rtts")
            runs["delayed"].append(delayed)
    details = {"schedules": schedules, "queues": queues, "ticks_each": ticks, "every_ms": EVERY_MS,
               "delayed_tasks": n_delayed, "delayed_workers": WORKERS, "reps": reps, "runs": runs}
    return _rows(runs, schedules, queues), details


def _rows(runs: dict[str, list[dict]], schedules: int, queues: int) -> list[Row]:
    t = {k: medians(runs["ticks"], k) for k in ("late_p50_s", "late_p99_s", "late_max_s", "server_cpu")}
    d = {k: medians(runs["delayed"], k) for k in ("late_p50_s", "late_p99_s", "redis_late_p50_s",
                                                   "redis_late_p99_s")}
    per_run = sum(r["ticks"] for r in runs["ticks"]) // len(runs["ticks"])
    redis_clock = (f"by the Redis clock p50 {fmt(d['redis_late_p50_s'][0], 's')}, "
                   f"p99 {fmt(d['redis_late_p99_s'][0], 's')}")
    rows = [
        Row(SC, "baseline: delayed-task p99 lateness (queue-delay's measure)", d["late_p99_s"][0], "s",
            runs=d["late_p99_s"][1], note=f"p50 {fmt(d['late_p50_s'][0], 's')}; {redis_clock}"),
        Row(SC, "tick lateness (enqueued_at - scheduled_at), p50", t["late_p50_s"][0], "s", runs=t["late_p50_s"][1],
            baseline=d["late_p50_s"][0], baseline_label="delayed p50",
            note=f"{schedules} schedules on {queues} queues, every 1 s, ticks aligned; {per_run} ticks per run"),
        Row(SC, "tick lateness (enqueued_at - scheduled_at), p99", t["late_p99_s"][0], "s", runs=t["late_p99_s"][1],
            baseline=d["late_p99_s"][0], baseline_label="delayed p99", target=f"≤ {TARGET_RATIO:g}× delayed p99",
            passed=t["late_p99_s"][0] <= TARGET_RATIO * d["late_p99_s"][0],
            note=f"max {fmt(t['late_max_s'][0], 's')}; whole ms; server CPU while ticking "
                 f"{t['server_cpu'][0] * 100:.1f}%"),
    ]
    for what, label in (("twice", "ticks enqueued twice"), ("missing", "ticks missing"), ("early", "ticks early"),
                        ("off_grid", "ticks off the schedule's grid")):
        n = sum(r[what] for r in runs["ticks"])
        if n:
            rows.append(Row(SC, label, n, "", target="0", passed=False))
    return rows

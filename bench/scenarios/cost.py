"""Cost: server CPU per Acquire+Release pair, in units of an empty gRPC call.

The baseline is grpc.health.v1 Check on the same server process: the same grpc.aio
server, event loop and HTTP/2 connection, doing nothing. Anything a lock pair costs
beyond two of those is Concord's own work (validation, the Lua scripts, the Redis
round trips, building the responses).

The contended acquisition: CONTENDED_CLIENTS asyncio clients (the handoff scenario's
workload and clients, each process's clients over one lock Session stream) passing
one lock back and forth; its server CPU per acquisition is compared with the
uncontended pair's in the same repetition (issue 33: at most 1.2x). A contended
acquisition does more than a pair (it queues, is woken, and its grant is handed on
by the holder's release) and, the server being far from busy, pays its own wake-ups
instead of sharing them with 31 other calls in flight.

Server CPU is read from the kernel (psutil cpu_times, user+system, all threads)
before and after a fixed number of calls, so the bench client's own CPU is not
counted. Calls are driven with a fixed number in flight so the server is busy and
its per-call cost is not inflated by idle wake-ups. Each repetition measures the
empty call and both pair variants back to back, so slow drift hits all alike.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from functools import partial
from itertools import count

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, cpu_seconds, median, redis_server
from ..report import Row
from . import Context, handoff

TARGET_RATIO = 2.6
TARGET_CONTENDED = 1.2  # contended acquisition / uncontended pair, server CPU
IN_FLIGHT = 32
CONTENDED_CLIENTS = 8


async def _drive(n: int, call: Callable[[int], Awaitable[None]], ps) -> tuple[float, float]:
    """Runs ``call(i)`` for i in range(n) with IN_FLIGHT at a time; (server CPU s, wall s)."""
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:  # shared iterator: each i is taken by exactly one worker
            await call(i)

    cpu0, t0 = cpu_seconds(ps), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return cpu_seconds(ps) - cpu0, time.perf_counter() - t0


def _contended(target: str, ps, duration: float, rep: int) -> dict:
    """One handoff run (handoff.py's workload, no probe): server CPU per acquisition."""
    cpu0 = cpu_seconds(ps)
    r = handoff._run_once("concord", CONTENDED_CLIENTS, target, f"bench:cost:contended:{rep}", duration)
    cpu = cpu_seconds(ps) - cpu0
    n = r["acquisitions"]
    return {"n": n, "cpu_s": cpu, "wall_s": duration, "cpu_per_op_s": cpu / n if n else math.nan,
            "ops_per_s": r["acq_per_s"], "server_busy": cpu / duration, "handoffs": r["handoffs"]}


async def _measure(target: str, ps, reps: int, n_empty: int, n_pairs: int,
                   contended_s: float) -> dict[str, list[dict]]:
    channel = grpc.aio.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    locks = lock_pb2_grpc.LockServiceStub(channel)
    check = health_pb2.HealthCheckRequest()
    ttl, wait, no_wait = duration(30), duration(10), duration(0)
    names = count()  # every pair gets a fresh lock name: uncontended by construction

    async def empty(_: int) -> None:
        await health.Check(check, timeout=10)

    def pair(wait_timeout) -> Callable[[int], Awaitable[None]]:
        async def run(_: int) -> None:
            name = f"bench:cost:{next(names)}"
            got = await locks.Acquire(pb.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait_timeout), timeout=10)
            assert got.acquired, f"uncontended lock {name} was not granted"
            await locks.Release(pb.ReleaseRequest(name=name, lease=got.lease), timeout=10)
        return run

    kinds = {"empty": (empty, n_empty), "pair_wait": (pair(wait), n_pairs), "pair_try": (pair(no_wait), n_pairs)}
    try:
        return await measure_kinds(kinds, reps, ps, extra={"contended": partial(_contended, target, ps, contended_s)})
    finally:
        await channel.close()


async def measure_kinds(kinds: dict, reps: int, ps, extra: dict | None = None) -> dict[str, list[dict]]:
    """Server CPU and wall time of each kind of call ({kind: (call, n)}), interleaved
    over reps after one warm-up pass (connections, script cache, allocator). ``extra``
    ({kind: measure(rep) -> the same dict}) runs blocking measurements in the same
    rounds, in a thread."""
    extra = extra or {}
    out: dict[str, list[dict]] = {k: [] for k in (*kinds, *extra)}
    for call, n in kinds.values():
        await _drive(max(n // 5, 100), call, ps)
    for rep in range(reps):
        for kind, (call, n) in kinds.items():
            cpu, wall = await _drive(n, call, ps)
            out[kind].append({"n": n, "cpu_s": cpu, "wall_s": wall,
                              "cpu_per_op_s": cpu / n, "ops_per_s": n / wall, "server_busy": cpu / wall})
        for kind, measure in extra.items():
            out[kind].append(await asyncio.to_thread(measure, rep))
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_empty, n_pairs = (2000, 1000) if ctx.quick else (6000, 3000)
    contended_s = 2.0 if ctx.quick else 4.0
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile("cost")) as srv:
        runs = asyncio.run(_measure(srv.target, srv.ps, ctx.reps, n_empty, n_pairs, contended_s))

    def med(kind: str, key: str) -> tuple[float, list[float]]:
        values = [r[key] for r in runs[kind]]
        return median(values), values

    busy = {k: median([r["server_busy"] for r in v]) for k, v in runs.items()}
    empty_cpu, empty_cpu_runs = med("empty", "cpu_per_op_s")
    empty_rate, empty_rate_runs = med("empty", "ops_per_s")
    rows = [
        Row("cost", "empty call (health Check): server CPU/call", empty_cpu, "s", runs=empty_cpu_runs),
        Row("cost", "empty call: calls/s", empty_rate, "/s", runs=empty_rate_runs,
            note=f"server {busy['empty']:.0%} of a core"),
    ]
    for kind, label in (("pair_wait", "Acquire(wait 10s)+Release"), ("pair_try", "Acquire(try once)+Release")):
        cpu, cpu_runs = med(kind, "cpu_per_op_s")
        rate, rate_runs = med(kind, "ops_per_s")
        rows.append(Row("cost", f"{label}: server CPU/pair", cpu, "s", baseline=empty_cpu,
                        baseline_label="empty call", target=f"≤ {TARGET_RATIO}× empty",
                        passed=cpu / empty_cpu <= TARGET_RATIO, runs=cpu_runs))
        rows.append(Row("cost", f"{label}: pairs/s", rate, "/s", baseline=empty_rate, baseline_label="empty calls/s",
                        note=f"server {busy[kind]:.0%} of a core", runs=rate_runs))
    ratios = [c["cpu_per_op_s"] / p["cpu_per_op_s"] for c, p in zip(runs["contended"], runs["pair_wait"])]
    contended, contended_runs = med("contended", "cpu_per_op_s")
    pair_cpu = med("pair_wait", "cpu_per_op_s")[0]
    rows.append(Row("cost", f"contended acquisition ({CONTENDED_CLIENTS} clients handing one lock on, sessions): "
                    "server CPU/acquisition", contended, "s", baseline=pair_cpu,
                    baseline_label="uncontended Acquire(wait)+Release pair", target=f"≤ {TARGET_CONTENDED}× pair",
                    passed=median(ratios) <= TARGET_CONTENDED, runs=contended_runs,
                    note=f"ratio per rep {', '.join(f'{r:.2f}' for r in ratios)}; "
                         f"{med('contended', 'ops_per_s')[0]:,.0f} acquisitions/s, server {busy['contended']:.0%} of a core"))
    return rows, {"in_flight": IN_FLIGHT, "n_empty": n_empty, "n_pairs": n_pairs, "contended_s": contended_s,
                  "contended_clients": CONTENDED_CLIENTS, "runs": runs}

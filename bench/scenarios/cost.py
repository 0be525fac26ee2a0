"""Cost: server CPU per Acquire+Release pair, in units of an empty gRPC call.

The baseline is grpc.health.v1 Check on the same server process: the same grpc.aio
server, event loop and HTTP/2 connection, doing nothing. Anything a lock pair costs
beyond two of those is Concord's own work (validation, the Lua scripts, the Redis
round trips, building the responses).

Server CPU is read from the kernel (psutil cpu_times, user+system, all threads)
before and after a fixed number of calls, so the bench client's own CPU is not
counted. Calls are driven with a fixed number in flight so the server is busy and
its per-call cost is not inflated by idle wake-ups. Each repetition measures the
empty call and both pair variants back to back, so slow drift hits all alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from itertools import count

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, cpu_seconds, median, redis_server
from ..report import Row
from . import Context

TARGET_RATIO = 2.6
IN_FLIGHT = 32


async def _drive(n: int, call: Callable[[int], Awaitable[None]], ps) -> tuple[float, float]:
    """Runs ``call(i)`` for i in range(n) with IN_FLIGHT at a time; (server CPU s, wall s)."""
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:  # shared iterator: each i is taken by exactly one worker
            await call(i)

    cpu0, t0 = cpu_seconds(ps), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return cpu_seconds(ps) - cpu0, time.perf_counter() - t0


async def _measure(target: str, ps, reps: int, n_empty: int, n_pairs: int) -> dict[str, list[dict]]:
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
        return await measure_kinds(kinds, reps, ps)
    finally:
        await channel.close()


async def measure_kinds(kinds: dict, reps: int, ps) -> dict[str, list[dict]]:
    """Server CPU and wall time of each kind of call ({kind: (call, n)}), interleaved
    over reps after one warm-up pass (connections, script cache, allocator)."""
    out: dict[str, list[dict]] = {k: [] for k in kinds}
    for call, n in kinds.values():
        await _drive(max(n // 5, 100), call, ps)
    for _ in range(reps):
        for kind, (call, n) in kinds.items():
            cpu, wall = await _drive(n, call, ps)
            out[kind].append({"n": n, "cpu_s": cpu, "wall_s": wall,
                              "cpu_per_op_s": cpu / n, "ops_per_s": n / wall, "server_busy": cpu / wall})
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_empty, n_pairs = (2000, 1000) if ctx.quick else (6000, 3000)
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile("cost")) as srv:
        runs = asyncio.run(_measure(srv.target, srv.ps, ctx.reps, n_empty, n_pairs))

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
    return rows, {"in_flight": IN_FLIGHT, "n_empty": n_empty, "n_pairs": n_pairs, "runs": runs}

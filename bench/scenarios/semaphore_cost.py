"""Semaphore cost: server CPU per uncontended Semaphore Acquire+Release pair, in units
of an empty gRPC call.

Measured exactly as the lock's cost scenario (cost.py, whose driver it reuses): the
baseline is grpc.health.v1 Check on the same server process; server CPU is read from
the kernel (psutil, user+system, all threads) before and after a fixed number of
calls, IN_FLIGHT calls at a time on one channel; every repetition measures every
kind back to back after a warm-up, and the report shows medians.

Kinds: the empty call; a Semaphore Acquire(limit 1, permits 1)+Release pair on a
fresh name each time (never contended), with wait_timeout 10 s and with 0 (try
once); and, for reference, the lock's Acquire(wait 10 s)+Release pair in the same run.

No target was set for semaphores; the lock's (≤ 2.6 empty calls) is shown for
reference only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from itertools import count

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.semaphore.v1 import semaphore_pb2 as pb
from concord.semaphore.v1 import semaphore_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..report import Row
from . import Context
from .cost import IN_FLIGHT, TARGET_RATIO as LOCK_TARGET_RATIO, measure_kinds

SC = "semaphore-cost"


async def _measure(target: str, ps, reps: int, n_empty: int, n_pairs: int) -> dict[str, list[dict]]:
    channel = grpc.aio.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    sems = semaphore_pb2_grpc.SemaphoreServiceStub(channel)
    locks = lock_pb2_grpc.LockServiceStub(channel)
    check = health_pb2.HealthCheckRequest()
    ttl, wait, no_wait = duration(30), duration(10), duration(0)
    names = count()  # every pair gets a fresh name: uncontended by construction

    async def empty(_: int) -> None:
        await health.Check(check, timeout=10)

    def sem_pair(wait_timeout) -> Callable[[int], Awaitable[None]]:
        async def run(_: int) -> None:
            name = f"bench:semcost:{next(names)}"
            got = await sems.Acquire(pb.AcquireRequest(name=name, limit=1, permits=1, ttl=ttl,
                                                       wait_timeout=wait_timeout), timeout=10)
            assert got.acquired, f"uncontended semaphore {name} was not granted"
            await sems.Release(pb.ReleaseRequest(name=name, permit_id=got.permit_id), timeout=10)
        return run

    async def lock_pair(_: int) -> None:
        name = f"bench:semcost:lock:{next(names)}"
        got = await locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait), timeout=10)
        assert got.acquired, f"uncontended lock {name} was not granted"
        await locks.Release(lock_pb2.ReleaseRequest(name=name, lease=got.lease), timeout=10)

    kinds = {"empty": (empty, n_empty), "sem_wait": (sem_pair(wait), n_pairs), "sem_try": (sem_pair(no_wait), n_pairs),
             "lock_wait": (lock_pair, n_pairs)}
    try:
        return await measure_kinds(kinds, reps, ps)
    finally:
        await channel.close()


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_empty, n_pairs = (2000, 1000) if ctx.quick else (6000, 3000)
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        runs = asyncio.run(_measure(srv.target, srv.ps, ctx.reps, n_empty, n_pairs))

    def med(kind: str, key: str) -> tuple[float, list[float]]:
        values = [r[key] for r in runs[kind]]
        return median(values), values

    busy = {k: median([r["server_busy"] for r in v]) for k, v in runs.items()}
    empty_cpu, empty_cpu_runs = med("empty", "cpu_per_op_s")
    empty_rate, empty_rate_runs = med("empty", "ops_per_s")
    lock_cpu, lock_cpu_runs = med("lock_wait", "cpu_per_op_s")
    rows = [
        Row(SC, "empty call (health Check): server CPU/call", empty_cpu, "s", runs=empty_cpu_runs),
        Row(SC, "empty call: calls/s", empty_rate, "/s", runs=empty_rate_runs,
            note=f"server {busy['empty']:.0%} of a core"),
    ]
    for kind, label in (("sem_wait", "Semaphore Acquire(wait 10s)+Release"),
                        ("sem_try", "Semaphore Acquire(try once)+Release")):
        cpu, cpu_runs = med(kind, "cpu_per_op_s")
        rate, rate_runs = med(kind, "ops_per_s")
        rows.append(Row(SC, f"{label}: server CPU/pair", cpu, "s", baseline=empty_cpu, baseline_label="empty call",
                        target=f"none (lock's: ≤ {LOCK_TARGET_RATIO}×, for reference)", runs=cpu_runs,
                        note=f"{cpu / lock_cpu:.2f}× the lock pair"))
        rows.append(Row(SC, f"{label}: pairs/s", rate, "/s", baseline=empty_rate, baseline_label="empty calls/s",
                        note=f"server {busy[kind]:.0%} of a core", runs=rate_runs))
    rows.append(Row(SC, "reference: Lock Acquire(wait 10s)+Release: server CPU/pair", lock_cpu, "s",
                    baseline=empty_cpu, baseline_label="empty call", runs=lock_cpu_runs,
                    note=f"server {busy['lock_wait']:.0%} of a core"))
    return rows, {"in_flight": IN_FLIGHT, "n_empty": n_empty, "n_pairs": n_pairs, "runs": runs}

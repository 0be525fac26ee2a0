"""Read-write lock cost: read-lock Acquire+Release pairs per second and server CPU per
pair, against the plain lock's Acquire+Release pair in the same run.

Measured exactly as the lock's cost scenario (cost.py, whose driver it reuses): server
CPU is read from the kernel (psutil, user+system, all threads) before and after a fixed
number of pairs, IN_FLIGHT pairs at a time on one channel; every repetition measures
every kind back to back after a warm-up, and the report shows medians over the
repetitions, and the ratios of those medians to the lock pair's.

Kinds, all with wait_timeout 10 s and a 30 s TTL: a read-lock pair on a fresh name each
time (never contended: the free path, one script per call); a read-lock pair on one
name that every pair in flight shares (readers share, so nobody waits, but the holders
zset holds up to IN_FLIGHT readers); a write-lock pair on a fresh name; the plain lock's
pair on a fresh name; and the empty call (health Check) as the unit.

No target is set; the ratio to the lock pair is the figure to watch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from itertools import count

import grpc
from concord._convert import duration
from concord.lock.v1 import lock_pb2, lock_pb2_grpc
from concord.rwlock.v1 import rwlock_pb2 as pb
from concord.rwlock.v1 import rwlock_pb2_grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..report import Row
from . import Context
from .cost import IN_FLIGHT, measure_kinds

SC = "rwlock-cost"


async def _measure(target: str, ps, reps: int, n_empty: int, n_pairs: int) -> dict[str, list[dict]]:
    channel = grpc.aio.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    rw = rwlock_pb2_grpc.ReadWriteLockServiceStub(channel)
    locks = lock_pb2_grpc.LockServiceStub(channel)
    check = health_pb2.HealthCheckRequest()
    ttl, wait = duration(30), duration(10)
    names = count()  # a fresh name per pair: uncontended by construction

    async def empty(_: int) -> None:
        await health.Check(check, timeout=10)

    def rw_pair(mode: int, shared: bool) -> Callable[[int], Awaitable[None]]:
        async def run(_: int) -> None:
            name = "bench:rwcost:shared" if shared else f"bench:rwcost:{next(names)}"
            got = await rw.Acquire(pb.AcquireRequest(name=name, mode=mode, ttl=ttl, wait_timeout=wait), timeout=10)
            assert got.acquired, f"read-write lock {name} was not granted"
            await rw.Release(pb.ReleaseRequest(name=name, lease=got.lease), timeout=10)
        return run

    async def lock_pair(_: int) -> None:
        name = f"bench:rwcost:lock:{next(names)}"
        got = await locks.Acquire(lock_pb2.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait), timeout=10)
        assert got.acquired, f"uncontended lock {name} was not granted"
        await locks.Release(lock_pb2.ReleaseRequest(name=name, lease=got.lease), timeout=10)

    kinds = {"empty": (empty, n_empty), "lock": (lock_pair, n_pairs), "read": (rw_pair(pb.MODE_READ, False), n_pairs),
             "read_shared": (rw_pair(pb.MODE_READ, True), n_pairs), "write": (rw_pair(pb.MODE_WRITE, False), n_pairs)}
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
    lock_cpu, lock_cpu_runs = med("lock", "cpu_per_op_s")
    lock_rate, lock_rate_runs = med("lock", "ops_per_s")
    rows = [
        Row(SC, "empty call (health Check): server CPU/call", empty_cpu, "s", runs=empty_cpu_runs),
        Row(SC, "Lock Acquire(wait 10s)+Release: pairs/s", lock_rate, "/s", runs=lock_rate_runs,
            note=f"server {busy['lock']:.0%} of a core"),
        Row(SC, "Lock Acquire(wait 10s)+Release: server CPU/pair", lock_cpu, "s", baseline=empty_cpu,
            baseline_label="empty call", runs=lock_cpu_runs),
    ]
    for kind, label in (("read", "RW read Acquire(wait 10s)+Release, fresh name"),
                        ("read_shared", "RW read Acquire(wait 10s)+Release, one shared name"),
                        ("write", "RW write Acquire(wait 10s)+Release, fresh name")):
        rate, rate_runs = med(kind, "ops_per_s")
        cpu, cpu_runs = med(kind, "cpu_per_op_s")
        rows.append(Row(SC, f"{label}: pairs/s", rate, "/s", baseline=lock_rate, baseline_label="lock pairs/s",
                        runs=rate_runs, note=f"server {busy[kind]:.0%} of a core"))
        rows.append(Row(SC, f"{label}: server CPU/pair", cpu, "s", baseline=lock_cpu, baseline_label="lock pair",
                        runs=cpu_runs, note=f"{cpu / empty_cpu:.2f}× the empty call"))
    return rows, {"in_flight": IN_FLIGHT, "n_empty": n_empty, "n_pairs": n_pairs, "runs": runs}

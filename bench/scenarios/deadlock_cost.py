"""Deadlock detection's cost: the lock cost scenario (cost.py's driver) with every
caller naming itself (an owner label, which is what turns detection on for a wait),
on a server that looks for deadlocks (the default) and on one started with
--no-deadlock-detection, both running on the same Redis, measured in turns.

Kinds, IN_FLIGHT pairs at a time: the uncontended pair of the cost scenario (a fresh
name each time: nobody waits, so detection never runs) and a contended pair (every
pair in flight on one of four names: most acquires queue; a wait still queued after
deadlocks.FIRST_LOOK writes the wait-for registry, walks it, and clears it at the end).
Cost per pair is server CPU plus Redis CPU (both read from the kernel), since the
walk is Redis work as much as the server's.

Target: detection on costs at most 1.10x off on the lock cost scenario (the
uncontended pair), the rule by which it may be on by default; the contended ratio is
reported beside it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from itertools import count

import grpc
import psutil

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..report import Row
from . import Context
from .cost import IN_FLIGHT, measure_kinds

SC = "deadlock-cost"
TARGET = 1.10
CONTENDED_NAMES = 4


class _Both:
    """Server + Redis CPU, for cost.measure_kinds's ``ps``."""

    def __init__(self, *procs: psutil.Process) -> None:
        self.procs = procs

    def cpu_times(self):
        user = sum(p.cpu_times().user for p in self.procs)
        system = sum(p.cpu_times().system for p in self.procs)
        return type("T", (), {"user": user, "system": system})()


async def _measure(target: str, ps, reps: int, n_pairs: int) -> dict[str, list[dict]]:
    channel = grpc.aio.insecure_channel(target)
    locks = lock_pb2_grpc.LockServiceStub(channel)
    ttl, wait = duration(30), duration(10)
    names = count()

    def pair(contended: bool) -> Callable[[int], Awaitable[None]]:
        async def run(i: int) -> None:
            name = f"bench:dl:{i % CONTENDED_NAMES}" if contended else f"bench:dl:{next(names)}"
            got = await locks.Acquire(pb.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait, owner=f"w{i}"),
                                      timeout=10)
            assert got.acquired, f"lock {name} was not granted"
            await locks.Release(pb.ReleaseRequest(name=name, lease=got.lease), timeout=10)
        return run

    try:
        return await measure_kinds({"free": (pair(False), n_pairs), "contended": (pair(True), n_pairs)}, reps, ps)
    finally:
        await channel.close()


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_pairs = 1000 if ctx.quick else 3000
    runs: dict[str, dict] = {"on": {}, "off": {}}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp) as on, \
            concord_server(rds.url, ctx.tmp, extra_args=("--no-deadlock-detection",)) as off:
        rps = psutil.Process(rds.proc.pid)
        for _ in range(ctx.reps):  # alternated, so drift hits both alike
            for mode, srv in (("on", on), ("off", off)):
                for kind, values in asyncio.run(_measure(srv.target, _Both(srv.ps, rps), 1, n_pairs)).items():
                    runs[mode].setdefault(kind, []).extend(values)

    def med(mode: str, kind: str, key: str) -> tuple[float, list[float]]:
        values = [r[key] for r in runs[mode][kind]]
        return median(values), values

    rows = []
    for kind, label in (("free", "uncontended pair (the cost scenario)"), ("contended", "contended pair")):
        off, _ = med("off", kind, "cpu_per_op_s")
        on, on_runs = med("on", kind, "cpu_per_op_s")
        rate_off, _ = med("off", kind, "ops_per_s")
        rate_on, rate_runs = med("on", kind, "ops_per_s")
        check = kind == "free"
        rows.append(Row(SC, f"{label}, owners set: server+Redis CPU/pair, detection on", on, "s", baseline=off,
                        baseline_label="detection off", target=f"≤ {TARGET}× off" if check else "",
                        passed=on / off <= TARGET if check else None, runs=on_runs))
        rows.append(Row(SC, f"{label}: pairs/s, detection on", rate_on, "/s", baseline=rate_off,
                        baseline_label="detection off", runs=rate_runs))
    return rows, {"in_flight": IN_FLIGHT, "n_pairs": n_pairs, "runs": runs}

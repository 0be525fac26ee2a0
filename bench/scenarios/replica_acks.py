"""Replica acks: what --redis-replica-acks 1 costs, against the same run without.

One Valkey primary and one replica on this machine; two concord-servers on the
primary, one with ``--redis-replica-acks 1`` and one without. For each: server CPU
per uncontended Acquire+Release pair with IN_FLIGHT pairs in flight (cost.py's
driver; the empty call is the unit), and the p50 latency of one pair at a time. The
targets (issue 31): CPU per pair ≤ 1.3× and p50 ≤ 1.5× the server without acks,
thanks to one WAIT per batch rather than per command.
"""

from __future__ import annotations

import asyncio
import time
from itertools import count

import grpc

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..report import Row
from . import Context
from .cost import measure_kinds

SC = "replica-acks"
CPU_TARGET, P50_TARGET = 1.3, 1.5


async def _pairs(target: str, ps, reps: int, n: int, n_sequential: int) -> dict:
    channel = grpc.aio.insecure_channel(target)
    locks = lock_pb2_grpc.LockServiceStub(channel)
    ttl, wait = duration(30), duration(10)
    names = count()

    async def pair(_: int) -> None:
        name = f"bench:acks:{next(names)}"
        got = await locks.Acquire(pb.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait), timeout=10)
        assert got.acquired
        await locks.Release(pb.ReleaseRequest(name=name, lease=got.lease), timeout=10)

    try:
        runs = (await measure_kinds({"pair": (pair, n)}, reps, ps))["pair"]
        latencies = []
        for i in range(n_sequential):
            t0 = time.perf_counter()
            await pair(i)
            latencies.append(time.perf_counter() - t0)
        return {"cpu_per_pair": [r["cpu_per_op_s"] for r in runs], "p50": median(latencies)}
    finally:
        await channel.close()


def run(ctx: Context) -> tuple[list[Row], dict]:
    n, n_seq = (500, 200) if ctx.quick else (2000, 1000)
    results: dict[str, dict] = {}
    with redis_server(ctx.tmp) as primary, redis_server(ctx.tmp, "--replicaof", "127.0.0.1", str(primary.port)):
        with concord_server(primary.url, ctx.tmp) as off, \
                concord_server(primary.url, ctx.tmp, extra_args=("--redis-replica-acks", "1")) as on:
            for label, srv in (("off", off), ("on", on), ("off2", off), ("on2", on)):  # interleaved against drift
                got = asyncio.run(_pairs(srv.target, srv.ps, max(1, ctx.reps // 2), n, n_seq))
                key = label.rstrip("2")
                results.setdefault(key, {"cpu_per_pair": [], "p50": []})
                results[key]["cpu_per_pair"] += got["cpu_per_pair"]
                results[key]["p50"].append(got["p50"])
    cpu_off, cpu_on = median(results["off"]["cpu_per_pair"]), median(results["on"]["cpu_per_pair"])
    p50_off, p50_on = median(results["off"]["p50"]), median(results["on"]["p50"])
    rows = [
        Row(SC, "Acquire+Release with 1 replica ack: server CPU/pair", cpu_on, "s", baseline=cpu_off,
            baseline_label="same, acks off", target=f"≤ {CPU_TARGET}×", passed=cpu_on / cpu_off <= CPU_TARGET,
            runs=results["on"]["cpu_per_pair"]),
        Row(SC, "Acquire+Release with 1 replica ack: p50, one at a time", p50_on, "s", baseline=p50_off,
            baseline_label="same, acks off", target=f"≤ {P50_TARGET}×", passed=p50_on / p50_off <= P50_TARGET,
            runs=results["on"]["p50"]),
    ]
    return rows, {"results": results}

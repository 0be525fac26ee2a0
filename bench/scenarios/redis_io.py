"""Redis I/O: the CPU the server's process spends per Redis command, by connection layer.

The server's commands come from many concurrent calls at once. Two ways to carry
them are measured side by side in one process, under uvloop as the server runs,
against one Valkey:

- ``autopipeline``: Concord's AutoPipeline over one link.Link (commands of one
  event-loop turn leave in one write; one reader hands replies back in order);
- ``redis-py pool``: redis.asyncio.Redis over a BlockingConnectionPool of 16
  connections with the hiredis parser, each command checking a connection out
  (what Concord would use without its own pipeline; redis-py's Pipeline batches one
  caller's commands, not many callers', so it does not fit this traffic).

Each does the same EVALSHA (a one-line INCR script, so Redis's own time is small)
with IN_FLIGHT commands outstanding; CPU is this process's (time.process_time), so
it counts the client side only. Repetitions alternate the two.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis
import uvloop

from concord_server.store.autopipeline import AutoPipeline
from concord_server.store.link import Endpoint

from ..harness import median, redis_server
from ..report import Row
from . import Context

IN_FLIGHT = 64
SCRIPT = "return redis.call('INCR', KEYS[1])"


async def _drive(n: int, call: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    numbers = iter(range(n))

    async def worker() -> None:
        for i in numbers:
            await call(i)

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return time.process_time() - cpu0, time.perf_counter() - t0


async def _measure(url: str, reps: int, n: int) -> dict[str, list[dict]]:
    pipe = AutoPipeline(Endpoint.from_url(url))
    pool = aioredis.Redis(connection_pool=aioredis.BlockingConnectionPool.from_url(url, max_connections=16))
    sha = await pipe.execute_command("SCRIPT", "LOAD", SCRIPT)

    async def via_pipe(i: int) -> object:
        return await pipe.execute_command("EVALSHA", sha, 1, f"bench:io:{i % 64}")

    async def via_pool(i: int) -> object:
        return await pool.execute_command("EVALSHA", sha, 1, f"bench:io:{i % 64}")

    kinds = {"autopipeline": via_pipe, "redis-py pool": via_pool}
    out: dict[str, list[dict]] = {k: [] for k in kinds}
    try:
        for call in kinds.values():  # warm-up: connections, allocator
            await _drive(max(n // 5, 500), call)
        for _ in range(reps):
            for kind, call in kinds.items():
                cpu, wall = await _drive(n, call)
                out[kind].append({"n": n, "cpu_per_op_s": cpu / n, "ops_per_s": n / wall})
    finally:
        await pipe.aclose()
        await pool.aclose()
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    n = 20_000 if ctx.quick else 60_000
    with redis_server(ctx.tmp) as rds:
        runs = uvloop.run(_measure(rds.url, ctx.reps, n))
    cpu = {k: median([r["cpu_per_op_s"] for r in v]) for k, v in runs.items()}
    rate = {k: median([r["ops_per_s"] for r in v]) for k, v in runs.items()}
    rows = [
        Row("redis-io", "redis-py pool (16 connections): client CPU/command", cpu["redis-py pool"], "s",
            runs=[r["cpu_per_op_s"] for r in runs["redis-py pool"]],
            note=f"{rate['redis-py pool']:,.0f} commands/s"),
        Row("redis-io", "autopipeline (one Link): client CPU/command", cpu["autopipeline"], "s",
            baseline=cpu["redis-py pool"], baseline_label="redis-py pool", target="≤ 1× redis-py pool",
            passed=cpu["autopipeline"] <= cpu["redis-py pool"], runs=[r["cpu_per_op_s"] for r in runs["autopipeline"]],
            note=f"{rate['autopipeline']:,.0f} commands/s"),
    ]
    return rows, {"in_flight": IN_FLIGHT, "n": n, "runs": runs}

"""Scale: thousands of Acquire calls blocked on one lock in one server process.

One holder takes the lock; WAITERS more Acquire calls queue behind it with a long
wait_timeout, all from this process over CHANNELS gRPC channels. Once Describe
counts every one of them as queued, the figures are:

  Redis connections  the server's own connections in CLIENT LIST (the bench's carry
                     the name "bench" and are left out), peak over the whole scenario
  server RSS         peak while they wait and while the lock passes through them
  pass time          from the holder's release until every waiter has acquired and
                     released in turn (each releases the moment it gets the lock)

Baselines from the same run: the server's connections and RSS before any waiter
arrived, and how long the same number of back-to-back uncontended Acquire+Release
pairs take one client (so "pass time" reads as a cost per handoff).
"""

from __future__ import annotations

import asyncio
import resource
import time

import grpc
import redis.asyncio as aioredis

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, cpu_seconds, redis_server, rss_bytes
from ..report import Row
from . import Context

CHANNELS = 8
TARGET_CONNECTIONS = 16
LOCK = "bench:scale"
WAIT_S = 600.0  # longer than the whole scenario: nobody may give up


class Sampler:
    """Polls the server's Redis connections and RSS every ``period`` s, keeping peaks."""

    def __init__(self, redis: aioredis.Redis, ps, period: float = 0.1) -> None:
        self.redis, self.ps, self.period = redis, ps, period
        self.peak_conns = 0
        self.peak_rss = 0

    async def sample(self) -> tuple[int, int]:
        clients = await self.redis.client_list()
        conns = sum(1 for c in clients if c.get("name") != "bench")
        rss = rss_bytes(self.ps)
        self.peak_conns, self.peak_rss = max(self.peak_conns, conns), max(self.peak_rss, rss)
        return conns, rss

    async def run(self) -> None:
        while True:
            await self.sample()
            await asyncio.sleep(self.period)


async def _waiters_queued(stub) -> int:
    return (await stub.Describe(pb.DescribeRequest(name=LOCK), timeout=30)).waiters


async def _until(predicate, timeout: float, what: str) -> float:
    """Polls an async predicate; returns the seconds it took."""
    t0 = time.monotonic()
    while not await predicate():
        if time.monotonic() - t0 > timeout:
            raise RuntimeError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.1)
    return time.monotonic() - t0


async def _sequential_pairs(stub, n: int) -> float:
    """Seconds for n uncontended Acquire+Release pairs, one at a time."""
    ttl = duration(30)
    t0 = time.monotonic()
    for i in range(n):
        got = await stub.Acquire(pb.AcquireRequest(name=f"bench:scale:seq:{i}", ttl=ttl), timeout=10)
        await stub.Release(pb.ReleaseRequest(name=f"bench:scale:seq:{i}", lease=got.lease), timeout=10)
    return time.monotonic() - t0


async def _measure(target: str, redis_url: str, ps, n: int) -> dict:
    bench_redis = aioredis.Redis.from_url(redis_url, client_name="bench", decode_responses=True)
    channels = [grpc.aio.insecure_channel(target) for _ in range(CHANNELS)]
    stubs = [lock_pb2_grpc.LockServiceStub(c) for c in channels]
    sampler = Sampler(bench_redis, ps)
    sampling: asyncio.Task | None = None
    waiters: list[asyncio.Task] = []
    try:
        main = stubs[0]
        seq_n = min(n, 1000)
        seq_s = await _sequential_pairs(main, seq_n)
        idle_conns, idle_rss = await sampler.sample()
        sampling = asyncio.create_task(sampler.run())

        holder = await main.Acquire(pb.AcquireRequest(name=LOCK, ttl=duration(WAIT_S)), timeout=10)
        assert holder.acquired
        ttl, wait = duration(60), duration(WAIT_S)
        grants: list[tuple[float, int]] = []

        async def waiter(i: int) -> None:
            stub = stubs[i % CHANNELS]
            got = await stub.Acquire(pb.AcquireRequest(name=LOCK, ttl=ttl, wait_timeout=wait), timeout=WAIT_S + 30)
            if not got.acquired:
                raise RuntimeError("a waiter was not granted the lock")
            grants.append((time.monotonic(), got.fencing_token))
            await stub.Release(pb.ReleaseRequest(name=LOCK, lease=got.lease), timeout=30)

        t0 = time.monotonic()
        waiters = [asyncio.create_task(waiter(i)) for i in range(n)]
        enqueue_s = await _until(lambda: _queued_all(main, n, waiters), timeout=300, what=f"{n} queued waiters")
        cpu0 = cpu_seconds(ps)
        await asyncio.sleep(2.0)  # what do n blocked calls cost while nothing happens?
        blocked_cpu = (cpu_seconds(ps) - cpu0) / 2.0
        blocked_conns, blocked_rss = await sampler.sample()
        fds, threads = ps.num_fds(), ps.num_threads()

        t_release = time.monotonic()
        await main.Release(pb.ReleaseRequest(name=LOCK, lease=holder.lease), timeout=10)
        await asyncio.wait_for(asyncio.gather(*waiters), timeout=600)
        pass_s = time.monotonic() - t_release
        await sampler.sample()
        fences = [f for _, f in sorted(grants)]
        return {
            "waiters": n, "channels": CHANNELS, "setup_s": time.monotonic() - t0 - pass_s,
            "enqueue_s": enqueue_s, "sequential_pairs": seq_n, "sequential_s": seq_s,
            "idle_conns": idle_conns, "idle_rss": idle_rss, "blocked_conns": blocked_conns,
            "blocked_rss": blocked_rss, "peak_conns": sampler.peak_conns, "peak_rss": sampler.peak_rss,
            "blocked_server_cpu_busy": blocked_cpu, "server_fds": fds, "server_threads": threads,
            "server_rlimit_nofile": list(ps.rlimit(resource.RLIMIT_NOFILE)),
            "pass_s": pass_s, "granted": len(grants), "fences_increasing": fences == sorted(set(fences)),
        }
    finally:
        if sampling is not None:
            sampling.cancel()
        for t in waiters:
            t.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        for c in channels:
            await c.close()
        await bench_redis.aclose()


async def _queued_all(stub, n: int, tasks: list[asyncio.Task]) -> bool:
    for t in tasks:
        if t.done() and t.exception() is not None:
            raise t.exception()
    return await _waiters_queued(stub) >= n


def run(ctx: Context) -> tuple[list[Row], dict]:
    n = 2000 if ctx.quick else 10_000
    # One repetition: a 10k queue is the slowest thing the bench does, and the figures
    # it yields (connections, RSS) are counts, not noisy timings.
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile("scale")) as srv:
        d = asyncio.run(_measure(srv.target, rds.url, srv.ps, n))
    sc = f"scale {n:,} blocked"
    per_pair = d["sequential_s"] / d["sequential_pairs"]
    rows = [
        Row(sc, "server's Redis connections (peak)", d["peak_conns"], "", baseline=d["idle_conns"],
            baseline_label="idle server", target=f"≤ {TARGET_CONNECTIONS}",
            passed=d["peak_conns"] <= TARGET_CONNECTIONS),
        Row(sc, "server RSS (peak)", d["peak_rss"], "B", baseline=d["idle_rss"], baseline_label="idle server",
            note=f"{(d['blocked_rss'] - d['idle_rss']) / n / 1024:.1f} KiB per blocked call"),
        Row(sc, "server CPU while all are blocked", d["blocked_server_cpu_busy"] * 100, "%",
            note=f"{d['server_fds']} fds, {d['server_threads']} threads"),
        Row(sc, f"time to pass the lock through all {n:,}", d["pass_s"], "s", baseline=per_pair * n,
            baseline_label=f"{n:,} sequential uncontended pairs",
            note=f"{n / d['pass_s']:,.0f} handoffs/s, {d['granted']:,} granted, fences increasing: "
                 f"{'yes' if d['fences_increasing'] else 'NO'}"),
        Row(sc, f"time to queue all {n:,}", d["enqueue_s"], "s"),
    ]
    if d["granted"] != n or not d["fences_increasing"]:
        rows.append(Row(sc, "every waiter granted once, in fencing order", d["granted"], "", target=f"{n}",
                        passed=False))
    return rows, d

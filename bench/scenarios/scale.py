"""Scale: thousands of Acquire calls blocked on one lock in one server process.

One holder takes the lock; WAITERS more Acquire calls queue behind it with a long
wait_timeout, all from this process over CHANNELS gRPC connections. They are first
sent all at once (a burst, as when many clients start together); any call the server
turns away without queueing it is counted, then sent again in batches of BATCH until
Describe counts every caller as queued. Then:

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
from collections import Counter

import grpc
import redis.asyncio as aioredis

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as pb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, cpu_seconds, redis_server, rss_bytes
from ..report import Row
from . import Context

CHANNELS = 8
BATCH = 500
TARGET_CONNECTIONS = 16
LOCK = "bench:scale"
WAIT_S = 600.0  # longer than the whole scenario: nobody may give up
# Each channel gets its own TCP connection (by default equal channels share one).
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]


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


async def _sequential_pairs(stub, n: int) -> float:
    """Seconds for n uncontended Acquire+Release pairs, one at a time."""
    ttl = duration(30)
    t0 = time.monotonic()
    for i in range(n):
        got = await stub.Acquire(pb.AcquireRequest(name=f"bench:scale:seq:{i}", ttl=ttl), timeout=10)
        await stub.Release(pb.ReleaseRequest(name=f"bench:scale:seq:{i}", lease=got.lease), timeout=10)
    return time.monotonic() - t0


class Queue:
    """The waiters: sends their Acquire calls and tracks which are queued, turned away, done."""

    REJECTED = "rejected"

    def __init__(self, stubs: list, describe) -> None:
        self.stubs = stubs
        self.describe = describe
        self.live: set[asyncio.Task] = set()  # sent, neither turned away nor finished
        self.tasks: list[asyncio.Task] = []
        self.rejections: Counter[str] = Counter()
        self.grants: list[tuple[float, int]] = []
        self._turned_away = 0  # since the last settle()

    async def _waiter(self, i: int) -> str:
        stub = self.stubs[i % len(self.stubs)]
        req = pb.AcquireRequest(name=LOCK, ttl=duration(60), wait_timeout=duration(WAIT_S))
        try:
            got = await stub.Acquire(req, timeout=WAIT_S + 30)
        except grpc.aio.AioRpcError as exc:
            if exc.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED,
                              grpc.StatusCode.UNAVAILABLE):
                self.rejections[exc.code().name] += 1
                return self.REJECTED
            raise
        if not got.acquired:
            raise RuntimeError("a waiter was not granted the lock")
        self.grants.append((time.monotonic(), got.fencing_token))
        await stub.Release(pb.ReleaseRequest(name=LOCK, lease=got.lease), timeout=30)
        return "done"

    def send(self, ids: list[int]) -> list[asyncio.Task]:
        tasks = [asyncio.create_task(self._waiter(i)) for i in ids]
        self.tasks += tasks
        self.live.update(tasks)
        return tasks

    async def settle(self, timeout: float = 120) -> int:
        """Waits until every live call is queued at the server or turned away;
        returns how many were turned away since the last settle."""
        deadline = time.monotonic() + timeout
        while True:
            turned_away = [t for t in self.live if t.done()]
            for t in turned_away:
                if t.result() != self.REJECTED:  # raises a waiter's unexpected error here
                    raise RuntimeError("a waiter finished before the lock was released")
            self.live.difference_update(turned_away)
            self._turned_away += len(turned_away)
            if (await self.describe()) >= len(self.live):
                n, self._turned_away = self._turned_away, 0
                return n
            if time.monotonic() > deadline:
                raise RuntimeError(f"waiters not queued within {timeout}s")
            await asyncio.sleep(0.05)


async def _measure(target: str, redis_url: str, ps, n: int) -> dict:
    bench_redis = aioredis.Redis.from_url(redis_url, client_name="bench", decode_responses=True)
    channels = [grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS) for _ in range(CHANNELS)]
    stubs = [lock_pb2_grpc.LockServiceStub(c) for c in channels]
    main = stubs[0]
    sampler = Sampler(bench_redis, ps)
    sampling: asyncio.Task | None = None

    async def queued() -> int:
        return (await main.Describe(pb.DescribeRequest(name=LOCK), timeout=30)).waiters

    queue = Queue(stubs, queued)
    try:
        seq_n = min(n, 1000)
        seq_s = await _sequential_pairs(main, seq_n)
        idle_conns, idle_rss = await sampler.sample()
        sampling = asyncio.create_task(sampler.run())
        holder = await main.Acquire(pb.AcquireRequest(name=LOCK, ttl=duration(WAIT_S)), timeout=10)
        assert holder.acquired

        # The burst: everyone at once. Whatever the server turns away is re-sent in batches.
        t0 = time.monotonic()
        queue.send(list(range(n)))
        rejected_in_burst = await queue.settle()
        burst_codes = dict(queue.rejections)
        resent = 0
        while len(queue.live) < n:
            batch = min(BATCH, n - len(queue.live))
            queue.send(list(range(batch)))
            resent += batch
            await queue.settle()
        enqueue_s = time.monotonic() - t0

        cpu0 = cpu_seconds(ps)
        await asyncio.sleep(2.0)  # what do n blocked calls cost while nothing happens?
        blocked_cpu = (cpu_seconds(ps) - cpu0) / 2.0
        blocked_conns, blocked_rss = await sampler.sample()
        fds, threads = ps.num_fds(), ps.num_threads()

        t_release = time.monotonic()
        await main.Release(pb.ReleaseRequest(name=LOCK, lease=holder.lease), timeout=10)
        results = await asyncio.wait_for(asyncio.gather(*queue.live), timeout=600)
        pass_s = time.monotonic() - t_release
        await sampler.sample()
        fences = [f for _, f in sorted(queue.grants)]
        return {
            "waiters": n, "channels": CHANNELS, "batch": BATCH,
            "burst_rejected": rejected_in_burst, "burst_rejected_codes": burst_codes, "resent": resent,
            "rejected_total": dict(queue.rejections), "enqueue_s": enqueue_s,
            "sequential_pairs": seq_n, "sequential_s": seq_s,
            "idle_conns": idle_conns, "idle_rss": idle_rss, "blocked_conns": blocked_conns,
            "blocked_rss": blocked_rss, "peak_conns": sampler.peak_conns, "peak_rss": sampler.peak_rss,
            "blocked_server_cpu_busy": blocked_cpu, "server_fds": fds, "server_threads": threads,
            "server_rlimit_nofile": list(ps.rlimit(resource.RLIMIT_NOFILE)),
            "pass_s": pass_s, "granted": sum(1 for r in results if r == "done"),
            "fences_increasing": fences == sorted(set(fences)),
        }
    finally:
        if sampling is not None:
            sampling.cancel()
        for t in queue.tasks:
            t.cancel()
        await asyncio.gather(*queue.tasks, *([sampling] if sampling else []), return_exceptions=True)
        for c in channels:
            await c.close()
        await bench_redis.aclose()


def run(ctx: Context) -> tuple[list[Row], dict]:
    n = 2000 if ctx.quick else 10_000
    # One repetition: a 10k queue is the slowest thing the bench does, and the figures
    # it yields (connections, RSS) are counts, not noisy timings.
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile("scale")) as srv:
        d = asyncio.run(_measure(srv.target, rds.url, srv.ps, n))
    sc = f"scale {n:,} blocked"
    per_pair = d["sequential_s"] / d["sequential_pairs"]
    codes = ", ".join(f"{c} {k}" for c, k in d["burst_rejected_codes"].items()) or "none"
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
        Row(sc, f"time to queue all {n:,}", d["enqueue_s"], "s", note=f"{d['resent']:,} re-sent in batches of {BATCH}"),
        Row(sc, f"calls turned away when all {n:,} arrive at once", d["burst_rejected"], "", target="0",
            passed=d["burst_rejected"] == 0, note=codes),
    ]
    if d["granted"] != n or not d["fences_increasing"]:
        rows.append(Row(sc, "every waiter granted once, in fencing order", d["granted"], "", target=f"{n}",
                        passed=False))
    return rows, d

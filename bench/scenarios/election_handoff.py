"""Leadership handoff: how soon the next candidate leads once the leader's Lead stream
ends, against a lock's handoff when its holder's Hold stream ends, in the same run.

Each round: a leader (or holder) opens its stream and is granted; a second client
queues with a blocking Campaign (Acquire) on the same server; the leader's client
cancels its stream; the figure is the time from that cancel to the waiter's call
returning. Both go through the same steps (the stream's end makes the server resign
or release and grant the queue's head, whose server hears it and answers), so the
ratio shows what the election's history costs on top of the lock's handoff.

Target: election handoff p50 and p99 at most 1.5x the lock's of the same run.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from concord._convert import duration
from concord.election.v1 import election_pb2 as epb
from concord.election.v1 import election_pb2_grpc
from concord.lock.v1 import lock_pb2 as lpb
from concord.lock.v1 import lock_pb2_grpc

from ..harness import concord_server, median, percentile, redis_server
from ..report import Row
from . import Context

SC = "election-handoff"
TARGET = 1.5


async def _rounds(target: str, n: int, rep: int) -> dict[str, list[float]]:
    leader_ch, waiter_ch = grpc.aio.insecure_channel(target), grpc.aio.insecure_channel(target)
    el, ew = election_pb2_grpc.ElectionServiceStub(leader_ch), election_pb2_grpc.ElectionServiceStub(waiter_ch)
    ll, lw = lock_pb2_grpc.LockServiceStub(leader_ch), lock_pb2_grpc.LockServiceStub(waiter_ch)
    ttl, wait = duration(30), duration(10)
    out: dict[str, list[float]] = {"election": [], "lock": []}

    async def one(kind: str, i: int) -> None:
        name = f"bench:handoff:{kind}:{rep}:{i}"
        if kind == "election":
            stream = el.Lead(epb.LeadRequest(election=name, ttl=ttl, wait_timeout=wait))
            await stream.read()  # elected
            waiting = asyncio.ensure_future(ew.Campaign(epb.CampaignRequest(election=name, ttl=ttl, wait_timeout=wait)))
            queued = lambda: ew.Leader(epb.LeaderRequest(election=name))  # noqa: E731
            count = lambda r: r.candidates  # noqa: E731
        else:
            stream = ll.Hold(lpb.HoldRequest(name=name, ttl=ttl, wait_timeout=wait))
            await stream.read()  # granted
            waiting = asyncio.ensure_future(lw.Acquire(lpb.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait)))
            queued = lambda: lw.Describe(lpb.DescribeRequest(name=name))  # noqa: E731
            count = lambda r: r.waiters  # noqa: E731
        while count(await queued()) < 1:
            await asyncio.sleep(0.001)
        started = time.perf_counter()
        stream.cancel()
        got = await waiting
        out[kind].append(time.perf_counter() - started)
        assert getattr(got, "elected", getattr(got, "acquired", False))

    try:
        for i in range(n):  # interleaved, so drift hits both alike
            await one("lock", i)
            await one("election", i)
    finally:
        await leader_ch.close()
        await waiter_ch.close()
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    n = 100 if ctx.quick else 300
    runs = []
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp) as srv:
        for _ in range(ctx.reps):
            runs.append(asyncio.run(_rounds(srv.target, n, len(runs))))
    rows = []
    for p in (50, 99):
        el = [percentile(r["election"], p) for r in runs]
        lk = [percentile(r["lock"], p) for r in runs]
        rows.append(Row(SC, f"handoff p{p} after the leader's stream ends", median(el), "s", baseline=median(lk),
                        baseline_label=f"lock handoff p{p} (Hold stream ends)", target=f"≤ {TARGET}× lock",
                        passed=median(el) <= TARGET * median(lk), runs=el))
    return rows, {"rounds_per_rep": n, "runs": runs}

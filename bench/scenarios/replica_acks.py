"""Replica acks: what --redis-replica-acks 1 costs, against the same run without.

One Valkey primary and one replica on this machine; two concord-servers on the
primary, one with ``--redis-replica-acks 1`` and one without, measured in turns
(off, on, off, on) so drift hits both alike. Three workloads, each the one of its own
scenario:

  lock pair    an uncontended Acquire+Release pair (cost.py): server CPU per pair with
               IN_FLIGHT pairs in flight, and the p50 of one pair at a time
  queue task   Enqueue of one task, Dequeue, Ack (queue_cost.py's ``single``): server
               CPU per task with IN_FLIGHT in flight, and the p50 of one task at a time
  handoff      8 clients passing one lock on (handoff.py's workload over Sessions):
               server CPU per acquisition, and the p50 handoff (a release sent to the
               next holder's grant received)

The targets (issue 31): server CPU ≤ 1.3× and p50 ≤ 1.5× the server without acks,
thanks to one WAIT per pipelined batch rather than per command.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from itertools import count

import grpc

from concord._convert import duration
from concord.lock.v1 import lock_pb2 as lock_pb
from concord.lock.v1 import lock_pb2_grpc
from concord.queue.v1 import queue_pb2 as queue_pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, cpu_seconds, median, redis_server
from ..report import Row
from . import Context, handoff
from .cost import CONTENDED_CLIENTS, measure_kinds
from .queue_cost import ack, new_task

SC = "replica-acks"
CPU_TARGET, P50_TARGET = 1.3, 1.5
QUEUE = "bench:acks:queue"


def _lock_pair(locks: lock_pb2_grpc.LockServiceStub) -> Callable[[int], Awaitable[None]]:
    ttl, wait = duration(30), duration(10)
    names = count()

    async def pair(_: int) -> None:
        name = f"bench:acks:{next(names)}"
        got = await locks.Acquire(lock_pb.AcquireRequest(name=name, ttl=ttl, wait_timeout=wait), timeout=10)
        assert got.acquired
        await locks.Release(lock_pb.ReleaseRequest(name=name, lease=got.lease), timeout=10)
    return pair


def _queue_task(queues: queue_pb2_grpc.QueueServiceStub) -> Callable[[int], Awaitable[None]]:
    lease, no_wait = duration(30), duration(0)

    async def task(i: int) -> None:
        await queues.Enqueue(queue_pb.EnqueueRequest(queue=QUEUE, tasks=[new_task(i)]), timeout=10)
        while True:  # another worker may have taken the task this Enqueue added
            got = (await queues.Dequeue(queue_pb.DequeueRequest(queues=[QUEUE], max_tasks=1, lease_ttl=lease,
                                                                wait_timeout=no_wait), timeout=10)).tasks
            if got:
                await ack(queues, got[0])
                return
    return task


async def _unary(target: str, ps, reps: int, n: int, n_sequential: int) -> dict[str, dict]:
    """Per workload: server CPU per operation (each repetition) and the p50 of one at a time."""
    channel = grpc.aio.insecure_channel(target)
    queues = queue_pb2_grpc.QueueServiceStub(channel)
    kinds = {"pair": _lock_pair(lock_pb2_grpc.LockServiceStub(channel)), "task": _queue_task(queues)}
    results_off = queue_pb.QueuePolicy(succeeded=queue_pb.Retention(max_count=0))
    await queues.SetQueuePolicy(queue_pb.SetQueuePolicyRequest(queue=QUEUE, policy=results_off), timeout=10)
    try:
        runs = await measure_kinds({k: (call, n) for k, call in kinds.items()}, reps, ps)
        out = {}
        for kind, call in kinds.items():
            latencies = []
            for i in range(n_sequential):
                t0 = time.perf_counter()
                await call(i)
                latencies.append(time.perf_counter() - t0)
            out[kind] = {"cpu": [r["cpu_per_op_s"] for r in runs[kind]], "p50": [median(latencies)]}
        return out
    finally:
        await channel.close()


def _handoff(target: str, ps, seconds: float, rep: int) -> dict:
    cpu0 = cpu_seconds(ps)
    r = handoff._run_once("concord", CONTENDED_CLIENTS, target, f"bench:acks:handoff:{rep}", seconds)
    cpu = cpu_seconds(ps) - cpu0
    return {"cpu": [cpu / r["acquisitions"]], "p50": [r["handoff_p50_s"]]}


WORKLOADS = {  # key: (what the rows call it, the p50's meaning)
    "pair": ("Acquire+Release pair", "p50, one at a time"),
    "task": ("queue task (Enqueue, Dequeue, Ack)", "p50, one at a time"),
    "handoff": (f"lock handoff, {CONTENDED_CLIENTS} clients", "p50 handoff"),
}


def run(ctx: Context) -> tuple[list[Row], dict]:
    n, n_seq, seconds = (500, 200, 2.0) if ctx.quick else (2000, 1000, 4.0)
    results: dict[str, dict[str, dict[str, list[float]]]] = {"off": {}, "on": {}}
    with redis_server(ctx.tmp) as primary, redis_server(ctx.tmp, "--replicaof", "127.0.0.1", str(primary.port)):
        with concord_server(primary.url, ctx.tmp) as off, \
                concord_server(primary.url, ctx.tmp, extra_args=("--redis-replica-acks", "1")) as on:
            for rep in range(max(2, ctx.reps)):
                for label, srv in (("off", off), ("on", on)):
                    got = asyncio.run(_unary(srv.target, srv.ps, 1, n, n_seq))
                    got["handoff"] = _handoff(srv.target, srv.ps, seconds, rep)
                    for kind, figures in got.items():
                        mine = results[label].setdefault(kind, {"cpu": [], "p50": []})
                        for key, values in figures.items():
                            mine[key] += values
    rows = []
    for kind, (what, p50_what) in WORKLOADS.items():
        on, off = results["on"][kind], results["off"][kind]
        cpu_on, cpu_off = median(on["cpu"]), median(off["cpu"])
        p50_on, p50_off = median(on["p50"]), median(off["p50"])
        rows += [
            Row(SC, f"{what}, 1 replica ack: server CPU/op", cpu_on, "s", baseline=cpu_off,
                baseline_label="same, acks off", target=f"≤ {CPU_TARGET}×", passed=cpu_on / cpu_off <= CPU_TARGET,
                runs=on["cpu"]),
            Row(SC, f"{what}, 1 replica ack: {p50_what}", p50_on, "s", baseline=p50_off,
                baseline_label="same, acks off", target=f"≤ {P50_TARGET}×", passed=p50_on / p50_off <= P50_TARGET,
                runs=on["p50"]),
        ]
    return rows, {"results": results}

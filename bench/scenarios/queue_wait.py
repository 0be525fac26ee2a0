"""WaitTask wake-up: how soon a task's waiter hears that it finished, against the round
trip of an empty call.

One task at a time is enqueued and leased; a WaitTask(wait_timeout 30 s) call for it
is started and given WAIT_GAP s to reach the server and subscribe (a bench may
pause; a test may not), then the task is acked. The figure is WaitTask reply
arrival - Ack send, all time.monotonic() readings in the bench process: the Ack's
trip to Redis, the finished channel's message to the server, the waiter's look at
the task, and the reply's trip back. Measured with no other waiter and with CROWD
other WaitTask calls parked on the same queue (tasks that never finish), which must
not slow a wake-up down: each finish wakes only its own task's waiters.

Baseline in the same run: the empty call's (health Check) round trip, sampled
between the wake-ups on the same channel. Rows give p50 and p99 over every wake-up
of the run (min(--reps, 3) runs of SAMPLES wake-ups each).
"""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, percentile, redis_server
from ..report import Row
from . import Context
from .queue_cost import ack, new_task

SC = "queue-wait"
QUEUE = "bench:queue-wait"
WAIT_GAP = 0.02
CROWD = 1000


async def _wake_ups(target: str, samples: int, crowd: int) -> tuple[list[float], list[float]]:
    """(wake-up seconds, empty-call round trips) for `samples` tasks with `crowd` idle waiters."""
    channel = grpc.aio.insecure_channel(target)
    queues = queue_pb2_grpc.QueueServiceStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    queue = f"{QUEUE}:{crowd}:{time.monotonic_ns()}"
    wait, lease = duration(30), duration(60)
    parked = []
    try:
        if crowd:
            idle = await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=[new_task(i) for i in range(crowd)]),
                                        timeout=30)
            await queues.Dequeue(pb.DequeueRequest(queues=[queue], max_tasks=crowd, lease_ttl=lease), timeout=30)
            parked = [queues.WaitTask(pb.WaitTaskRequest(queue=queue, task_id=r.task_id, wait_timeout=wait),
                                      timeout=60) for r in idle.results]
        wakes, probes = [], []
        for i in range(samples):
            await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=[new_task(i)]), timeout=10)
            (task,) = (await queues.Dequeue(pb.DequeueRequest(queues=[queue], lease_ttl=lease), timeout=10)).tasks
            waiter = queues.WaitTask(pb.WaitTaskRequest(queue=queue, task_id=task.task_id, wait_timeout=wait),
                                     timeout=60)
            await asyncio.sleep(WAIT_GAP)
            t0 = time.monotonic()
            await ack(queues, task, b"done")
            reply = await waiter
            wakes.append(time.monotonic() - t0)
            assert reply.finished and reply.task.result == b"done", "WaitTask returned before the task finished"
            t0 = time.monotonic()
            await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
            probes.append(time.monotonic() - t0)
        return wakes, probes
    finally:
        for call in parked:
            call.cancel()
        await channel.close()


def run(ctx: Context) -> tuple[list[Row], dict]:
    samples = 100 if ctx.quick else 300
    runs = min(ctx.reps, 3)
    figures: dict[int, tuple[list[float], list[float]]] = {0: ([], []), CROWD: ([], [])}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        for _ in range(runs):
            for crowd in figures:
                wakes, probes = asyncio.run(_wake_ups(srv.target, samples, crowd))
                figures[crowd][0].extend(wakes)
                figures[crowd][1].extend(probes)
    rows = []
    for crowd, (wakes, probes) in figures.items():
        who = f"{crowd} other waiters" if crowd else "no other waiter"
        for p in (50, 99):
            rows.append(Row(SC, f"WaitTask wake-up after Ack, {who}: p{p}", percentile(wakes, p), "s",
                            baseline=percentile(probes, p), baseline_label=f"empty call p{p}"))
    details = {"samples": samples, "runs": runs, "crowd": CROWD, "wait_gap_s": WAIT_GAP,
               "wakes": {str(k): v[0] for k, v in figures.items()}, "probes": {str(k): v[1] for k, v in figures.items()}}
    return rows, details

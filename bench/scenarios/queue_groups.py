"""Queue groups: what fairness costs, and what it buys.

  throughput  N no-op tasks, enqueued BATCH a call, then drained by IN_FLIGHT workers
              (grpc.aio, each Dequeue of TAKE tasks then their Acks) until none is
              left: tasks/s, once with the tasks ungrouped and once spread over GROUPS
              groups with a cap of 1 each (QueuePolicy.group_max_leased), on fresh
              queues. Target (issue 32): grouped >= 0.8x ungrouped.
  lone task   BURST tasks of one group, then one task of another ("quiet"); one worker
              takes one task at a time (Dequeue of 1, Ack): how many tasks it runs
              before the quiet one, and how long the quiet one waited, in lease round
              trips (from its Enqueue's answer to its Dequeue's, over the median Dequeue+Ack
              of the run). Target: <= 2 round trips.
              BullMQ (no groups in its open-source edition) on the same Valkey, the
              same burst and one worker of concurrency 1 (bench/peers/bullmq/burst.mjs):
              its quiet job runs after the whole burst.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import grpc

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..peers.install import PeerUnavailable, node_peer
from ..report import Row
from . import Context

SC = "queue-groups"
IN_FLIGHT = 16
BATCH = 500
TAKE = 5  # IN_FLIGHT x TAKE Acks at once stay under the server's streams per connection (100)
GROUPS = 1000
TARGET_THROUGHPUT = 0.8
TARGET_ROUND_TRIPS = 2.0


async def _enqueue(queues, queue: str, n: int, group_of) -> None:
    for s in range(0, n, BATCH):
        tasks = [pb.NewTask(type="noop", group=group_of(i)) for i in range(s, min(s + BATCH, n))]
        await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=tasks), timeout=60)


async def _drain(queues, queue: str, n: int) -> float:
    """Seconds for IN_FLIGHT workers to dequeue and ack n tasks."""
    done = 0
    lease, short = duration(60), duration(0.05)  # a short wait: near the end the others hold the rest

    async def worker() -> None:
        nonlocal done
        while done < n:
            got = await queues.Dequeue(pb.DequeueRequest(queues=[queue], max_tasks=TAKE, lease_ttl=lease,
                                                         wait_timeout=short), timeout=30)
            if not got.tasks:
                continue
            await asyncio.gather(*(queues.Ack(pb.AckRequest(queue=t.queue, task_id=t.task_id, lease=t.lease),
                                              timeout=30) for t in got.tasks))
            done += len(got.tasks)

    start = time.monotonic()
    await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return time.monotonic() - start


async def _lone(queues, queue: str, burst: int) -> dict:
    await _enqueue(queues, queue, burst, lambda i: "burst")
    await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=[pb.NewTask(type="quiet", group="quiet")]), timeout=30)
    added = time.monotonic()
    lease, no_wait = duration(60), duration(0)
    before, trips = 0, []
    while True:
        t0 = time.monotonic()
        (t,) = (await queues.Dequeue(pb.DequeueRequest(queues=[queue], lease_ttl=lease, wait_timeout=no_wait),
                                     timeout=30)).tasks
        leased = time.monotonic()
        await queues.Ack(pb.AckRequest(queue=t.queue, task_id=t.task_id, lease=t.lease), timeout=30)
        trips.append(time.monotonic() - t0)
        if t.type == "quiet":
            waited = leased - added  # from its Enqueue's answer to its lease
            break
        before += 1
    await queues.Purge(pb.PurgeRequest(queue=queue, include_dead=True), timeout=120)
    return {"before": before, "wait_s": waited, "round_trip_s": median(trips)}


async def _measure(target: str, reps: int, n: int, burst: int) -> dict[str, list]:
    channel = grpc.aio.insecure_channel(target)
    queues = queue_pb2_grpc.QueueServiceStub(channel)
    runs: dict[str, list] = {"plain": [], "grouped": [], "lone": []}
    try:
        for rep in range(reps):
            plain, grouped = f"bench:groups:{rep}:plain", f"bench:groups:{rep}:grouped"
            await queues.SetQueuePolicy(pb.SetQueuePolicyRequest(queue=grouped, policy=pb.QueuePolicy(
                group_max_leased=1, succeeded=pb.Retention(max_count=0))), timeout=10)
            await queues.SetQueuePolicy(pb.SetQueuePolicyRequest(queue=plain, policy=pb.QueuePolicy(
                succeeded=pb.Retention(max_count=0))), timeout=10)
            await _enqueue(queues, plain, n, lambda i: "")
            await _enqueue(queues, grouped, n, lambda i: f"g{i % GROUPS}")
            runs["plain"].append(n / await _drain(queues, plain, n))
            runs["grouped"].append(n / await _drain(queues, grouped, n))
            runs["lone"].append(await _lone(queues, f"bench:groups:{rep}:lone", burst))
    finally:
        await channel.close()
    return runs


def _bullmq(redis_url: str, burst: int) -> dict | str:
    try:
        where = node_peer("bullmq")
    except PeerUnavailable as exc:
        return f"BullMQ unavailable: {exc}"
    env = {**os.environ, "PEER_URL": redis_url, "PEER_QUEUE": f"bench-groups-{os.getpid()}", "BURST": str(burst)}
    done = subprocess.run(["node", "burst.mjs"], cwd=where, env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    if done.returncode:
        return f"BullMQ failed: {done.stderr[-500:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(ctx: Context) -> tuple[list[Row], dict]:
    n, burst = (5_000, 10_000) if ctx.quick else (20_000, 100_000)
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        runs = asyncio.run(_measure(srv.target, ctx.reps, n, burst))
        bull = _bullmq(rds.url, burst)
    plain, grouped = median(runs["plain"]), median(runs["grouped"])
    lone = runs["lone"]
    trips = median([r["wait_s"] / r["round_trip_s"] for r in lone])
    rows = [
        Row(SC, f"ungrouped: tasks/s ({IN_FLIGHT} workers, Dequeue {TAKE} + Acks)", plain, "/s", runs=runs["plain"]),
        Row(SC, f"{GROUPS} groups, cap 1 each: tasks/s", grouped, "/s", baseline=plain, baseline_label="ungrouped",
            target=f"≥ {TARGET_THROUGHPUT}×", passed=grouped >= TARGET_THROUGHPUT * plain, runs=runs["grouped"]),
        Row(SC, f"lone task behind a {burst:,}-task burst: tasks run before it", median([r["before"] for r in lone]),
            "", runs=[r["before"] for r in lone]),
        Row(SC, "lone task: its wait in lease round trips", trips, "x", target=f"≤ {TARGET_ROUND_TRIPS}",
            passed=trips <= TARGET_ROUND_TRIPS, runs=[r["wait_s"] / r["round_trip_s"] for r in lone],
            note=f"round trip {median([r['round_trip_s'] for r in lone]) * 1000:.2f} ms"),
    ]
    before = median([r["before"] for r in lone])
    if isinstance(bull, dict):
        rows.append(Row(SC, "lone task: tasks run before it, Concord vs BullMQ (no groups)", before, "",
                        baseline=bull["before"], baseline_label="BullMQ", peer="BullMQ",
                        note=f"BullMQ's waited {bull['wait_s']:.1f} s, Concord's "
                             f"{median([r['wait_s'] for r in lone]) * 1000:.1f} ms"))
    else:
        rows.append(Row(SC, "lone task: tasks run before it, Concord vs BullMQ (no groups)", before, "", note=bull))
    return rows, {"n": n, "burst": burst, "groups": GROUPS, "runs": runs, "bullmq": bull}

"""Console search: the time SearchTasks takes to answer its first page over a queue of
100,000 tasks, against the empty gRPC call's round trip in the same run (issue 34:
at most 10 empty-call round trips).

The queue holds 90,000 ready tasks (type "resize", a 100-byte JSON payload, no error)
and 10,000 dead ones, each nacked to death with an error: 1 in 100 "disk full on node
7", the rest "connection timed out". Each kind is a first page (no page token), made
one call at a time through the sync generated stub; its median over CALLS calls is a
repetition's figure, and the median over repetitions is reported:

  empty         grpc.health.v1 Check: the baseline round trip
  some          error text "disk full" among the dead tasks (states DEAD): 1 match in
                100 looked at, so the first page is the first call's ~10 matches
  none          error text that no task holds, over every state: one call looks at
                its 1,000 tasks and answers with none and a page token
  payload-none  payload bytes that no task holds: 1,000 payloads read and searched
  dense         type "resize": the first 50 tasks all match

Also reported, once per repetition: the whole sparse search paged to its end (the
"some" query over every state: 100 calls of 1,000 tasks), its time and calls.
"""

from __future__ import annotations

import asyncio
import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import concord_server, median, redis_server
from ..report import Row
from . import Context

SC = "console-search"
QUEUE = "bench:console-search"
READY, DEAD = 90_000, 10_000
NEEDLE_EVERY = 100  # 1 dead task in 100 has the error searched for
TARGET = 10.0  # × the empty call's round trip
BATCH = 1000
PAYLOAD = b'{"file": "photos/2026/11/27/IMG_0001.jpg", "sizes": [64, 256, 1024], "owner": "user-000042"}'
KINDS = {
    "empty": ("empty call (health Check) round trip", None),
    "some": ("SearchTasks first page: error text in 1 of 100 dead tasks",
             pb.SearchTasksRequest(queue=QUEUE, states=[pb.TASK_STATE_DEAD], error_contains="disk full")),
    "none": ("SearchTasks first page: error text no task holds",
             pb.SearchTasksRequest(queue=QUEUE, error_contains="no task says this")),
    "payload-none": ("SearchTasks first page: payload bytes no task holds",
                     pb.SearchTasksRequest(queue=QUEUE, payload_contains=b"no-such-owner")),
    "dense": ("SearchTasks first page: type every task has (a full page of 50)",
              pb.SearchTasksRequest(queue=QUEUE, type="resize")),
}


async def _load(target: str) -> None:
    """READY ready tasks, then DEAD dead ones (each nacked with retryable false)."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = queue_pb2_grpc.QueueServiceStub(channel)
        task = pb.NewTask(type="resize", payload=PAYLOAD)
        for _ in range(READY // BATCH):
            await stub.Enqueue(pb.EnqueueRequest(queue=QUEUE, tasks=[task] * BATCH), timeout=60)
        doomed = pb.NewTask(type="resize", payload=PAYLOAD, max_attempts=1, priority=1000)  # leased first
        n = 0
        gate = asyncio.Semaphore(64)  # calls in flight: well under a connection's 100 streams

        async def nack(request: pb.NackRequest) -> None:
            async with gate:
                await stub.Nack(request, timeout=60)

        for _ in range(DEAD // BATCH):
            await stub.Enqueue(pb.EnqueueRequest(queue=QUEUE, tasks=[doomed] * BATCH), timeout=60)
            got = await stub.Dequeue(pb.DequeueRequest(queues=[QUEUE], max_tasks=BATCH,
                                                       lease_ttl=duration(300)), timeout=60)
            nacks = []
            for t in got.tasks:
                error = "disk full on node 7" if n % NEEDLE_EVERY == 0 else "connection timed out"
                n += 1
                nacks.append(nack(pb.NackRequest(queue=QUEUE, task_id=t.task_id, lease=t.lease, error=error,
                                                 retryable=False)))
            await asyncio.gather(*nacks)
        stats = await stub.Stats(pb.StatsRequest(queue=QUEUE), timeout=60)
        if (stats.ready, stats.dead) != (READY, DEAD):
            raise RuntimeError(f"the queue holds {stats.ready} ready and {stats.dead} dead tasks, "
                               f"not {READY} and {DEAD}")


def run(ctx: Context) -> tuple[list[Row], dict]:
    calls = 30 if ctx.quick else 200
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        started = time.perf_counter()
        asyncio.run(_load(srv.target))
        load_s = time.perf_counter() - started
        with grpc.insecure_channel(srv.target) as channel:
            health = health_pb2_grpc.HealthStub(channel)
            stub = queue_pb2_grpc.QueueServiceStub(channel)
            check = health_pb2.HealthCheckRequest()
            runs: dict[str, list[dict]] = {kind: [] for kind in KINDS}
            walks: list[dict] = []
            for rep in range(-1, ctx.reps):  # -1: warm-up (connection, script cache)
                for kind, (_, request) in KINDS.items():
                    times, found, examined = [], 0, 0
                    for _ in range(calls if rep >= 0 else 5):
                        t0 = time.perf_counter()
                        if request is None:
                            health.Check(check, timeout=10)
                        else:
                            r = stub.SearchTasks(request, timeout=10)
                            found, examined = len(r.tasks), r.examined
                        times.append(time.perf_counter() - t0)
                    if rep >= 0:
                        runs[kind].append({"median_s": median(times), "found": found, "examined": examined})
                if rep >= 0:
                    walks.append(_walk(stub))
    details = {"ready": READY, "dead": DEAD, "needle_every": NEEDLE_EVERY, "calls": calls, "reps": ctx.reps,
               "load_s": load_s, "runs": runs, "walks": walks}
    return _rows(details), details


def _walk(stub: queue_pb2_grpc.QueueServiceStub) -> dict:
    """The sparse search over the whole queue, paged to its end."""
    request = pb.SearchTasksRequest(queue=QUEUE, error_contains="disk full", page_size=100)
    t0, calls, found, examined = time.perf_counter(), 0, 0, 0
    while True:
        r = stub.SearchTasks(request, timeout=30)
        calls, found, examined = calls + 1, found + len(r.tasks), examined + r.examined
        if not r.next_page_token:
            break
        request.page_token = r.next_page_token
    if found != DEAD // NEEDLE_EVERY:
        raise RuntimeError(f"the whole search found {found} tasks, not {DEAD // NEEDLE_EVERY}")
    return {"s": time.perf_counter() - t0, "calls": calls, "examined": examined}


def _rows(d: dict) -> list[Row]:
    med = {kind: median([r["median_s"] for r in runs]) for kind, runs in d["runs"].items()}
    empty = med["empty"]
    rows = [Row(SC, KINDS["empty"][0], empty, "s", runs=[r["median_s"] for r in d["runs"]["empty"]],
                note=f"median of {d['calls']} calls a repetition; queue of {d['ready'] + d['dead']:,} tasks loaded in "
                     f"{d['load_s']:.1f} s")]
    for kind in ("some", "none", "payload-none", "dense"):
        last = d["runs"][kind][-1]
        rows.append(Row(SC, KINDS[kind][0], med[kind], "s", baseline=empty, baseline_label="empty call",
                        target=f"≤ {TARGET:g}× empty", passed=med[kind] <= TARGET * empty,
                        runs=[r["median_s"] for r in d["runs"][kind]],
                        note=f"{last['found']} found, {last['examined']} looked at"))
    walk = d["walks"][-1]
    rows.append(Row(SC, "SearchTasks: the sparse search paged to the queue's end", median([w["s"] for w in d["walks"]]),
                    "s", runs=[w["s"] for w in d["walks"]],
                    note=f"{walk['calls']} calls, {walk['examined']:,} tasks looked at, "
                         f"{d['dead'] // d['needle_every']} found"))
    return rows

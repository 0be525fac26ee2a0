"""Queue cost: server CPU per task (Enqueue + Dequeue + Ack) in units of an empty gRPC
call, and tasks/s; the book's list queue and RQ's enqueue on the same Redis for
comparison.

Measured as the lock's cost scenario (cost.py, whose driver it reuses): the baseline
is grpc.health.v1 Check on the same server process; server CPU is read from the
kernel (psutil, user+system, all threads) before and after a fixed number of calls,
IN_FLIGHT at a time on one grpc.aio channel with the generated stubs; every
repetition measures every kind back to back after a warm-up; medians are reported.
Kinds, all on one queue:

  single    Enqueue of 1 task, Dequeue(max_tasks 1, wait_timeout 0), Ack: per task
  batched   Enqueue of BATCH tasks in one call, Dequeue(max_tasks BATCH), then an
            Ack per task (Ack takes one task), the Acks in flight together
  kept      as single, on a second queue that keeps finished tasks (the default
            retention: the newest 1,000 for 24 h) and Acks carrying a 16-byte result;
            `single` and `batched` run on a queue whose retention keeps none
            (results off), so kept / single is the cost of results (target <= 1.2x)
  quiet     as single, on a queue that keeps no task events (QueuePolicy.keep_events
            0: nothing for WatchQueue); single keeps the default 1,000. Events cost
            Redis more than the server (an XADD and a SPUBLISH per transition), so
            single and quiet are measured again with server + Redis CPU together:
            single / quiet is the cost of events (target <= 1.15x)

Each worker dequeues only after its own Enqueue returned and every Dequeue takes as
many tasks as its Enqueue added, so a Dequeue always finds enough ready tasks; one
that comes back short is retried, and one that comes back empty stops the run (the
queue lost tasks). A figure per task is the call's figure over the tasks it moved.

Comparisons on the same Valkey, after the Concord kinds:

  book      "Redis in Action" 6.4.1 (queue_book.py): RPUSH of JSON [name, args],
            BLPOP; redis.asyncio, IN_FLIGHT workers each pushing one task then
            popping one, so the same shape as `single` with no acknowledgement.
            Its CPU figures are Redis's (there is no server).
  rq        RQ's Queue.enqueue of a trivial function, **enqueue only** (nothing
            dequeues or runs it): RQ uses the sync redis client, so enqueues are made
            one at a time from the bench thread. Its baseline is Concord's Enqueue of
            one task made the same way (sync stub, one at a time), in the same run.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable

import grpc
import psutil
import redis.asyncio as aioredis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord._convert import duration
from concord.queue.v1 import queue_pb2 as pb
from concord.queue.v1 import queue_pb2_grpc

from ..harness import RedisServer, concord_server, cpu_seconds, median, redis_server
from ..report import Row
from . import Context
from . import queue_book as book
from .cost import IN_FLIGHT, measure_kinds

try:
    import rq
except ImportError:  # reported as an unavailable row
    rq = None

SC = "queue-cost"
QUEUE = "bench:queue-cost"
KEPT = "bench:queue-cost:kept"
QUIET = "bench:queue-cost:quiet"
EVENTS_TARGET = 1.15  # single / quiet, server + Redis CPU per task
RESULT = b"r" * 16
BATCH = 100
RESULTS_TARGET = 1.2  # kept / single, server CPU per task
TASKS_PER_CALL = {"empty": 1, "single": 1, "batched": BATCH, "kept": 1, "book": 1, "enqueue_seq": 1, "rq_seq": 1,
                  "events_on": 1, "events_off": 1}
KINDS = {  # kind: (label, what one unit of its figures is)
    "empty": ("empty call (health Check)", "call"),
    "single": ("single: Enqueue(1)+Dequeue(1)+Ack", "task"),
    "batched": (f"batched: Enqueue({BATCH})+Dequeue({BATCH})+{BATCH} Acks", "task"),
    "kept": ("kept: single with a 16-byte result kept (default retention)", "task"),
}


class _Together:
    """Two processes' CPU as one (cpu_seconds reads cpu_times)."""

    def __init__(self, *procs: psutil.Process) -> None:
        self._procs = procs

    def cpu_times(self):
        times = [p.cpu_times() for p in self._procs]
        return type("Times", (), {"user": sum(t.user for t in times), "system": sum(t.system for t in times)})


def noop(*args: object) -> None:
    """The task RQ enqueues (by import path: nothing runs it here)."""


def new_task(i: int) -> pb.NewTask:
    """A small task, as the book's queue item: a name and JSON args."""
    return pb.NewTask(type="noop", payload=json.dumps([i]).encode())


def ack(queues: queue_pb2_grpc.QueueServiceStub, task: pb.Task, result: bytes = b"") -> Awaitable[pb.AckResponse]:
    return queues.Ack(pb.AckRequest(queue=task.queue, task_id=task.task_id, lease=task.lease, result=result),
                      timeout=10)


async def _measure(target: str, ps, rds: RedisServer, redis_ps, reps: int, n_empty: int, n_tasks: int,
                   n_batches: int) -> dict[str, list[dict]]:
    channel = grpc.aio.insecure_channel(target)
    health = health_pb2_grpc.HealthStub(channel)
    queues = queue_pb2_grpc.QueueServiceStub(channel)
    conn = aioredis.Redis(host="127.0.0.1", port=rds.port, client_name="bench")
    check = health_pb2.HealthCheckRequest()
    lease, no_wait = duration(30), duration(0)

    async def empty(_: int) -> None:
        await health.Check(check, timeout=10)

    def tasks(batch: int, queue: str = QUEUE, result: bytes = b"") -> Callable[[int], Awaitable[None]]:
        async def run(i: int) -> None:
            await queues.Enqueue(pb.EnqueueRequest(queue=queue, tasks=[new_task(i * batch + j) for j in range(batch)]),
                                 timeout=10)
            need = batch
            while need:
                got = (await queues.Dequeue(pb.DequeueRequest(queues=[queue], max_tasks=need, lease_ttl=lease,
                                                              wait_timeout=no_wait), timeout=10)).tasks
                if not got:
                    raise RuntimeError(f"Dequeue found no task in {queue} although {need} enqueued ones are unclaimed")
                await asyncio.gather(*(ack(queues, t, result) for t in got))
                need -= len(got)
        return run

    async def book_task(i: int) -> None:
        await book.put(conn, QUEUE, "noop", [i])
        assert await book.take(conn, QUEUE, 10) is not None, "the book's queue lost a task"

    results_off = pb.QueuePolicy(succeeded=pb.Retention(max_count=0))
    await queues.SetQueuePolicy(pb.SetQueuePolicyRequest(queue=QUEUE, policy=results_off), timeout=10)
    quiet = pb.QueuePolicy(succeeded=pb.Retention(max_count=0), keep_events=0)
    await queues.SetQueuePolicy(pb.SetQueuePolicyRequest(queue=QUIET, policy=quiet), timeout=10)
    try:
        runs = await measure_kinds({"empty": (empty, n_empty), "single": (tasks(1), n_tasks),
                                    "batched": (tasks(BATCH), n_batches), "kept": (tasks(1, KEPT, RESULT), n_tasks)},
                                   reps, ps)
        runs["retained"] = [{"bytes_per_task": await _retained_bytes(conn)}]
        runs |= await measure_kinds({"events_on": (tasks(1), n_tasks), "events_off": (tasks(1, QUIET), n_tasks)},
                                    reps, _Together(ps, redis_ps))
        return runs | await measure_kinds({"book": (book_task, n_tasks)}, reps, redis_ps)
    finally:
        await channel.close()
        await conn.aclose()


async def _retained_bytes(conn: aioredis.Redis) -> float:
    """Redis memory per task the `kept` queue retains: its task hash (MEMORY USAGE)
    plus its share of the `done` set."""
    hashes = [k async for k in conn.scan_iter(match=f"*{KEPT}}}:task:*", count=1000)]
    done = [k async for k in conn.scan_iter(match=f"*{KEPT}}}:done", count=1000)]
    per_hash = sum([await conn.memory_usage(k) for k in hashes]) / len(hashes)
    return per_hash + await conn.memory_usage(done[0]) / await conn.zcard(done[0])


def _sequential(n: int, call: Callable[[int], object], procs: dict[str, psutil.Process]) -> dict:
    """``call(i)`` for i in range(n), one at a time from this thread: wall time, and how
    busy each process (and the bench process itself) was meanwhile."""
    cpu0, own0, t0 = {k: cpu_seconds(p) for k, p in procs.items()}, time.process_time(), time.perf_counter()
    for i in range(n):
        call(i)
    wall = time.perf_counter() - t0
    busy = {f"{k}_busy": (cpu_seconds(p) - cpu0[k]) / wall for k, p in procs.items()}
    return {"n": n, "wall_s": wall, "bench_busy": (time.process_time() - own0) / wall, **busy}


def _enqueue_only(target: str, rds: RedisServer, procs: dict[str, psutil.Process], reps: int,
                  n: int) -> dict[str, list[dict]]:
    """Enqueues one at a time: Concord's Enqueue (sync stub) and, if installed, RQ's."""
    calls: dict[str, Callable[[int], object]] = {}
    with grpc.insecure_channel(target) as channel:
        stub = queue_pb2_grpc.QueueServiceStub(channel)
        calls["enqueue_seq"] = lambda i: stub.Enqueue(pb.EnqueueRequest(queue=f"{QUEUE}:seq", tasks=[new_task(i)]),
                                                      timeout=10)
        if rq is not None:
            rq_queue = rq.Queue(f"{QUEUE}:rq", connection=rds.client())
            calls["rq_seq"] = lambda i: rq_queue.enqueue(noop, i)
        out: dict[str, list[dict]] = {k: [] for k in calls}
        for call in calls.values():
            _sequential(max(n // 5, 100), call, procs)  # warm-up
        for _ in range(reps):
            for kind, call in calls.items():
                out[kind].append(_sequential(n, call, procs))
    return out


def _per_task(runs: dict[str, list[dict]]) -> None:
    """Adds per-task figures to every run record (a batched call moves BATCH tasks)."""
    for kind, records in runs.items():
        for r in records if kind in TASKS_PER_CALL else ():
            tasks = r["n"] * TASKS_PER_CALL[kind]
            r["tasks_per_s"] = tasks / r["wall_s"]
            if "cpu_s" in r:
                r["cpu_per_task_s"] = r["cpu_s"] / tasks


def medians(records: list[dict], key: str) -> tuple[float, list[float]]:
    """The median of ``key`` over per-repetition records, and the values behind it."""
    values = [r[key] for r in records]
    return median(values), values


def run(ctx: Context) -> tuple[list[Row], dict]:
    n_empty, n_tasks, n_batches, n_seq = (2000, 1000, 32, 500) if ctx.quick else (6000, 2000, 64, 1000)
    # Raw stubs with a batch's acks all in flight (thousands on one channel): past the
    # default per-connection stream cap the server refuses some (REFUSED_STREAM), which
    # the client library repeats and raw stubs do not. The cost measured is the same.
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC),
                                                      extra_args=("--max-streams-per-connection", "100000")) as srv:
        redis_ps = psutil.Process(rds.proc.pid)
        runs = asyncio.run(_measure(srv.target, srv.ps, rds, redis_ps, ctx.reps, n_empty, n_tasks, n_batches))
        runs |= _enqueue_only(srv.target, rds, {"server": srv.ps, "redis": redis_ps}, ctx.reps, n_seq)
    _per_task(runs)

    def med(kind: str, key: str) -> tuple[float, list[float]]:
        return medians(runs[kind], key)

    def busy(kind: str, key: str = "server_busy") -> float:
        return med(kind, key)[0]

    empty_cpu, empty_rate = med("empty", "cpu_per_task_s")[0], med("empty", "tasks_per_s")[0]
    rows = []
    for kind, (label, unit) in KINDS.items():
        cpu, cpu_runs = med(kind, "cpu_per_task_s")
        rate, rate_runs = med(kind, "tasks_per_s")
        compared = kind != "empty"  # the empty call is the baseline itself
        rows.append(Row(SC, f"{label}: server CPU/{unit}", cpu, "s", baseline=empty_cpu if compared else None,
                        baseline_label="empty call" if compared else "", runs=cpu_runs))
        rows.append(Row(SC, f"{label}: {unit}s/s", rate, "/s", baseline=empty_rate if compared else None,
                        baseline_label="empty calls/s" if compared else "", runs=rate_runs,
                        note=f"server {busy(kind):.0%} of a core"))
    single_cpu = med("single", "cpu_per_task_s")[0]
    kept_cpu = med("kept", "cpu_per_task_s")[0]
    ratio = kept_cpu / single_cpu
    rows.append(Row(SC, "results on / off: server CPU per task, kept vs single", ratio, "x",
                    target=f"≤ {RESULTS_TARGET}×", passed=ratio <= RESULTS_TARGET,
                    runs=[k["cpu_per_task_s"] / s["cpu_per_task_s"] for k, s in zip(runs["kept"], runs["single"])]))
    on, off = med("events_on", "cpu_per_task_s")[0], med("events_off", "cpu_per_task_s")[0]
    rows.append(Row(SC, "events on / off: server + Redis CPU per task, single vs quiet", on / off, "x",
                    target=f"≤ {EVENTS_TARGET}×", passed=on / off <= EVENTS_TARGET,
                    runs=[a["cpu_per_task_s"] / b["cpu_per_task_s"] for a, b in zip(runs["events_on"],
                                                                                runs["events_off"])]))
    rows.append(Row(SC, "memory per retained finished task (hash + done-set entry; 16-byte payload and result)",
                    runs["retained"][0]["bytes_per_task"], "B", note="Redis MEMORY USAGE after the kept runs"))
    single_rate = med("single", "tasks_per_s")[0]
    book_rate, book_runs = med("book", "tasks_per_s")
    rows.append(Row(SC, "book queue (RPUSH + BLPOP, redis.asyncio): tasks/s", book_rate, "/s", baseline=single_rate,
                    baseline_label="Concord single", runs=book_runs,
                    note=f"Redis {busy('book'):.0%} of a core, {med('book', 'cpu_per_task_s')[0] * 1e6:.0f} µs "
                         "Redis CPU/task; no ack"))

    def seq_note(kind: str) -> str:
        server = f"server {busy(kind):.0%}, " if kind == "enqueue_seq" else ""
        return f"{server}Redis {busy(kind, 'redis_busy'):.0%}, bench client {busy(kind, 'bench_busy'):.0%} of a core"

    seq_rate, seq_runs = med("enqueue_seq", "tasks_per_s")
    rows.append(Row(SC, "Concord Enqueue(1), one at a time (sync stub): enqueues/s", seq_rate, "/s", runs=seq_runs,
                    note=seq_note("enqueue_seq")))
    rq_label = "RQ Queue.enqueue, one at a time, enqueue only: enqueues/s"
    if rq is None:
        rows.append(Row(SC, rq_label, math.nan, "/s", note="unavailable: rq is not installed (`make` installs it)"))
    else:
        rq_rate, rq_runs = med("rq_seq", "tasks_per_s")
        rows.append(Row(SC, rq_label, rq_rate, "/s", baseline=seq_rate, baseline_label="Concord Enqueue one at a time",
                        runs=rq_runs, note=f"rq {rq.__version__}; {seq_note('rq_seq')}"))
    details = {"in_flight": IN_FLIGHT, "batch": BATCH, "n_empty": n_empty, "n_tasks": n_tasks,
               "n_batches": n_batches, "n_sequential": n_seq, "rq": rq.__version__ if rq else None, "runs": runs}
    return rows, details

"""Queue peer arena: Concord's Worker against BullMQ, Celery and arq on one Valkey, in
one run, with the same workload, each driven the way its own users drive it.

The peers are installed by the scenario itself when missing, from the package
registries only (bench/peers/install.py: ``npm ci`` of a pinned lock file for
BullMQ, a venv of its own under .tools/peers/ for Celery and for arq). A peer that
cannot be installed gets n/a rows saying why.

One Valkey (harness.redis_server) serves all of them; one concord-server
(harness.concord_server) runs on it for Concord. Every peer runs as two processes
of its own, a **producer** and a **worker**, so each side's CPU is read from the
kernel (psutil, user + system, the worker's child processes included: Celery's
prefork pool):

  concord  bench/peers/concord/{producer,worker}.py in the main venv: the Python
           client, ``queue.put_many`` of BATCH tasks a call; ``concord.Worker``
           (threads) with concurrency CONCORD_CONCURRENCY
  bullmq   bench/peers/bullmq/{producer,worker}.mjs under node: ``Queue.addBulk``
           of BATCH jobs a call; a ``Worker`` with concurrency 50 (ioredis)
  celery   bench/peers/celery/{producer,celery_app}.py: ``noop.delay()`` in a loop;
           ``celery -A celery_app worker``, the prefork pool with Celery's default
           concurrency (the cores); Redis broker and Redis result backend
  arq      bench/peers/arq/{producer,arq_worker}.py: ``await enqueue_job()`` in a
           loop; ``arq arq_worker.WorkerSettings`` with arq's defaults (max_jobs 10,
           poll_delay 0.5 s)

Every task is a no-op whose arguments are (i, due); every peer keeps its default
for finished tasks' results (Concord the newest 1,000, BullMQ all completed jobs,
Celery's backend a day, arq an hour).

Each repetition, for each peer in turn (the order rotates between repetitions), with
a fresh worker and producer on a fresh queue name:

  warm-up     WARMUP tasks enqueued and finished (connections, caches, JIT)
  throughput  N no-op tasks (fewer with --quick) sent as fast as the producer sends
              them while the worker runs them: tasks/s = N / (the worker's N-th
              finished task - the producer's first enqueue call), both read on
              CLOCK_MONOTONIC (system-wide on Linux: Python's time.monotonic_ns()
              and node's process.hrtime read the same clock). "Finished" is each
              peer's own end of a task: Concord's ack answered (worker.processed),
              BullMQ's 'completed' event, Celery's task_postrun (result stored, the
              message acked before the task started: early acks, the default), arq's
              after_job_end (job removed, result stored). CPU of Valkey, the server
              (Concord), the producer and the worker over that window, per task.
  delayed     M tasks, one every GAP, each with a delay drawn from DELAY_MS (whole ms,
              the same draws for every peer in a repetition): Concord ``put(...,
              delay=)``, BullMQ ``add(..., {delay})``, Celery ``apply_async(...,
              countdown=)``, arq ``enqueue_job(..., _defer_by=)``. The producer reads
              the clock just before the call and sends due = now + delay in the
              task; the task's body notes now - due when it starts: its lateness.
              Tasks not started GRACE s after their time count as lost.

Concord's server CPU per task is compared with an empty unary call's, measured in the
same run as cost.py measures it (grpc.health.v1 Check, IN_FLIGHT at a time, on the
same server, before the peers run).

Targets (from the issue): Concord's end-to-end tasks/s >= 1.0x BullMQ's and >= 2x
Celery's; Concord's server CPU per task <= 0.3x an empty call's; Concord's delayed
lateness p99 <= 0.5x BullMQ's. Rows show medians over --reps repetitions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import queue
import random
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..harness import (
    _die_with_parent,
    _tail,
    concord_server,
    cpu_seconds,
    median,
    percentile,
    redis_server,
)
from ..peers.install import PEERS as PEERS_DIR
from ..peers.install import PeerUnavailable, node_peer, python_peer
from ..report import Row, fmt
from . import Context
from .cost import IN_FLIGHT, measure_kinds

SC = "peers-queue"
IMPLS = ("concord", "bullmq", "celery", "arq")
PEER = {"concord": "Concord", "bullmq": "BullMQ", "celery": "Celery", "arq": "arq"}
CONCORD_CONCURRENCY = 50  # threads running callbacks; each Dequeue takes up to the free ones
BULLMQ_CONCURRENCY = 50
BATCH = 500  # tasks per put_many / addBulk (Celery and arq have no bulk enqueue)
WARMUP = 200
GAP = 0.008
DELAY_MS = (50, 500)
GRACE = 5.0
TARGET_VS_BULLMQ = 1.0  # Concord tasks/s >= this x BullMQ's
TARGET_VS_CELERY = 2.0  # ... and >= this x Celery's
TARGET_CPU = 0.3  # Concord server CPU per task <= this x an empty call's
TARGET_LATE = 0.5  # Concord delayed lateness p99 <= this x BullMQ's


# --- one client process ----------------------------------------------------------------

class Peer:
    """A producer or worker process speaking the bench/peers protocol: JSON lines on
    stdout ({"ready"}, {"count","t"}, {"sent","t0","t1"}, {"late","i"}), commands as
    JSON lines on stdin. Lines that are not JSON objects (a banner) are skipped."""

    def __init__(self, what: str, args: list[str], cwd: Path, env: dict[str, str], log: Path) -> None:
        self.what, self.log = what, log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen(args, cwd=cwd, env={**os.environ, **env}, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, preexec_fn=_die_with_parent)
        self.ps = psutil.Process(self.proc.pid)
        self.late: list[tuple[int, int]] = []  # (i, lateness ns)
        self._msgs: queue.Queue[dict] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if not line.startswith(b"{"):
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "late" in msg:
                self.late.append((msg["i"], msg["late"]))
            else:
                self._msgs.put(msg)

    def send(self, cmd: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(cmd) + "\n").encode())
        self.proc.stdin.flush()

    def expect(self, key: str, timeout: float) -> dict:
        """The next message carrying ``key``; fails when the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                msg = self._msgs.get(timeout=0.05)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.what} exited with {self.proc.returncode}:\n{_tail(self.log)}") from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.what}: no {key!r} within {timeout:.0f}s:\n{_tail(self.log)}") from None
                continue
            if "failed" in msg:
                raise RuntimeError(f"{self.what}: a task failed: {msg['failed']}")
            if key in msg:
                return msg

    def cpu(self) -> float:
        """User + system CPU of the process and its live children (Celery's pool)."""
        total = 0.0
        with contextlib.suppress(psutil.Error):
            total += cpu_seconds(self.ps)
            for child in self.ps.children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    total += cpu_seconds(child)
        return total

    def stop(self) -> None:
        children: list[psutil.Process] = []
        with contextlib.suppress(psutil.Error):
            children = self.ps.children(recursive=True)
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for child in children:  # a pool child its parent did not take down
            with contextlib.suppress(psutil.Error):
                child.kill()
        self._reader.join(5)


# --- how each peer is started --------------------------------------------------------------

@dataclass
class Impl:
    name: str
    url: str  # PEER_URL: Concord's host:port, the others' redis:// URL
    cwd: Path
    worker: list[str]
    producer: list[str]
    env: dict[str, str] = field(default_factory=dict)
    config: str = ""  # how it is driven, for the rows' notes
    version: str = ""


def _impls(redis_url: str, target: str) -> tuple[dict[str, Impl], dict[str, str]]:
    """Each peer's commands, installing what is missing; and why a peer is unavailable."""
    impls: dict[str, Impl] = {}
    missing: dict[str, str] = {}
    concord_dir = PEERS_DIR / "concord"
    impls["concord"] = Impl("concord", target, concord_dir, [sys.executable, "worker.py"],
                            [sys.executable, "producer.py"], {"PEER_CONCURRENCY": str(CONCORD_CONCURRENCY)},
                            f"put_many of {BATCH}; Worker concurrency {CONCORD_CONCURRENCY} (threads)")
    try:
        where = node_peer("bullmq")
        node = shutil.which("node") or "node"
        version = json.loads((where / "node_modules" / "bullmq" / "package.json").read_text())["version"]
        node_version = subprocess.run([node, "--version"], check=False, capture_output=True, text=True).stdout.strip()
        impls["bullmq"] = Impl("bullmq", redis_url, where, [node, "worker.mjs"], [node, "producer.mjs"],
                               {"PEER_CONCURRENCY": str(BULLMQ_CONCURRENCY)},
                               f"addBulk of {BATCH}; Worker concurrency {BULLMQ_CONCURRENCY}",
                               f"bullmq {version}, node {node_version}")
    except (PeerUnavailable, OSError, ValueError, KeyError) as exc:
        missing["bullmq"] = str(exc)
    try:
        python = python_peer("celery")
        impls["celery"] = Impl("celery", redis_url + "/0", PEERS_DIR / "celery",
                               [str(python), "-m", "celery", "-A", "celery_app", "worker", "--loglevel", "WARNING"],
                               [str(python), "producer.py"], {},
                               f"delay() loop; prefork pool, concurrency {os.cpu_count()} (the default: cores); "
                               "Redis broker + Redis result backend",
                               _pinned(PEERS_DIR / "celery" / "requirements.txt", "celery"))
    except PeerUnavailable as exc:
        missing["celery"] = str(exc)
    try:
        python = python_peer("arq")
        impls["arq"] = Impl("arq", redis_url, PEERS_DIR / "arq", [str(python.parent / "arq"),
                                                                  "arq_worker.WorkerSettings"],
                            [str(python), "producer.py"], {},
                            "enqueue_job loop; defaults: max_jobs 10, poll_delay 0.5 s, job log at INFO",
                            _pinned(PEERS_DIR / "arq" / "requirements.txt", "arq"))
    except PeerUnavailable as exc:
        missing["arq"] = str(exc)
    return impls, missing


def _pinned(requirements: Path, name: str) -> str:
    for line in requirements.read_text().splitlines():
        if line.split("[")[0].split("==")[0] == name:
            return f"{name} {line.split('==')[1]}"
    return name


# --- one peer, one repetition ----------------------------------------------------------------

def _run_peer(impl: Impl, rep: int, n: int, delays_ms: list[int], tmp: Path, redis_ps: psutil.Process,
              server_ps: psutil.Process | None) -> dict:
    queue_name = f"bench-peers-{impl.name}-{rep}"
    env = {"PEER_URL": impl.url, "PEER_QUEUE": queue_name, "PEER_MARKS": f"{WARMUP},{WARMUP + n}", **impl.env}
    log = tmp / f"peers-{impl.name}-{rep}.log"
    worker = Peer(f"{impl.name} worker", impl.worker, impl.cwd, env, log)
    producer = None
    try:
        worker.expect("ready", 90)
        producer = Peer(f"{impl.name} producer", impl.producer, impl.cwd, env, log)
        producer.expect("ready", 60)
        producer.send({"cmd": "bulk", "start": 0, "n": WARMUP, "batch": BATCH})
        producer.expect("sent", 60)
        worker.expect("count", 60)

        procs = {"redis": redis_ps, "producer": producer, "worker": worker}
        if server_ps is not None:
            procs["server"] = server_ps

        def cpu() -> dict[str, float]:
            return {k: p.cpu() if isinstance(p, Peer) else cpu_seconds(p) for k, p in procs.items()}

        timeout = 60 + n / 50  # arq's defaults run a few hundred tasks/s
        cpu0, wall0 = cpu(), time.monotonic()
        producer.send({"cmd": "bulk", "start": WARMUP, "n": n, "batch": BATCH})
        sent = producer.expect("sent", timeout)
        done = worker.expect("count", timeout)
        cpu1, wall1 = cpu(), time.monotonic()
        e2e = (done["t"] - sent["t0"]) / 1e9
        window = wall1 - wall0
        cpu_s = {k: cpu1[k] - cpu0[k] for k in cpu0}
        record = {"n": n, "e2e_s": e2e, "tasks_per_s": n / e2e, "enqueue_s": (sent["t1"] - sent["t0"]) / 1e9,
                  "window_s": window, "cpu_s": cpu_s, "cpu_per_task_s": {k: v / n for k, v in cpu_s.items()},
                  "busy": {k: v / window for k, v in cpu_s.items()}}

        worker.late.clear()
        producer.send({"cmd": "delayed", "delays_ms": delays_ms, "gap_ms": GAP * 1000})
        sent = producer.expect("sent", 60 + len(delays_ms) * GAP * 10)
        deadline = sent["t1"] / 1e9 + max(delays_ms) / 1000 + GRACE
        while len(worker.late) < len(delays_ms) and time.monotonic() < deadline:
            time.sleep(0.02)
        late = [ns / 1e9 for _, ns in worker.late]
        record |= {"delayed": len(delays_ms), "lost": len(delays_ms) - len({i for i, _ in worker.late}),
                   "late_p50_s": percentile(late, 50), "late_p99_s": percentile(late, 99),
                   "late_max_s": max(late, default=math.nan)}
        return record
    finally:
        if producer is not None:
            producer.stop()
        worker.stop()


# --- the empty call, as cost.py measures it ---------------------------------------------------

async def _empty_calls(target: str, ps: psutil.Process, reps: int, n: int) -> list[dict]:
    async with grpc.aio.insecure_channel(target) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        check = health_pb2.HealthCheckRequest()

        async def empty(_: int) -> None:
            await health.Check(check, timeout=10)

        return (await measure_kinds({"empty": (empty, n)}, reps, ps))["empty"]


# --- the scenario --------------------------------------------------------------------------

def run(ctx: Context) -> tuple[list[Row], dict]:
    n, m, n_empty = (2000, 150, 2000) if ctx.quick else (10_000, 400, 6000)
    runs: dict[str, list[dict]] = {impl: [] for impl in IMPLS}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        redis_ps = psutil.Process(rds.proc.pid)
        impls, missing = _impls(rds.url, srv.target)
        empty = asyncio.run(_empty_calls(srv.target, srv.ps, ctx.reps, n_empty))
        for rep in range(ctx.reps):
            rng = random.Random(rep)
            delays = [rng.randint(*DELAY_MS) for _ in range(m)]
            order = IMPLS[rep % len(IMPLS):] + IMPLS[:rep % len(IMPLS)]
            for name in order:
                if name not in impls:
                    continue
                print(f"  {name} (repetition {rep + 1}/{ctx.reps}) ...", file=sys.stderr, flush=True)
                runs[name].append(_run_peer(impls[name], rep, n, delays, ctx.tmp, redis_ps,
                                            srv.ps if name == "concord" else None))
    details = {"n": n, "delayed": m, "warmup": WARMUP, "batch": BATCH, "gap_s": GAP, "delay_ms": DELAY_MS,
               "grace_s": GRACE, "n_empty": n_empty, "in_flight_empty": IN_FLIGHT, "reps": ctx.reps,
               "peers": {k: {"config": v.config, "version": v.version, "worker": v.worker, "producer": v.producer}
                         for k, v in impls.items()},
               "unavailable": missing, "empty": empty, "runs": runs}
    return _rows(runs, empty, impls, missing, n, m), details


def _med(records: list[dict], *path: str) -> tuple[float, list[float]]:
    values = []
    for r in records:
        v = r
        for key in path:
            v = v[key]
        values.append(v)
    return median(values), values


def _rows(runs: dict[str, list[dict]], empty: list[dict], impls: dict[str, Impl], missing: dict[str, str],
          n: int, m: int) -> list[Row]:
    """Concord's own figures, then for each peer the same figures as arena rows: the
    value Concord's, the baseline the peer's from the same run (Row.peer names it)."""
    empty_cpu, empty_runs = _med(empty, "cpu_per_op_s")
    rows = [Row(SC, "empty call (health Check): server CPU/call", empty_cpu, "s", runs=empty_runs,
                note=f"{IN_FLIGHT} in flight, as in cost")]
    if not runs["concord"]:
        return rows + [Row(SC, "Concord Worker: no-op tasks/s", math.nan, "/s", note="no runs")]

    def fig(k: str, key: str) -> tuple[float, list[float]]:
        return _med(runs[k], key)

    def cpu(k: str, *who: str) -> tuple[float, list[float]]:
        """CPU per task of these processes together (server, redis, producer, worker)."""
        values = [sum(r["cpu_per_task_s"][w] for w in who) for r in runs[k]]
        return median(values), values

    def busy(k: str) -> str:
        parts = [f"{label} {_med(runs[k], 'busy', w)[0]:.0%}" for w, label in
                 (("server", "server"), ("redis", "Valkey"), ("producer", "producer"), ("worker", "worker"))
                 if w in runs[k][0]["busy"]]
        return ", ".join(parts) + " of a core"

    def clients(k: str) -> str:
        return f"producer {fmt(cpu(k, 'producer')[0], 's')} + worker {fmt(cpu(k, 'worker')[0], 's')}"

    # Concord's own
    rate, rate_runs = fig("concord", "tasks_per_s")
    srv, srv_runs = cpu("concord", "server")
    side, side_runs = cpu("concord", "server", "redis")
    own, own_runs = cpu("concord", "producer", "worker")
    p50, p50_runs = fig("concord", "late_p50_s")
    p99, p99_runs = fig("concord", "late_p99_s")
    rows += [
        Row(SC, f"Concord Worker: no-op tasks/s, enqueue to ack ({n:,} tasks)", rate, "/s", runs=rate_runs,
            note=f"{impls['concord'].config}; {busy('concord')}; "
                 f"enqueueing took {fmt(fig('concord', 'enqueue_s')[0], 's')}"),
        Row(SC, "Concord: server CPU per task (concord-server, enqueue to ack)", srv, "s", baseline=empty_cpu,
            baseline_label="empty call", target=f"≤ {TARGET_CPU:g}× empty call", passed=srv <= TARGET_CPU * empty_cpu,
            runs=srv_runs),
        Row(SC, "Concord: server + Valkey CPU per task", side, "s", runs=side_runs,
            note=f"Valkey alone {fmt(cpu('concord', 'redis')[0], 's')}"),
        Row(SC, "Concord: clients' CPU per task (producer + worker processes)", own, "s", runs=own_runs,
            note=clients("concord")),
        Row(SC, "Concord: delayed-task lateness p50", p50, "s", runs=p50_runs,
            note=f"{m} tasks, one every {GAP * 1e3:g} ms, delays {DELAY_MS[0]}-{DELAY_MS[1]} ms"),
        Row(SC, "Concord: delayed-task lateness p99", p99, "s", runs=p99_runs,
            note=f"max {fmt(fig('concord', 'late_max_s')[0], 's')}"),
    ]
    targets = {("bullmq", "tasks"): ("≥", TARGET_VS_BULLMQ), ("celery", "tasks"): ("≥", TARGET_VS_CELERY),
               ("bullmq", "p99"): ("≤", TARGET_LATE)}

    def judged(k: str, what: str, ratio: float) -> dict:
        if (k, what) not in targets:
            return {}
        op, bound = targets[(k, what)]
        passed = None if math.isnan(ratio) else ratio >= bound if op == "≥" else ratio <= bound
        return {"target": f"{op} {bound:g}× {PEER[k]}", "passed": passed}

    # each peer: the value is Concord's figure, the baseline the peer's
    for k in IMPLS[1:]:
        peer = PEER[k]
        mark = {"peer": peer} if "peer" in Row.__dataclass_fields__ else {}
        if not runs[k]:
            reason = missing.get(k, "no runs").splitlines()[0]
            rows.append(Row(SC, f"Concord vs {peer}: no-op tasks/s", rate, "/s", note=f"{peer} unavailable: {reason}",
                            **judged(k, "tasks", math.nan), **mark))
            continue
        theirs = {key: fig(k, key)[0] for key in ("tasks_per_s", "enqueue_s", "late_p50_s", "late_p99_s",
                                                   "late_max_s")}
        broker, their_clients = cpu(k, "redis")[0], cpu(k, "producer", "worker")[0]
        rows += [
            Row(SC, f"Concord vs {peer}: no-op tasks/s, enqueue to ack", rate, "/s", baseline=theirs["tasks_per_s"],
                baseline_label=peer, runs=rate_runs, **judged(k, "tasks", rate / theirs["tasks_per_s"]), **mark,
                note=f"{peer}: {impls[k].version}; {impls[k].config}; {busy(k)}; "
                     f"enqueueing took {fmt(theirs['enqueue_s'], 's')}"),
            Row(SC, f"Concord vs {peer}: server-or-broker CPU per task (Concord: server + Valkey; {peer}: Valkey)",
                side, "s", baseline=broker, baseline_label=f"{peer}'s Valkey", runs=side_runs, **mark),
            Row(SC, f"Concord vs {peer}: clients' CPU per task (producer + worker)", own, "s",
                baseline=their_clients, baseline_label=peer, runs=own_runs, **mark,
                note=f"{peer}: {clients(k)}" + (" (the pool's children included)" if k == "celery" else "")),
            Row(SC, f"Concord vs {peer}: delayed-task lateness p50", p50, "s", baseline=theirs["late_p50_s"],
                baseline_label=peer, runs=p50_runs, **mark),
            Row(SC, f"Concord vs {peer}: delayed-task lateness p99", p99, "s", baseline=theirs["late_p99_s"],
                baseline_label=peer, runs=p99_runs, **judged(k, "p99", p99 / theirs["late_p99_s"]), **mark,
                note=f"{peer}'s max {fmt(theirs['late_max_s'], 's')}"),
        ]
    for k in IMPLS:
        lost = sum(r["lost"] for r in runs[k])
        if lost:
            rows.append(Row(SC, f"{PEER[k]}: delayed tasks not started within {GRACE:g} s of their time", lost, "",
                            target="0", passed=False))
    return rows

"""Rate limits: Concord's RateLimitService against Gubernator and the Python `limits`
library, on the same key mix, in one run.

Peers, from the registries: Gubernator v2 (github.com/gubernator-io/gubernator, the
Go module from the module proxy) run as its own gRPC service, one process per node
(bench/peers/gubernator: ``gubbench serve``), one node and three; and `limits` (what
Flask-Limiter and slowapi use) on the same Valkey as Concord, its async API over
redis-py.

The key mix (both Go-driven and Python-driven loads): every check is one hit, 90% on
HOT keys and the rest on COLD ones, each key limited to RATE per PERIOD_MS (Concord:
GCRA with burst RATE; Gubernator: TOKEN_BUCKET, its default; `limits`: the moving
window, its exact one). The hot keys are driven well past their limit, so refusals
and accuracy are exercised.

Go-driven (``gubbench load``, IN_FLIGHT calls at a time, SECONDS per kind), so the
client costs the same for both:

  empty        gRPC health Check on concord-server: the baseline call
  concord-1    CheckMany with one check a call (the same script as Check)
  concord-100  CheckMany with 100 checks a call
  gub1-1, gub1-100         Gubernator, one node, GetRateLimits with 1 / 100 requests
  concord-1-paced, gub1-1-paced  one check a call at PACED calls a second offered
  gub3-100-local           three nodes, each call to one of them (round robin), BATCHING
                           (the default: a key's owner decides, forwarded if needed)
  gub3-100-global          three nodes, GLOBAL behaviour (each node answers from its own
                           copy, synced in the background: its own excess is counted)

Python-driven (one asyncio loop, IN_FLIGHT at a time): ``limits`` MovingWindow hits
against Concord's Check through grpc.aio, one check per call each.

Figures: decisions/s; p50 and p99 of a call's latency; server CPU per decision
(concord-server's process, and Valkey's beside it; Gubernator's node processes;
`limits` has no server, Valkey's CPU is shown) in units of an empty call's server
CPU; accuracy: for every key, hits allowed beyond RATE x (seconds / period + 1), the
most any of these algorithms should let through in the run (summed over keys).

The tenant rate's cost (--tenant-rate, issue 32 item 3): QueueService Stats, the
cheapest call the tenant limits count, on three more servers on the same Valkey (no
tenant rate; --tenant-rate 1,000,000 across replicas, one GCRA check in Redis per
call; the same --tenant-rate-per-process, a local bucket): server (and Valkey) CPU per
call and calls/s, each against the unlimited server's.

Targets (issue 32): with 100 checks a call, Concord's decisions/s >= 1x Gubernator's
(one node); one check a call, Concord's p99 <= 2x Gubernator's and its server CPU per
decision <= 1.3 empty calls; zero grants beyond the limit for Concord in every run.
The p99 target is judged at one offered load (PACED calls a second, open loop, latency
from when each call was due) that both serve with room to spare; at saturation it is
shown too, but there a closed loop's latency is IN_FLIGHT over the throughput.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import grpc
import psutil

from concord._convert import duration
from concord.ratelimit.v1 import ratelimit_pb2 as pb
from concord.ratelimit.v1 import ratelimit_pb2_grpc

from ..harness import concord_server, cpu_seconds, free_port, median, percentile, redis_server
from ..peers.install import go_program
from ..report import Row
from . import Context

SC = "ratelimit"
SRC = Path(__file__).resolve().parent.parent / "peers" / "gubernator"
IN_FLIGHT = 16
HOT, COLD = 10, 1000
RATE, PERIOD_MS = 100, 1000
BATCH = 100
TARGETS = {"batch": 1.0, "p99": 2.0, "cpu": 1.3}
PACED = 400  # calls a second offered in the latency comparison: a fifth of Concord's one-check capacity
TENANT_MODES = {"tenant-none": [], "tenant-shared": ["--tenant-rate", "1000000"],
                "tenant-process": ["--tenant-rate", "1000000", "--tenant-rate-per-process"]}


def _load(binary: Path, kind: str, targets: list[str], batch: int, seconds: float, prefix: str,
          global_: bool = False, per_second: float = 0) -> dict:
    args = [str(binary), "load", "-kind", kind, "-targets", ",".join(targets), "-batch", str(batch), "-conc",
            str(IN_FLIGHT), "-seconds", str(seconds), "-keys", str(COLD), "-hot", str(HOT), "-rate", str(RATE),
            "-period-ms", str(PERIOD_MS), "-prefix", prefix, "-per-second", str(per_second),
            *(["-global"] if global_ else [])]
    done = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 120, check=False)
    if done.returncode:
        raise RuntimeError(f"gubbench load {kind} failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _excess(allowed: dict[str, int], seconds: float) -> int:
    bound = RATE * (seconds * 1000 / PERIOD_MS + 1)
    return int(sum(max(0, n - bound) for n in allowed.values()))


class _Gubernator:
    """``nodes`` Gubernator processes that know each other."""

    def __init__(self, binary: Path, nodes: int, tmp: Path) -> None:
        self.addrs = [f"127.0.0.1:{free_port()}" for _ in range(nodes)]
        self.procs: list[subprocess.Popen] = []
        for addr in self.addrs:
            log = open(tmp / f"gubernator-{addr.split(':')[1]}.log", "wb")
            proc = subprocess.Popen([str(binary), "serve", "-grpc", addr, "-http", f"127.0.0.1:{free_port()}",
                                     "-peers", ",".join(self.addrs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=log)
            self.procs.append(proc)
            line = proc.stdout.readline().decode().strip() if proc.stdout else ""
            if line != "ready":
                self.close()
                raise RuntimeError(f"gubernator on {addr} did not start: {line!r}")
        self.ps = [psutil.Process(p.pid) for p in self.procs]

    def cpu(self) -> float:
        return sum(cpu_seconds(p) for p in self.ps)

    def close(self) -> None:
        for p in self.procs:
            if p.stdin:
                p.stdin.close()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


def _measured(run, *procs) -> dict:
    """run() under CPU accounting of each process given (None: skipped)."""
    before = [cpu_seconds(p) if hasattr(p, "cpu_times") else p.cpu() for p in procs]
    r = run()
    after = [cpu_seconds(p) if hasattr(p, "cpu_times") else p.cpu() for p in procs]
    r["cpu"] = [a - b for a, b in zip(after, before)]
    return r


async def _python_kinds(target: str, redis_url: str, seconds: float, prefix: str) -> dict[str, dict]:
    """limits' MovingWindow and Concord's Check, each IN_FLIGHT at a time from asyncio."""
    from limits import parse, storage
    from limits.aio import strategies

    out: dict[str, dict] = {}
    channel = grpc.aio.insecure_channel(target)
    stub = ratelimit_pb2_grpc.RateLimitServiceStub(channel)
    limit = pb.Limit(rate=RATE, period=duration(PERIOD_MS / 1000))
    store = storage.storage_from_string(redis_url.replace("redis://", "async+redis://"), implementation="redispy")
    mover = strategies.MovingWindowRateLimiter(store)
    item = parse(f"{RATE}/second" if PERIOD_MS == 1000 else f"{RATE} per {PERIOD_MS // 1000} seconds")

    async def concord_check(key: str) -> bool:
        return (await stub.Check(pb.CheckRequest(key=key, limit=limit, hits=1), timeout=10)).allowed

    async def limits_hit(key: str) -> bool:
        return await mover.hit(item, key)

    for kind, decide in (("limits-1", limits_hit), ("concord-py-1", concord_check)):
        allowed: dict[str, int] = {}
        lat: list[float] = []
        end = time.monotonic() + seconds
        rng = random.Random(7)

        async def worker() -> None:
            while time.monotonic() < end:
                key = f"{prefix}:{kind}:hot:{rng.randrange(HOT)}" if rng.random() < 0.9 else \
                    f"{prefix}:{kind}:cold:{rng.randrange(COLD)}"
                t0 = time.perf_counter()
                ok = await decide(key)
                lat.append((time.perf_counter() - t0) * 1000)
                if ok:
                    allowed[key] = allowed.get(key, 0) + 1

        start = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
        took = time.monotonic() - start
        out[kind] = {"calls": len(lat), "decisions": len(lat), "seconds": took, "errors": 0,
                     "p50_ms": percentile(lat, 50), "p99_ms": percentile(lat, 99), "allowed": allowed}
    await channel.close()
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    seconds = 2.0 if ctx.quick else 4.0
    binary = go_program(SRC, ctx.tmp, "gubbench")
    runs: dict[str, list[dict]] = {}

    def note(kind: str, r: dict) -> None:
        runs.setdefault(kind, []).append(r)

    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv:
        valkey = psutil.Process(rds.proc.pid)
        gub1 = _Gubernator(binary, 1, ctx.tmp)
        gub3 = _Gubernator(binary, 3, ctx.tmp)
        try:
            for rep in range(ctx.reps):
                p = f"r{rep}-{os.getpid()}"
                c = [srv.target]
                note("empty", _measured(lambda: _load(binary, "empty", c, 1, seconds, p), srv.ps, valkey))
                for b in (1, BATCH):
                    note(f"concord-{b}", _measured(lambda: _load(binary, "concord", c, b, seconds, f"{p}c{b}"),
                                                   srv.ps, valkey))
                    note(f"gub1-{b}", _measured(lambda: _load(binary, "gubernator", gub1.addrs, b, seconds,
                                                              f"{p}g{b}"), gub1))
                # Latency at one offered load both serve with room to spare: at saturation a
                # closed loop's latency is only IN_FLIGHT / throughput (Little's law).
                note("concord-1-paced", _measured(lambda: _load(binary, "concord", c, 1, seconds, f"{p}cp",
                                                                per_second=PACED), srv.ps, valkey))
                note("gub1-1-paced", _measured(lambda: _load(binary, "gubernator", gub1.addrs, 1, seconds, f"{p}gp",
                                                             per_second=PACED), gub1))
                note("gub3-100-local", _measured(lambda: _load(binary, "gubernator", gub3.addrs, BATCH, seconds,
                                                               f"{p}l"), gub3))
                note("gub3-100-global", _measured(lambda: _load(binary, "gubernator", gub3.addrs, BATCH, seconds,
                                                                f"{p}g", global_=True), gub3))
                py = _measured(lambda: {"kinds": asyncio.run(_python_kinds(srv.target, rds.url, seconds, p))},
                               srv.ps, valkey)
                for kind, r in py["kinds"].items():
                    note(kind, {**r, "cpu": py["cpu"]})  # both Python kinds share one CPU reading: not used
        finally:
            gub1.close()
            gub3.close()
        for mode, flags in TENANT_MODES.items():
            with concord_server(rds.url, ctx.tmp, extra_args=flags) as limited:
                for rep in range(ctx.reps):
                    note(mode, _measured(lambda: _load(binary, "stats", [limited.target], 1, seconds,
                                                       f"bench:stats:{rep}"), limited.ps, valkey))
    return _rows(runs, seconds), {"in_flight": IN_FLIGHT, "seconds": seconds, "hot": HOT, "cold": COLD,
                                  "rate": RATE, "period_ms": PERIOD_MS, "runs": runs}


def _rows(runs: dict[str, list[dict]], seconds: float) -> list[Row]:
    def med(kind: str, f) -> tuple[float, list[float]]:
        values = [f(r) for r in runs[kind]]
        return median(values), values

    def per_s(r: dict) -> float:
        return r["decisions"] / r["seconds"]

    empty_cpu, _ = med("empty", lambda r: r["cpu"][0] / r["calls"])
    rows = [Row(SC, "empty call (health Check): server CPU/call", empty_cpu, "s")]
    labels = {"concord-1": "Concord, 1 check a call", "concord-100": f"Concord, {BATCH} checks a call",
              "gub1-1": "Gubernator 1 node, 1 a call", "gub1-100": f"Gubernator 1 node, {BATCH} a call",
              "concord-1-paced": f"Concord, 1 check a call, {PACED} calls/s offered",
              "gub1-1-paced": f"Gubernator 1 node, 1 a call, {PACED} calls/s offered",
              "gub3-100-local": f"Gubernator 3 nodes, {BATCH} a call", "gub3-100-global":
              f"Gubernator 3 nodes GLOBAL, {BATCH} a call", "limits-1": "limits (MovingWindow), 1 a call, Python",
              "concord-py-1": "Concord Check, 1 a call, Python"}
    for kind, label in labels.items():
        rate, rate_runs = med(kind, per_s)
        p50, _ = med(kind, lambda r: r["p50_ms"] / 1000)
        p99, p99_runs = med(kind, lambda r: r["p99_ms"] / 1000)
        excess, excess_runs = med(kind, lambda r: _excess(r["allowed"], r["seconds"]))
        errors = sum(r["errors"] for r in runs[kind])
        rows.append(Row(SC, f"{label}: decisions/s", rate, "/s", runs=rate_runs,
                        note=f"p50 {p50 * 1000:.2f} ms" + (f"; {errors} errors" if errors else "")))
        rows.append(Row(SC, f"{label}: p99 latency", p99, "s", runs=p99_runs))
        worst = max(excess_runs)
        rows.append(Row(SC, f"{label}: hits allowed beyond the limit", excess, "", runs=excess_runs,
                        target="0" if kind.startswith("concord") else "",
                        passed=(worst == 0) if kind.startswith("concord") else None,
                        note="worst run" if worst != excess else ""))
        if not kind.endswith("py-1") and kind != "limits-1":
            cpu, cpu_runs = med(kind, lambda r: r["cpu"][0] / max(1, r["decisions"]))
            rows.append(Row(SC, f"{label}: server CPU/decision", cpu, "s", baseline=empty_cpu,
                            baseline_label="empty call", runs=cpu_runs,
                            target=f"≤ {TARGETS['cpu']}×" if kind == "concord-1" else "",
                            passed=(cpu / empty_cpu <= TARGETS["cpu"]) if kind == "concord-1" else None,
                            note=(f"Valkey {median([r['cpu'][1] / max(1, r['decisions']) for r in runs[kind]]) * 1e6:.1f} µs"
                                  if kind.startswith("concord") else "")))
    c100, _ = med("concord-100", per_s)
    g100, _ = med("gub1-100", per_s)
    rows.append(Row(SC, f"decisions/s, {BATCH} a call: Concord vs Gubernator (1 node)", c100, "/s", baseline=g100,
                    baseline_label="Gubernator", target=f"≥ {TARGETS['batch']}×", passed=c100 >= g100 * TARGETS["batch"],
                    peer="Gubernator"))
    c99, _ = med("concord-1", lambda r: r["p99_ms"] / 1000)
    g99, _ = med("gub1-1", lambda r: r["p99_ms"] / 1000)
    rows.append(Row(SC, "p99 at saturation, 1 a call: Concord vs Gubernator (1 node)", c99, "s", baseline=g99,
                    baseline_label="Gubernator", peer="Gubernator",
                    note=f"{IN_FLIGHT} in flight as fast as answered: the throughput ratio, by Little's law"))
    c99, _ = med("concord-1-paced", lambda r: r["p99_ms"] / 1000)
    g99, _ = med("gub1-1-paced", lambda r: r["p99_ms"] / 1000)
    rows.append(Row(SC, f"p99 at {PACED} calls/s, 1 a call: Concord vs Gubernator (1 node)", c99, "s", baseline=g99,
                    baseline_label="Gubernator", target=f"≤ {TARGETS['p99']}×", passed=c99 <= g99 * TARGETS["p99"],
                    peer="Gubernator"))
    base_cpu, _ = med("tenant-none", lambda r: sum(r["cpu"]) / r["calls"])
    base_rate, _ = med("tenant-none", lambda r: r["calls"] / r["seconds"])
    rows.append(Row(SC, "Stats call, no tenant rate: server + Valkey CPU/call", base_cpu, "s"))
    for mode, label in (("tenant-shared", "tenant rate across replicas"),
                        ("tenant-process", "tenant rate per process")):
        cpu, cpu_runs = med(mode, lambda r: sum(r["cpu"]) / r["calls"])
        rate, _ = med(mode, lambda r: r["calls"] / r["seconds"])
        rows.append(Row(SC, f"Stats call, {label}: server + Valkey CPU/call", cpu, "s", baseline=base_cpu,
                        baseline_label="no tenant rate", runs=cpu_runs,
                        note=f"{rate:,.0f} calls/s against {base_rate:,.0f}/s"))
    cp, _ = med("concord-py-1", per_s)
    lp, _ = med("limits-1", per_s)
    rows.append(Row(SC, "decisions/s from Python, 1 a call: Concord vs limits", cp, "/s", baseline=lp,
                    baseline_label="limits", peer="limits"))
    return rows

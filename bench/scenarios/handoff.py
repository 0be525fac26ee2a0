"""Handoff: N clients fighting over one lock (hold 2 ms, think 5 ms).

Figures per run, over the measured window only:
  acquisitions/s     grants whose acquire returned inside the window, per second
  handoff latency    for each grant whose acquire was already waiting when the previous
                     holder sent its release: acq_end(this) - rel_sent(previous).
                     Grants are put in order by acq_end; since holds never overlap
                     (checked: "overlaps" must be 0) that is the order they happened in.
  wait               duration of each acquire call
  min/mean share     the least lucky client's acquisitions over the mean per client
                     (1.0 = perfectly even, 0 = someone starved)

Every implementation runs the same workload against the same Redis; the clients are
spread over CLIENT_PROCS processes so that no single client process (its GIL, its
event loop) is what limits the figures. The baseline for latencies is the round trip
of an empty gRPC call (health Check) from an asyncio client, measured in the same run.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing
import time
from collections import Counter
from itertools import pairwise

import grpc
import psutil
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ..harness import concord_server, cpu_seconds, median, percentile, redis_server
from ..report import Row
from . import Context
from .handoff_clients import Spec, main as client_main

IMPLS = ("concord", "redis-py", "redis-py-1ms", "python-redis-lock")
LABELS = {"concord": "Concord", "redis-py": "redis-py Lock sleep=0.1", "redis-py-1ms": "redis-py Lock sleep=0.001",
          "python-redis-lock": "python-redis-lock"}
CLIENT_COUNTS = (8, 32)
CLIENT_PROCS = 2
HOLD, THINK, WAIT, TTL = 0.002, 0.005, 30.0, 10.0
TARGET_P99 = 0.002
TARGET_SHARE = 0.5


def _run_once(impl: str, n: int, target: str, name: str, duration: float) -> dict:
    """One run: spawn the client processes, start them together, collect their events."""
    ctx = multiprocessing.get_context("spawn")
    procs, conns = [], []
    try:
        for p in range(CLIENT_PROCS):
            ids = tuple(range(p, n, CLIENT_PROCS))
            parent, child = ctx.Pipe()
            spec = Spec(impl, target, name, ids, HOLD, THINK, WAIT, TTL)
            proc = ctx.Process(target=client_main, args=(child, spec), daemon=True)
            proc.start()
            child.close()
            procs.append(proc)
            conns.append(parent)
        for c in conns:
            if not c.poll(60) or c.recv() != "ready":
                raise RuntimeError(f"{impl} client process did not get ready")
        start_at = time.monotonic() + 0.05
        end_at = start_at + duration
        for c in conns:
            c.send((start_at, end_at))
        results = []
        for c in conns:
            if not c.poll(duration + WAIT + 30):
                raise RuntimeError(f"{impl} client process did not report")
            results.append(c.recv())
    finally:
        for proc in procs:
            proc.join(10)
            if proc.is_alive():
                proc.kill()
                proc.join()
    events = [e for r in results for e in r["events"]]
    return {**_analyse(events, n, start_at, end_at), "client_cpu_busy": [r["client_cpu_busy"] for r in results]}


def _analyse(events: list, n: int, start_at: float, end_at: float) -> dict:
    granted = sorted((e for e in events if not math.isnan(e[3])), key=lambda e: e[2])
    inside = lambda e: start_at <= e[2] <= end_at  # noqa: E731
    handoffs, overlaps = [], 0
    for prev, cur in pairwise(granted):
        if cur[2] < prev[3]:
            overlaps += 1  # granted before the previous holder even sent its release
        elif inside(cur) and cur[1] < prev[3]:
            handoffs.append(cur[2] - prev[3])
    mine = [e for e in granted if inside(e)]
    per_client = Counter(e[0] for e in mine)
    counts = [per_client.get(c, 0) for c in range(n)]
    mean = sum(counts) / n
    waits = [e[2] - e[1] for e in events if inside(e)]
    return {
        "acquisitions": len(mine),
        "acq_per_s": len(mine) / (end_at - start_at),
        "handoffs": len(handoffs),
        "handoff_p50_s": percentile(handoffs, 50),
        "handoff_p99_s": percentile(handoffs, 99),
        "handoff_max_s": max(handoffs, default=math.nan),
        "wait_p50_s": percentile(waits, 50),
        "wait_p99_s": percentile(waits, 99),
        "min_share": min(counts) / mean if mean else math.nan,
        "timeouts": sum(1 for e in events if math.isnan(e[3])),
        "overlaps": overlaps,
        "per_client": counts,
    }


async def _rtt(target: str, n: int) -> list[float]:
    """Round trips of an empty gRPC call, one at a time, from an asyncio client."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        req = health_pb2.HealthCheckRequest()
        for _ in range(50):
            await stub.Check(req, timeout=5)
        out = []
        for _ in range(n):
            t0 = time.monotonic()
            await stub.Check(req, timeout=5)
            out.append(time.monotonic() - t0)
        return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    duration = 1.5 if ctx.quick else 3.0
    reps = min(ctx.reps, 3)  # 4 implementations x 2 sizes x reps runs: keep the total bounded
    runs: dict[str, dict[str, list[dict]]] = {}
    with redis_server(ctx.tmp) as rds, concord_server(rds.url, ctx.tmp, profile_to=ctx.profile("handoff")) as srv:
        rtts = asyncio.run(_rtt(srv.target, 300 if ctx.quick else 1000))
        redis_ps = psutil.Process(rds.proc.pid)
        for rep in range(reps):
            for n in CLIENT_COUNTS:
                for impl in IMPLS:
                    target = srv.target if impl == "concord" else str(rds.port)
                    cpu0 = cpu_seconds(srv.ps), cpu_seconds(redis_ps)
                    r = _run_once(impl, n, target, f"bench:handoff:{impl}:{n}:{rep}", duration)
                    r["server_cpu_busy"] = (cpu_seconds(srv.ps) - cpu0[0]) / duration
                    r["redis_cpu_busy"] = (cpu_seconds(redis_ps) - cpu0[1]) / duration
                    runs.setdefault(str(n), {}).setdefault(impl, []).append(r)
    rtt50 = percentile(rtts, 50)
    rows = [Row("handoff", "empty gRPC call round trip, p50 (baseline)", rtt50, "s",
                note=f"p99 {percentile(rtts, 99) * 1e6:.0f} µs")]
    for n in CLIENT_COUNTS:
        rows += _rows(n, runs[str(n)], rtt50)
    details = {"duration_s": duration, "reps": reps, "client_procs": CLIENT_PROCS, "hold_s": HOLD, "think_s": THINK,
               "rtt_p50_s": rtt50, "rtt_p99_s": percentile(rtts, 99), "runs": runs}
    return rows, details


def _rows(n: int, by_impl: dict[str, list[dict]], rtt50: float) -> list[Row]:
    def med(impl: str, key: str) -> tuple[float, list[float]]:
        values = [r[key] for r in by_impl[impl]]
        return median(values), values

    sc = f"handoff {n} clients"
    c = {k: med("concord", k) for k in ("acq_per_s", "handoff_p50_s", "handoff_p99_s", "wait_p99_s", "min_share")}
    overlaps = sum(r["overlaps"] + r["timeouts"] for r in by_impl["concord"])
    busy = med("concord", "server_cpu_busy")[0]
    rows = [
        Row(sc, "Concord: acquisitions/s", c["acq_per_s"][0], "/s", runs=c["acq_per_s"][1],
            note=f"server {busy:.0%} of a core, {overlaps} overlaps/timeouts"),
        Row(sc, "Concord: p50 handoff", c["handoff_p50_s"][0], "s", baseline=rtt50, baseline_label="empty RTT",
            runs=c["handoff_p50_s"][1]),
        Row(sc, "Concord: p99 handoff", c["handoff_p99_s"][0], "s", baseline=rtt50, baseline_label="empty RTT",
            target="≤ 2 ms", passed=c["handoff_p99_s"][0] <= TARGET_P99, runs=c["handoff_p99_s"][1]),
        Row(sc, "Concord: p99 wait", c["wait_p99_s"][0], "s", runs=c["wait_p99_s"][1]),
        Row(sc, "Concord: min/mean share", c["min_share"][0], "x", target=f"≥ {TARGET_SHARE}",
            passed=c["min_share"][0] >= TARGET_SHARE, runs=c["min_share"][1]),
    ]
    if overlaps:
        rows.append(Row(sc, "Concord: overlapping holds + timeouts", overlaps, "", target="0", passed=False))
    for impl in IMPLS[1:]:
        label = LABELS[impl]
        for key, metric, unit in (("acq_per_s", "acquisitions/s", "/s"), ("handoff_p50_s", "p50 handoff", "s"),
                                  ("handoff_p99_s", "p99 handoff", "s"), ("wait_p99_s", "p99 wait", "s"),
                                  ("min_share", "min/mean share", "x")):
            value, values = med(impl, key)
            rows.append(Row(sc, f"{label}: {metric}", value, unit, baseline=c[key][0], baseline_label="Concord",
                            runs=values))
    return rows

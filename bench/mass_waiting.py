"""``python -m bench.mass_waiting``: many blocked lock calls against one server, and
what they do to everyone else (issue 30, item 6).

Starts a concord-server (embedded Valkey, default configuration) and:

- ``--mode waiters``: one holder takes ``--locks`` locks for longer than the run;
  ``--waiters`` Acquire calls (over ``--channels`` channels) wait ``--wait`` seconds
  for them, none of which can be granted;
- ``--mode graph``: ``--owners`` owners each hold one lock and wait (AcquireMany,
  with their owner set, so deadlock detection looks) for ``--fanout`` locks held
  by later owners: a large waits-for graph without a cycle.

Meanwhile a second client Describes an unrelated lock every 0.25 s. Prints that
client's p50/p99/max, and how many waits answered later than wait + 0.5 s (or not
within wait + 30 s), measured by the client.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from google.protobuf.duration_pb2 import Duration

from concord.lock.v1 import lock_pb2, lock_pb2_grpc

from .harness import raise_nofile

BOUND = 0.5
order: list[int] = []
late_at: dict[int, float] = {}  # the API's promise: a blocked call answers within its wait + 0.5 s


def _free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dur(seconds: float) -> Duration:
    d = Duration()
    d.FromMilliseconds(int(seconds * 1000))
    return d


async def _healthy(target: str, deadline: float) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    while time.monotonic() < deadline:
        async with grpc.aio.insecure_channel(target) as ch:
            try:
                r = await health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=1)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
        await asyncio.sleep(0.2)
    raise SystemExit("server did not become healthy")


async def _measure(stub, stop: asyncio.Event, lat: list[float]) -> None:
    while not stop.is_set():
        t = time.monotonic()
        try:
            await stub.Describe(lock_pb2.DescribeRequest(name="bystander"), timeout=10)
        except grpc.RpcError:
            pass
        lat.append(time.monotonic() - t)
        await asyncio.sleep(0.25)


async def _wait_one(stub, late: list[float], codes: dict[str, int], wait: float, **req) -> None:
    t = time.monotonic()
    order.append(len(order))
    idx = order[-1]
    try:
        await stub(**req, timeout=wait + 30)
        code = "OK"
    except grpc.RpcError as exc:
        code = exc.code().name
    late.append(time.monotonic() - t - wait)
    late_at[idx] = late[-1]
    codes[code] = codes.get(code, 0) + 1


async def run(args: argparse.Namespace) -> dict[str, object]:
    port = _free_port()
    target = f"127.0.0.1:{port}"
    data = tempfile.mkdtemp(prefix="concord-mass-")
    log = open(Path(data) / "server.log", "ab")
    cmd = [sys.executable, "-m", "concord_server", "--listen", target, "--data-dir", data, *args.server_arg]
    if args.profile:
        cmd = [sys.executable, "-m", "cProfile", "-o", args.profile, *cmd[1:]]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        await _healthy(target, time.monotonic() + 30)
        # One connection each (no shared subchannel): a server caps the streams per connection.
        n_channels = args.channels or max(1, (max(args.waiters, args.owners) + 49) // 50)
        channels = [grpc.aio.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(n_channels)]
        stubs = [lock_pb2_grpc.LockServiceStub(ch) for ch in channels]
        async with grpc.aio.insecure_channel(target) as mch:
            mstub = lock_pb2_grpc.LockServiceStub(mch)
            base: list[float] = []
            await _measure_for(mstub, base, 3.0)
            late: list[float] = []
            codes: dict[str, int] = {}
            calls = []
            if args.mode == "waiters":
                for i in range(args.locks):
                    await stubs[0].Acquire(lock_pb2.AcquireRequest(name=f"hot{i}", ttl=_dur(args.wait + 120)))
                for i in range(args.waiters):
                    s = stubs[i % len(stubs)]
                    calls.append(_wait_one(s.Acquire, late, codes, args.wait, request=lock_pb2.AcquireRequest(
                        name=f"hot{i % args.locks}", ttl=_dur(10), wait_timeout=_dur(args.wait))))
            else:
                for i in range(args.owners):
                    await stubs[0].Acquire(lock_pb2.AcquireRequest(name=f"g{i}", ttl=_dur(args.wait + 120),
                                                                   owner=f"o{i}"))
                for i in range(args.owners - 1):
                    names = [f"g{j}" for j in range(i + 1, min(args.owners, i + 1 + args.fanout))]
                    s = stubs[i % len(stubs)]
                    calls.append(_wait_one(s.AcquireMany, late, codes, args.wait, request=lock_pb2.AcquireManyRequest(
                        names=names, ttl=_dur(10), wait_timeout=_dur(args.wait), owner=f"o{i}")))
            stop = asyncio.Event()
            lat: list[float] = []
            m = asyncio.create_task(_measure(mstub, stop, lat))
            started = time.monotonic()
            if args.rate:  # opened at a steady rate rather than in one burst
                tasks = []
                for i, c in enumerate(calls):
                    tasks.append(asyncio.ensure_future(c))
                    delay = started + (i + 1) / args.rate - time.monotonic()
                    if delay > 0:
                        await asyncio.sleep(delay)
                await asyncio.gather(*tasks)
            else:
                await asyncio.gather(*calls)
            elapsed = time.monotonic() - started
            stop.set()
            await m
        for ch in channels:
            await ch.close()
        server_cpu = _cpu_seconds(proc.pid)
        n = len(late_at)
        deciles = [statistics.median([late_at[i] for i in range(d * n // 10, (d + 1) * n // 10)] or [0])
                   for d in range(10)]
        q = statistics.quantiles(lat, n=100, method="inclusive") if len(lat) > 2 else [max(lat or [0])] * 99
        qb = statistics.quantiles(base, n=100, method="inclusive") if len(base) > 2 else [max(base or [0])] * 99
        return {
            "mode": args.mode, "calls": len(late), "elapsed_s": round(elapsed, 1), "codes": codes,
            "server_cpu_s": server_cpu,
            "baseline_p50_ms": round(qb[49] * 1000, 1), "baseline_p99_ms": round(qb[98] * 1000, 1),
            "describe_p50_ms": round(q[49] * 1000, 1), "describe_p99_ms": round(q[98] * 1000, 1),
            "describe_max_ms": round(max(lat) * 1000, 1), "describes": len(lat),
            "past_bound": sum(1 for x in late if x > BOUND), "past_30s": sum(1 for x in late if x > 30),
            "late_p50_s": round(statistics.median(late), 2), "latest_s": round(max(late), 2),
            "late_by_decile": [round(x, 2) for x in deciles] if args.deciles else None,
        }
    finally:
        proc.send_signal(subprocess.signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux), to tell a slow server from a starved one."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 1)
    except (OSError, IndexError, ValueError):
        return None


async def _measure_for(stub, lat: list[float], seconds: float) -> None:
    stop = asyncio.Event()
    t = asyncio.create_task(_measure(stub, stop, lat))
    await asyncio.sleep(seconds)
    stop.set()
    await t


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.mass_waiting", description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("waiters", "graph"), default="waiters")
    p.add_argument("--waiters", type=int, default=10_000)
    p.add_argument("--locks", type=int, default=1)
    p.add_argument("--owners", type=int, default=400)
    p.add_argument("--fanout", type=int, default=64)
    p.add_argument("--wait", type=float, default=20.0)
    p.add_argument("--channels", type=int, default=0, help="client connections (default: one per 50 calls)")
    p.add_argument("--rate", type=float, default=0, help="calls opened per second (default: all at once)")
    p.add_argument("--deciles", action="store_true", help="print median lateness by tenth of start order")
    p.add_argument("--profile", help="run the server under cProfile, saving to this file")
    p.add_argument("--server-arg", action="append", default=[], help="extra concord-server argument")
    args = p.parse_args(argv)
    raise_nofile()
    print(asyncio.run(run(args)))


if __name__ == "__main__":
    main()

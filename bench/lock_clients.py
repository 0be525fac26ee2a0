"""Lock-client programs in other languages, run by the handoff scenario: etcd's
(bench/peers/etcd_lock, the official client's concurrency.Mutex) and Concord's own Go
and Node clients' (bench/clients/go_lock, bench/clients/node_lock.js).

They all speak the protocol bench/clients/lockrun/lockrun.go documents (the Go ones
through that package, the Node one on its own): the same flags
(-endpoint, -key, -clients, -hold, -think, -wait, -ttl), "ready" on stdout once
connected, one line "start_at end_at" on stdin, then one JSON report shaped like
handoff_clients.py's (events on CLOCK_MONOTONIC, NaN for a timed-out acquire,
client_cpu_busy, errors). ``run_lock_clients`` runs one process per group of clients,
starts them at one instant and collects their reports, like
handoff.run_client_processes does for the Python clients.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from .harness import _die_with_parent, _stop, _tail
from .peers.install import ROOT, go_program

CLIENTS = ROOT / "bench" / "clients"


def go_lock_client(tmp: Path) -> list[str]:
    """The Concord Go client's lock program, built once per bench run."""
    return [str(go_program(CLIENTS / "go_lock", tmp, "concord-go-lock"))]


def node_lock_client() -> list[str]:
    """The Concord Node client's lock program (clients/node's modules must be installed:
    ``make tools`` or ``npm ci`` there)."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("the Node lock client needs node on PATH")
    if not (ROOT / "clients" / "node" / "node_modules" / "@grpc" / "grpc-js").exists():
        raise RuntimeError("clients/node/node_modules is missing: run make tools")
    return [node, str(CLIENTS / "node_lock.js")]


def _read_line(proc: subprocess.Popen, deadline: float) -> bytes:
    """One line of the process's stdout, read without buffering past it."""
    fd = proc.stdout.fileno()
    buf = b""
    while not buf.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    return buf


def run_lock_clients(command: Sequence[str], endpoint: str, key: str, groups: Sequence[Sequence[int]], *,
                     hold: float, think: float, wait: float, ttl: float, duration: float, report_within: float,
                     log_dir: Path, label: str) -> tuple[list[dict], float, float]:
    """One process of ``command`` (the program and any arguments before its flags) per
    group of client ids; all connect, then start at one instant. Returns (reports,
    start_at, end_at) on the CLOCK_MONOTONIC clock ``time.monotonic()`` reads."""
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for i, ids in enumerate(groups):
            log = log_dir / f"{label}-{os.getpid()}-{i}.log"
            logs.append(log)
            with open(log, "ab") as err:
                procs.append(subprocess.Popen(
                    [*command, "-endpoint", endpoint, "-key", key, "-clients", ",".join(map(str, ids)),
                     "-hold", repr(hold), "-think", repr(think), "-wait", repr(wait), "-ttl", str(max(1, round(ttl)))],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, preexec_fn=_die_with_parent))
        deadline = time.monotonic() + 60
        for proc, log in zip(procs, logs):
            try:
                line = _read_line(proc, deadline)
            except TimeoutError:
                line = b""
            if line.strip() != b"ready":
                raise RuntimeError(f"{label} did not get ready ({line!r}):\n{_tail(log)}")
        start_at = time.monotonic() + 0.05
        end_at = start_at + duration
        for proc in procs:
            proc.stdin.write(f"{start_at!r} {end_at!r}\n".encode())
            proc.stdin.close()
        reports = []
        for proc, log in zip(procs, logs):
            try:
                out = proc.stdout.read() if _wait_readable(proc, start_at + duration + report_within) else b""
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                out = b""
            if proc.returncode != 0 or not out.strip():
                raise RuntimeError(f"{label} did not report (exit {proc.returncode}):\n{_tail(log)}")
            report = json.loads(out)
            if report.get("errors"):
                print(f"  {label} errors: {report['errors']} (see {log}):\n{_tail(log, 5)}",
                      file=sys.stderr, flush=True)
            report["events"] = [(int(e[0]), *map(float, e[1:])) for e in report["events"]]
            reports.append(report)
    finally:
        for proc in procs:
            _stop(proc, timeout=5)
    return reports, start_at, end_at


def _wait_readable(proc: subprocess.Popen, deadline: float) -> bool:
    left = max(0.0, deadline - time.monotonic())
    return bool(select.select([proc.stdout.fileno()], [], [], left)[0])

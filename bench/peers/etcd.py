"""etcd as a peer: the server from Debian's ``etcd-server`` package, the lock client
in Go (``etcd_lock/``, the official client's ``concurrency.Mutex``).

- ``etcd_binary()``: ``etcd`` from PATH, else ``apt-get install -y etcd-server``
  (after ``apt-get update`` when the package lists do not know it yet). Needs root,
  as the bench has on its machines.
- ``etcd_server(tmp)``: a throw-away single-member etcd on free 127.0.0.1 ports
  (client and peer URLs), its data dir under ``tmp``, ready when ``/health`` says
  so, stopped on exit (and killed by the kernel if the bench dies), started like
  harness.redis_server starts Valkey. etcd runs as shipped: every write goes to its
  WAL and is fsynced (etcd has no way to turn its log off), whereas the bench's
  Valkey runs with persistence off.
- ``lock_client(tmp)``: ``go build`` of ``etcd_lock/`` into ``tmp`` (modules from
  the Go module proxy, pinned by its go.sum), built once per bench run.
- ``run_lock_clients(...)``: runs that program in a few processes, starts them at
  one instant and collects their reports, like handoff.run_client_processes.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..harness import _die_with_parent, _stop, _tail, _wait_for, free_port
from .install import go_program

LOCK_CLIENT_SRC = Path(__file__).resolve().parent / "etcd_lock"
_INSTALL_LOCK = Path("/tmp/concord-bench-apt.lock")  # two benches must not run apt-get at once


def etcd_binary() -> str:
    """The etcd server binary, installed from Debian's etcd-server when missing."""
    if found := _find_etcd():
        return found
    if os.geteuid() != 0:
        raise RuntimeError("etcd is not installed and the bench is not root: apt-get install etcd-server")
    with open(_INSTALL_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if found := _find_etcd():  # another bench installed it meanwhile
            return found
        print("  installing etcd-server (apt-get) ...", file=sys.stderr, flush=True)
        install = ["apt-get", "install", "-y", "-o", "DPkg::Lock::Timeout=300", "etcd-server"]
        with _no_service_starts():
            if _apt(install).returncode != 0:
                _apt(["apt-get", "update", "-o", "DPkg::Lock::Timeout=300"])  # lists missing or stale
                done = _apt(install)
                if done.returncode != 0:
                    raise RuntimeError(f"apt-get install etcd-server failed:\n{done.stdout[-3000:]}")
    if found := _find_etcd():
        return found
    raise RuntimeError("etcd-server installed but no etcd binary found")


@contextlib.contextmanager
def _no_service_starts() -> Iterator[None]:
    """The package must not start a system etcd (on 2379, for good): invoke-rc.d asks
    policy-rc.d, and 101 means "not allowed". An existing policy is left as it is
    (.ci/run does the same for redis-server)."""
    policy = Path("/usr/sbin/policy-rc.d")
    ours = not policy.exists()
    if ours:
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
    try:
        yield
    finally:
        if ours:
            policy.unlink(missing_ok=True)


def _find_etcd() -> str | None:
    return shutil.which("etcd") or next((p for p in ("/usr/bin/etcd", "/usr/local/bin/etcd") if os.access(p, os.X_OK)),
                                        None)


def _apt(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(args, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)


def _supports(binary: str, flag: str) -> bool:
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in out.stdout + out.stderr


def etcd_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    for line in out.splitlines():
        if line.lower().startswith("etcd version:"):
            return line.split(":", 1)[1].strip()
    return out.strip().splitlines()[0] if out.strip() else "unknown"


@dataclass
class EtcdServer:
    endpoint: str  # client URL, http://127.0.0.1:PORT
    proc: subprocess.Popen
    ps: psutil.Process  # for CPU accounting
    version: str


@contextlib.contextmanager
def etcd_server(tmp: Path) -> Iterator[EtcdServer]:
    """A single-member etcd on free 127.0.0.1 ports, data under ``tmp``; stopped on exit."""
    binary = etcd_binary()
    client_port = free_port()
    peer_port = free_port()
    while peer_port == client_port:
        peer_port = free_port()
    client_url, peer_url = f"http://127.0.0.1:{client_port}", f"http://127.0.0.1:{peer_port}"
    data = tmp / f"etcd-{client_port}"
    log = tmp / f"etcd-{client_port}.log"
    args = [binary, "--name", "bench", "--data-dir", str(data),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"bench={peer_url}", "--initial-cluster-state", "new",
            "--initial-cluster-token", f"bench-{client_port}", "--log-level", "warn",
            *(["--logger", "zap"] if _supports(binary, "--logger") else [])]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=tmp,
                                preexec_fn=_die_with_parent)

    def up() -> bool:
        try:
            with urllib.request.urlopen(f"{client_url}/health", timeout=1) as resp:
                return json.loads(resp.read()).get("health") == "true"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    try:
        _wait_for(up, "etcd", proc, log, timeout=30)
        yield EtcdServer(client_url, proc, psutil.Process(proc.pid), etcd_version(binary))
    finally:
        _stop(proc, timeout=10)
        shutil.rmtree(data, ignore_errors=True)


# --- the Go lock client ----------------------------------------------------------------

def lock_client(tmp: Path) -> Path:
    """The built lock client; ``go build`` on first use in this bench run (``tmp`` is
    the run's scratch directory, shared by its scenarios)."""
    return go_program(LOCK_CLIENT_SRC, tmp, "etcdlock")


def client_module_version() -> str:
    """The etcd client module the lock client is built with, from its go.mod."""
    for line in (LOCK_CLIENT_SRC / "go.mod").read_text().splitlines():
        parts = line.split()
        if "go.etcd.io/etcd/client/v3" in parts:
            return " ".join(parts[parts.index("go.etcd.io/etcd/client/v3"):][:2])
    return "go.etcd.io/etcd/client/v3"


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


def run_lock_clients(binary: Path, endpoint: str, key: str, groups: Sequence[Sequence[int]], *, hold: float,
                     think: float, wait: float, ttl: float, duration: float, report_within: float,
                     log_dir: Path) -> tuple[list[dict], float, float]:
    """One lock-client process per group of client ids; all connect and open their
    sessions, then start at one instant. Returns (reports, start_at, end_at) on the
    CLOCK_MONOTONIC clock ``time.monotonic()`` reads."""
    procs: list[subprocess.Popen] = []
    logs = []
    try:
        for i, ids in enumerate(groups):
            log = log_dir / f"etcdlock-{os.getpid()}-{i}.log"
            logs.append(log)
            with open(log, "ab") as err:
                procs.append(subprocess.Popen(
                    [str(binary), "-endpoint", endpoint, "-key", key, "-clients", ",".join(map(str, ids)),
                     "-hold", repr(hold), "-think", repr(think), "-wait", repr(wait), "-ttl", str(max(1, round(ttl)))],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, preexec_fn=_die_with_parent))
        deadline = time.monotonic() + 60
        for proc, log in zip(procs, logs):
            try:
                line = _read_line(proc, deadline)
            except TimeoutError:
                line = b""
            if line.strip() != b"ready":
                raise RuntimeError(f"etcd lock client did not get ready ({line!r}):\n{_tail(log)}")
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
                raise RuntimeError(f"etcd lock client did not report (exit {proc.returncode}):\n{_tail(log)}")
            report = json.loads(out)
            if report.get("errors"):
                print(f"  etcd lock client errors: {report['errors']} (see {log}):\n{_tail(log, 5)}",
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

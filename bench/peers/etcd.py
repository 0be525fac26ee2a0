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
- bench/lock_clients.py runs that program in a few processes (as it runs Concord's
  Go and Node lock programs).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..harness import _die_with_parent, _stop, _wait_for, free_port
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

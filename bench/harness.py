"""Processes and measurements shared by every scenario.

- ``redis_server()`` / ``concord_server()``: a throw-away Valkey and a concord-server
  subprocess, each on a free 127.0.0.1 port, each stopped on exit even when the
  scenario fails (and killed by the kernel if the bench itself dies).
- ``cpu_seconds()`` / ``rss_bytes()``: what the server process spent, read from the
  kernel through psutil, so the numbers exclude the bench's own work.
- ``median()`` / ``percentile()``: the only statistics the report uses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import psutil
import redis
from grpc_health.v1 import health_pb2, health_pb2_grpc

from concord_server.store.embedded_valkey import die_with_parent, free_port, valkey_binary

ROOT = Path(__file__).resolve().parent.parent


def _die_with_parent() -> None:
    """Runs in each child before exec: a killed bench must not leave servers behind."""
    die_with_parent(signal.SIGKILL)


def raise_nofile() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit; children (the server) inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_for(ready, what: str, proc: subprocess.Popen, log: Path, timeout: float) -> None:
    """Polls ``ready()`` until it is true, the process dies, or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready within {timeout}s:\n{_tail(log)}")
        time.sleep(0.02)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class RedisServer:
    url: str
    port: int
    proc: subprocess.Popen

    def client(self, name: str = "bench", **kw) -> redis.Redis:
        """A sync client whose connections carry CLIENT SETNAME ``name``, so they can
        be told apart from the server's in CLIENT LIST."""
        return redis.Redis(host="127.0.0.1", port=self.port, client_name=name, **kw)


@contextlib.contextmanager
def redis_server(tmp: Path, *extra_args: str) -> Iterator[RedisServer]:
    """A Valkey with persistence off: the bench measures Concord, not disk writes.
    ``extra_args``: more of valkey-server's options (``--replicaof host port``)."""
    port = free_port()
    log = tmp / f"valkey-{port}.log"
    args = [valkey_binary(), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", str(tmp), "--logfile", str(log), "--daemonize", "no", "--maxclients", "20000", *extra_args]
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=_die_with_parent)
    server = RedisServer(f"redis://127.0.0.1:{port}", port, proc)
    probe = server.client(socket_timeout=1)

    def up() -> bool:
        try:
            return bool(probe.ping())
        except (redis.ConnectionError, redis.BusyLoadingError):
            return False

    try:
        _wait_for(up, "valkey-server", proc, log, timeout=15)
        probe.close()
        yield server
    finally:
        probe.close()
        _stop(proc, timeout=10)


@dataclass
class ConcordServer:
    target: str
    proc: subprocess.Popen
    ps: psutil.Process
    log: Path


def _server_command(profile_to: Path | None) -> list[str]:
    """The installed ``concord-server`` script, or the same entry point under cProfile."""
    if profile_to is not None:
        return [sys.executable, "-m", "cProfile", "-o", str(profile_to), "-m", "concord_server"]
    script = Path(sys.executable).parent / "concord-server"
    return [str(script)] if script.exists() else [sys.executable, "-m", "concord_server"]


def health_check(channel: grpc.Channel, timeout: float = 1.0) -> bool:
    try:
        resp = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=timeout)
    except grpc.RpcError:
        return False
    return resp.status == health_pb2.HealthCheckResponse.SERVING


@contextlib.contextmanager
def concord_server(redis_url: str, tmp: Path, *, profile_to: Path | None = None,
                   extra_args: Sequence[str] = ()) -> Iterator[ConcordServer]:
    """concord-server as users start it, against ``redis_url``, ready when health says SERVING."""
    port = free_port()
    target = f"127.0.0.1:{port}"
    log = tmp / f"concord-{port}.log"
    args = [*_server_command(profile_to), "--listen", target, "--redis-url", redis_url,
            "--log-level", "WARNING", "--shutdown-grace", "2", *extra_args]
    with open(log, "wb") as out:
        # The allocator c_heap.choose() would re-execute with, set here so cProfile wraps
        # the process that serves.
        env = {**os.environ, "PYTHONMALLOC": os.environ.get("PYTHONMALLOC", "malloc")}
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=tmp, preexec_fn=_die_with_parent, env=env)
    try:
        with grpc.insecure_channel(target) as channel:
            _wait_for(lambda: health_check(channel), "concord-server", proc, log, timeout=30)
        yield ConcordServer(target, proc, psutil.Process(proc.pid), log)
    finally:
        # SIGTERM: drain and exit normally, which is also what lets cProfile write its file.
        _stop(proc, timeout=20)


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="concord-bench-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


# --- what the server process spends ---------------------------------------------------

def cpu_seconds(ps: psutil.Process) -> float:
    """User + system CPU time of the process, all threads (grpc has its own)."""
    t = ps.cpu_times()
    return t.user + t.system


def rss_bytes(ps: psutil.Process) -> int:
    return ps.memory_info().rss


# --- statistics ------------------------------------------------------------------------

def median(values: Sequence[float]) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


# --- where the numbers come from -------------------------------------------------------

def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def code_digest() -> str:
    """A hash of the server and client sources as they are on disk now (committed or
    not), so a run can tell when the code it measures changed under it."""
    h = hashlib.sha1()
    for base in ("service", "clients/python/concord", "protos"):
        for path in sorted((ROOT / base).rglob("*")):
            if path.suffix in (".py", ".lua", ".proto") and "__pycache__" not in path.parts:
                h.update(str(path.relative_to(ROOT)).encode())
                h.update(path.read_bytes())
    return h.hexdigest()[:12]


def machine_info() -> dict:
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--", "service", "clients", "protos"):
        commit += "+dirty"  # server or client code differs from the commit
    return {
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": _cpu_model(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "grpcio": grpc.__version__,
        "redis_py": redis.__version__,
        "commit": commit,
        "code_digest": code_digest(),
    }

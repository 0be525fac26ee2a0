"""Installers of the queue peers that bench/scenarios/peers_queue.py drives (BullMQ,
Celery, arq): the scenario calls them, so a fresh machine needs nothing by hand.

Everything comes from the package registries through their ordinary clients, at the
versions pinned here:

  bullmq/   package.json + package-lock.json (bullmq, ioredis): ``npm ci`` into
            bench/peers/bullmq/node_modules (git-ignored)
  celery/   requirements.txt (celery[redis] and its dependencies, pinned): a venv of
            its own, .tools/peers/celery
  arq/      requirements.txt (arq and its dependencies): .tools/peers/arq. arq wants
            redis-py < 6 and Celery's kombu >= 6.4, so the two cannot share a venv,
            and neither touches the main venv's pins.

Each install is redone when its lock or requirements file changes (a stamp file
holds the hash of the one it was made from). An install that fails raises
PeerUnavailable with the reason; the scenario reports that peer's rows as n/a.

The client programs in those folders (a ``worker`` and a ``producer`` for each peer,
and concord/ for Concord's own, run from the main venv) speak one small protocol on
stdin/stdout; see bench/scenarios/peers_queue.py.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parent
ROOT = PEERS.parent.parent
TOOLS = ROOT / ".tools" / "peers"
STAMP = ".installed"


def go_program(src: Path, tmp: Path, name: str) -> Path:
    """``go build`` of the Go program in ``src`` into the run's scratch directory ``tmp``
    (once per bench run; modules from the Go module proxy); returns the binary."""
    out = tmp / "peers" / name
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    go = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go")
                                     if os.access(p, os.X_OK)), None)
    if not go:
        raise RuntimeError(f"{name} needs a Go toolchain (go) to build {src}")
    print(f"  building {src.relative_to(ROOT)} (go build) ...", file=sys.stderr, flush=True)
    done = subprocess.run([go, "build", "-trimpath", "-o", str(out) + ".tmp", "."], cwd=src,
                          env={**os.environ, "CGO_ENABLED": "0"}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"go build of {src} failed:\n{done.stdout[-3000:]}")
    os.replace(str(out) + ".tmp", out)
    return out


class PeerUnavailable(RuntimeError):
    """A peer could not be installed here (no npm, no registry, a failed build)."""


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(args: list[str], cwd: Path, what: str) -> None:
    try:
        done = subprocess.run(args, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PeerUnavailable(f"{what}: {exc}") from exc
    if done.returncode:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise PeerUnavailable(f"{what} exited with {done.returncode}:\n{tail}")


def node_peer(name: str = "bullmq") -> Path:
    """bench/peers/<name> with its node_modules installed by ``npm ci`` from the lock
    file; returns the directory (run its scripts with ``node`` from there)."""
    where = PEERS / name
    lock = where / "package-lock.json"
    stamp = where / "node_modules" / STAMP
    if stamp.exists() and stamp.read_text() == _digest(lock):
        return where
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        raise PeerUnavailable("node/npm not found on PATH")
    print(f"  installing {name} (npm ci in {where.relative_to(ROOT)}) ...", file=sys.stderr, flush=True)
    _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel", "error"], where, f"npm ci ({name})")
    stamp.write_text(_digest(lock))
    return where


def python_peer(name: str) -> Path:
    """A venv of its own, .tools/peers/<name>, with bench/peers/<name>/requirements.txt
    installed by pip; returns its python."""
    req = PEERS / name / "requirements.txt"
    venv = TOOLS / name
    python = venv / "bin" / "python"
    stamp = venv / STAMP
    if stamp.exists() and python.exists() and stamp.read_text() == _digest(req):
        return python
    print(f"  installing {name} (pip into {venv.relative_to(ROOT)}) ...", file=sys.stderr, flush=True)
    # The base interpreter, not this venv's: a venv made from a venv would see its packages' paths.
    base = Path(getattr(sys, "_base_executable", sys.executable))
    _run([str(base), "-m", "venv", "--clear", str(venv)], ROOT, f"python -m venv ({name})")
    _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r", str(req)], ROOT,
         f"pip install ({name})")
    stamp.write_text(_digest(req))
    return python

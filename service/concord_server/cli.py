"""``concord-server``: parse settings, start the embedded Valkey if no Redis URL is
given, and run one server process or ``--workers`` of them on one port.

Nothing starts until the settings are good and the ports are free: a bad value or a
port in use is one line on stderr naming the flag or variable the user set (or the
default), exit status 2.
"""

from __future__ import annotations

import asyncio
import dataclasses
import errno
import multiprocessing
import os
import signal
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import app, c_heap, config, logs
from .store.embedded_valkey import EmbeddedValkey


def _run(settings: config.Settings) -> None:
    logs.configure(settings.log_level, settings.log_format)
    c_heap.limit_arenas()
    try:
        import uvloop
    except ImportError:
        asyncio.run(app.serve(settings))
    else:
        uvloop.run(app.serve(settings))


def _worker_settings(settings: config.Settings, i: int) -> config.Settings:
    """Worker i serves its metrics on the --metrics-listen port + i: each process
    has its own counters, and Prometheus scrapes each as a target; its web console
    on the --console-listen port + i likewise."""

    def shifted(address: str | None) -> str | None:
        if not address:
            return address
        host, _, port = address.rpartition(":")
        return f"{host}:{int(port) + i if int(port) else 0}"

    return dataclasses.replace(settings, metrics_listen=shifted(settings.metrics_listen),
                               console_listen=shifted(settings.console_listen))


def _run_workers(settings: config.Settings) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_run, args=(_worker_settings(settings, i),), name=f"concord-worker-{i}")
             for i in range(settings.workers)]
    for p in procs:
        p.start()

    def forward(sig: int, _frame: object) -> None:
        for p in procs:
            if p.pid is not None and p.is_alive():
                os.kill(p.pid, sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for p in procs:
        p.join()


def _bind_problem(address: str) -> str | None:
    """Why a server could not listen on host:port, or None if it can: a trial bind,
    with SO_REUSEADDR as gRPC sets it (so a restart's TIME_WAIT does not count) but
    without SO_REUSEPORT (so a server already on the port does). Port 0 is any port."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if int(port) == 0:
        return None
    try:
        infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot resolve {host!r}: {exc.strerror}"
    addresses = list(dict.fromkeys(infos))
    problems = []
    for family, kind, proto, _, sockaddr in addresses:
        with socket.socket(family, kind, proto) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(sockaddr)
                s.listen(1)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return f"port {port} is already in use"
                problems.append(exc.strerror or str(exc))
    # gRPC listens on every address the host resolves to, and needs one of them.
    return problems[0] if len(problems) == len(addresses) else None


def _preflight(settings: config.Settings, argv: Sequence[str], environ: Mapping[str, str]) -> None:
    """Checks what would otherwise fail after the embedded Valkey has started (or in
    a worker, as a traceback): the ports and the files the settings name."""

    def who(name: str, value: object) -> str:
        return config.origin_of(name, value, argv, environ)

    if problem := _bind_problem(settings.listen):
        config.fail(f"{who('listen', settings.listen)}: cannot listen: {problem}")
    if settings.metrics_listen:
        for i in range(settings.workers):
            address = _worker_settings(settings, i).metrics_listen or ""
            if problem := _bind_problem(address):
                worker = f" (worker {i}'s port is {address})" if settings.workers > 1 else ""
                config.fail(f"{who('metrics_listen', settings.metrics_listen)}{worker}: cannot listen: {problem}")
    if settings.console_listen:
        for i in range(settings.workers):
            address = _worker_settings(settings, i).console_listen or ""
            if problem := _bind_problem(address):
                worker = f" (worker {i}'s port is {address})" if settings.workers > 1 else ""
                config.fail(f"{who('console_listen', settings.console_listen)}{worker}: cannot listen: {problem}")
    for name in ("tls_cert", "tls_key", "tls_client_ca", "auth_tokens", "loop_stall_report"):
        path = getattr(settings, name)
        if not path:
            continue
        if name == "loop_stall_report":
            folder = Path(path).resolve().parent
            if not (folder.is_dir() and os.access(folder, os.W_OK)):
                config.fail(f"{who(name, path)}: cannot write a file in {folder}")
        elif not os.access(path, os.R_OK) or not Path(path).is_file():
            config.fail(f"{who(name, path)}: no readable file {path!r}")
    if not settings.redis_url:
        try:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            config.fail(f"{who('data_dir', settings.data_dir)}: cannot create it: {exc.strerror}")
        if not os.access(settings.data_dir, os.W_OK | os.X_OK):
            config.fail(f"{who('data_dir', settings.data_dir)}: not writable")
    if settings.auth_tokens:
        from .edge.auth import load_tokens

        try:
            load_tokens(settings.auth_tokens)
        except Exception as exc:  # the token file's own check says what is wrong, in one line
            config.fail(f"{who('auth_tokens', settings.auth_tokens)}: {exc}".replace("\n", " "))


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    settings = config.load(argv)
    _preflight(settings, argv, os.environ)
    logs.configure(settings.log_level, settings.log_format)
    valkey = None
    if not settings.redis_url:
        valkey = EmbeddedValkey(settings.data_dir, maxmemory=settings.embedded_maxmemory)
        settings = dataclasses.replace(settings, redis_url=valkey.start())
    try:
        if settings.workers == 1:
            _run(settings)
        else:
            _run_workers(settings)
    finally:
        if valkey is not None:
            valkey.stop()


if __name__ == "__main__":
    sys.exit(main())

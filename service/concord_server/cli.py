"""``concord-server``: parse settings, start the embedded Valkey if no Redis URL is
given, and run one server process or ``--workers`` of them on one port."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import signal
import sys
from collections.abc import Sequence

from . import app, config, logs
from .embedded_valkey import EmbeddedValkey


def _run(settings: config.Settings) -> None:
    logs.configure(settings.log_level, settings.log_format)
    try:
        import uvloop
    except ImportError:
        asyncio.run(app.serve(settings))
    else:
        uvloop.run(app.serve(settings))


def _worker_settings(settings: config.Settings, i: int) -> config.Settings:
    """Worker i serves its metrics on the --metrics-listen port + i: each process
    has its own counters, and Prometheus scrapes each as a target."""
    if not settings.metrics_listen:
        return settings
    host, _, port = settings.metrics_listen.rpartition(":")
    return dataclasses.replace(settings, metrics_listen=f"{host}:{int(port) + i if int(port) else 0}")


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


def main(argv: Sequence[str] | None = None) -> None:
    settings = config.load(argv)
    logs.configure(settings.log_level, settings.log_format)
    valkey = None
    if not settings.redis_url:
        valkey = EmbeddedValkey(settings.data_dir)
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

"""``concord-server``: parse settings, start the embedded Valkey if no Redis URL is
given, and run one server process or ``--workers`` of them on one port."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import multiprocessing
import os
import signal
import sys
from collections.abc import Sequence

from . import app, config
from .embedded_valkey import EmbeddedValkey


def _run(settings: config.Settings) -> None:
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
    try:
        import uvloop
    except ImportError:
        asyncio.run(app.serve(settings))
    else:
        uvloop.run(app.serve(settings))


def _run_workers(settings: config.Settings) -> None:
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_run, args=(settings,), name=f"concord-worker-{i}") for i in range(settings.workers)]
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
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")
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

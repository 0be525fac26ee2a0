"""arq's side of bench/scenarios/peers_queue.py: WorkerSettings with a no-op job,
started as arq's users start it, ``arq arq_worker.WorkerSettings`` from this
directory, with arq's defaults (max_jobs 10, poll_delay 0.5 s, results kept an hour)
unless PEER_CONCURRENCY sets max_jobs.

Environment: PEER_URL (redis://...), PEER_QUEUE, PEER_MARKS (completion counts to
report, comma-separated). Stdout, one JSON object a line: {"ready":1} (on_startup);
{"count":K,"t":NS} when the K-th job has finished (after_job_end: after arq removed
it from the queue and stored its result); {"late":NS,"i":I} for a delayed job, at the
start of the job: now - due. Times are CLOCK_MONOTONIC ns (time.monotonic_ns()).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from arq.connections import RedisSettings

MARKS = {int(m) for m in os.environ.get("PEER_MARKS", "").split(",") if m}
_finished = 0


def _say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def noop(ctx: dict, i: int, due: int = 0) -> None:
    if due:
        _say({"late": time.monotonic_ns() - due, "i": i})


async def _started(ctx: dict) -> None:
    _say({"ready": 1})


async def _finished_job(ctx: dict) -> None:
    global _finished
    _finished += 1
    if _finished in MARKS:
        _say({"count": _finished, "t": time.monotonic_ns()})


class WorkerSettings:
    functions = [noop]
    redis_settings = RedisSettings.from_dsn(os.environ.get("PEER_URL", "redis://127.0.0.1:6379"))
    queue_name = os.environ.get("PEER_QUEUE", "arq:queue")
    on_startup = _started
    after_job_end = _finished_job
    if os.environ.get("PEER_CONCURRENCY"):
        max_jobs = int(os.environ["PEER_CONCURRENCY"])


settings: Any = WorkerSettings

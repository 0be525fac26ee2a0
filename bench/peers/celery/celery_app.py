"""Celery's side of bench/scenarios/peers_queue.py: the app, its no-op task, and the
worker's reports. Configured as Celery's own first steps do: the broker and the
result backend both on the Redis (here the bench's Valkey), JSON serialization, tasks'
results stored (the default), acks early (the default).

The worker is started as users start it, ``celery -A celery_app worker`` (the prefork
pool, ``--concurrency`` = cores unless the scenario says otherwise), from this
directory. Environment: PEER_URL (redis://...), PEER_QUEUE, PEER_MARKS (completion
counts to report, comma-separated).

Stdout, one JSON object a line, written straight to fd 1 (atomic lines; the pool's
child processes inherit it and Celery redirects sys.stdout to its logger):
{"ready":1} (worker_ready); {"count":K,"t":NS} when the K-th task has finished
(task_postrun, which comes after its result was stored; with early acks the message
was acked when the task started); {"late":NS,"i":I} for a delayed task, at the start
of its body: now - due. Times are CLOCK_MONOTONIC ns (time.monotonic_ns()).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time

from celery import Celery
from celery.signals import task_postrun, worker_ready

URL = os.environ.get("PEER_URL", "redis://127.0.0.1:6379/0")
MARKS = {int(m) for m in os.environ.get("PEER_MARKS", "").split(",") if m}

app = Celery("peers", broker=URL, backend=URL)
app.conf.update(task_default_queue=os.environ.get("PEER_QUEUE", "celery"), broker_connection_retry_on_startup=True)

# Finished tasks, counted across the prefork pool: shared memory made here, in the
# parent, before the pool forks its children.
_finished = multiprocessing.Value("q", 0)


def _say(obj: dict) -> None:
    os.write(1, (json.dumps(obj) + "\n").encode())


@app.task
def noop(i: int, due: int = 0) -> None:
    if due:
        _say({"late": time.monotonic_ns() - due, "i": i})


@task_postrun.connect
def _count(**_: object) -> None:
    with _finished.get_lock():
        _finished.value += 1
        n = _finished.value
    if n in MARKS:
        _say({"count": n, "t": time.monotonic_ns()})


@worker_ready.connect
def _ready(**_: object) -> None:
    _say({"ready": 1})

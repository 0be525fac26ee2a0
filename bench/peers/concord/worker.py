"""Concord's side of bench/scenarios/peers_queue.py: ``concord.Worker`` as the README
shows it, with a no-op callback, run from the main venv.

Environment: PEER_URL (the server's host:port), PEER_QUEUE, PEER_CONCURRENCY,
PEER_MARKS (completion counts to report, comma-separated). Stdout, one JSON object a
line: {"ready":1} once the client is connected; {"count":K,"t":NS} when the K-th
task has been acked (``worker.processed``, which counts a task once its ack is answered,
read every millisecond by a thread of this process); {"late":NS,"i":I} for a delayed
task, at the start of its callback: now - due. Times are CLOCK_MONOTONIC ns.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import concord

_lock = threading.Lock()


def say(obj: dict) -> None:
    with _lock:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def main() -> None:
    marks = sorted(int(m) for m in os.environ["PEER_MARKS"].split(",") if m)
    client = concord.Client(os.environ["PEER_URL"])
    worker = concord.Worker(client, [os.environ["PEER_QUEUE"]], concurrency=int(os.environ["PEER_CONCURRENCY"]))

    @worker.task("noop")
    def noop(task: concord.Task) -> None:
        i, due = task.json()
        if due:
            say({"late": time.monotonic_ns() - due, "i": i})

    def count() -> None:
        for mark in marks:
            while worker.processed < mark:
                time.sleep(0.001)
            say({"count": mark, "t": time.monotonic_ns()})

    client.queue(os.environ["PEER_QUEUE"]).stats()  # connected before the first task
    threading.Thread(target=count, daemon=True).start()
    say({"ready": 1})
    worker.run()  # until SIGTERM


if __name__ == "__main__":
    main()

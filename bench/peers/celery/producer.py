"""Celery's producer for bench/scenarios/peers_queue.py: ``noop.delay(i, 0)`` in a loop
(how Celery's users send tasks; each message is one publish), delayed ones with
``noop.apply_async((i, due), countdown=delay)``. The app is celery_app's: with the
Redis result backend, Celery subscribes the sender to each task's result channel as it
sends it, as it does for every user with that backend.

Environment: PEER_URL, PEER_QUEUE. Commands on stdin, one JSON object a line:
  {"cmd":"bulk","start":S,"n":N,"batch":B}   tasks S..S+N-1 (B is ignored: no bulk API)
  {"cmd":"delayed","delays_ms":[...],"gap_ms":G}   one task per delay, G ms apart, each
      carrying due = now + delay (CLOCK_MONOTONIC ns, read before the call)
Each answered with {"sent":N,"t0":NS,"t1":NS}.
"""

from __future__ import annotations

import json
import sys
import time

from celery_app import app, noop


def say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=3)
    say({"ready": 1})
    for line in sys.stdin:
        cmd = json.loads(line)
        t0, sent = time.monotonic_ns(), 0
        if cmd["cmd"] == "bulk":
            for i in range(cmd["start"], cmd["start"] + cmd["n"]):
                noop.delay(i, 0)
                sent += 1
        elif cmd["cmd"] == "delayed":
            for i, delay in enumerate(cmd["delays_ms"]):
                due = time.monotonic_ns() + delay * 1_000_000
                noop.apply_async((i, due), countdown=delay / 1000)
                sent += 1
                time.sleep(cmd["gap_ms"] / 1000)
        say({"sent": sent, "t0": t0, "t1": time.monotonic_ns()})


if __name__ == "__main__":
    main()

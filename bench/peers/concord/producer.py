"""Concord's producer for bench/scenarios/peers_queue.py: the Python client,
``queue.put_many([concord.NewTask("noop", [i, 0]), ...])`` in batches, delayed ones
with ``queue.put("noop", [i, due], delay=seconds)``; run from the main venv.

Environment: PEER_URL (host:port), PEER_QUEUE. Commands on stdin, one JSON object a line:
  {"cmd":"bulk","start":S,"n":N,"batch":B}   tasks S..S+N-1, B per put_many
  {"cmd":"delayed","delays_ms":[...],"gap_ms":G}   one task per delay, G ms apart, each
      carrying due = now + delay (CLOCK_MONOTONIC ns, read before the call)
Each answered with {"sent":N,"t0":NS,"t1":NS}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import concord


def say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    client = concord.Client(os.environ["PEER_URL"])
    queue = client.queue(os.environ["PEER_QUEUE"])
    queue.stats()  # connected
    say({"ready": 1})
    for line in sys.stdin:
        cmd = json.loads(line)
        t0, sent = time.monotonic_ns(), 0
        if cmd["cmd"] == "bulk":
            end = cmd["start"] + cmd["n"]
            for s in range(cmd["start"], end, cmd["batch"]):
                sent += len(queue.put_many([concord.NewTask("noop", [i, 0]) for i in range(s, min(s + cmd["batch"], end))]))
        elif cmd["cmd"] == "delayed":
            for i, delay in enumerate(cmd["delays_ms"]):
                due = time.monotonic_ns() + delay * 1_000_000
                queue.put("noop", [i, due], delay=delay / 1000)
                sent += 1
                time.sleep(cmd["gap_ms"] / 1000)
        say({"sent": sent, "t0": t0, "t1": time.monotonic_ns()})
    client.close()


if __name__ == "__main__":
    main()

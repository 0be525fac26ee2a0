"""arq's producer for bench/scenarios/peers_queue.py: ``await pool.enqueue_job("noop",
i, 0)`` one after another (arq has no bulk enqueue; its docs await each), delayed ones
with ``_defer_by``.

Environment: PEER_URL, PEER_QUEUE. Commands on stdin, one JSON object a line:
  {"cmd":"bulk","start":S,"n":N,"batch":B}   jobs S..S+N-1 (B is ignored)
  {"cmd":"delayed","delays_ms":[...],"gap_ms":G}   one job per delay, G ms apart, each
      carrying due = now + delay (CLOCK_MONOTONIC ns, read before the call)
Each answered with {"sent":N,"t0":NS,"t1":NS}.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from datetime import timedelta

from arq import create_pool
from arq.connections import RedisSettings


def say(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


async def main() -> None:
    queue = os.environ.get("PEER_QUEUE", "arq:queue")
    pool = await create_pool(RedisSettings.from_dsn(os.environ["PEER_URL"]), default_queue_name=queue)
    await pool.ping()
    say({"ready": 1})
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        cmd = json.loads(line)
        t0, sent = time.monotonic_ns(), 0
        if cmd["cmd"] == "bulk":
            for i in range(cmd["start"], cmd["start"] + cmd["n"]):
                await pool.enqueue_job("noop", i, 0)
                sent += 1
        elif cmd["cmd"] == "delayed":
            for i, delay in enumerate(cmd["delays_ms"]):
                due = time.monotonic_ns() + delay * 1_000_000
                await pool.enqueue_job("noop", i, due, _defer_by=timedelta(milliseconds=delay))
                sent += 1
                await asyncio.sleep(cmd["gap_ms"] / 1000)
        say({"sent": sent, "t0": t0, "t1": time.monotonic_ns()})
    await pool.aclose()


if __name__ == "__main__":
    asyncio.run(main())

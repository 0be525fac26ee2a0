"""The task queues of "Redis in Action" (section 6.4), written from the book's
algorithm over redis.asyncio, for the queue-cost and queue-delay comparisons.

6.4.1, a FIFO task queue (one list per queue, nothing else):

    producer   RPUSH queue:NAME  json.dumps([function name, args])
    worker     BLPOP queue:NAME  (blocks until an item arrives), then runs it

6.4.2, delayed tasks (one zset for every queue, plus a poller process):

    producer   ZADD delayed:  json.dumps([identifier, queue, function name, args])
                              with score = the producer's clock (time.time()) + delay
    poller     loop: ZRANGE delayed: 0 0 WITHSCORES; if there is nothing, or the
               first item is not due by the poller's clock, sleep 0.01 s and look
               again; else ZREM it and, if this ZREM removed it, RPUSH it onto
               queue:<its queue>, where a worker's BLPOP takes it.

Left out on purpose: the book wraps the poller's ZREM + RPUSH in a per-item lock,
which only matters when several pollers run; with the one poller here the ZREM
reply alone makes sure an item is pushed once. Neither queue acknowledges
anything: a worker that dies after BLPOP loses its task.
"""

from __future__ import annotations

import asyncio
import json
import time

import redis.asyncio as aioredis

DELAYED = "delayed:"
POLL_SLEEP = 0.01  # the book's poller sleeps 10 ms when nothing is due


def queue_key(queue: str) -> str:
    return f"queue:{queue}"


async def put(conn: aioredis.Redis, queue: str, function: str, args: list) -> None:
    """6.4.1: one task onto the queue's list."""
    await conn.rpush(queue_key(queue), json.dumps([function, args]))


async def take(conn: aioredis.Redis, queue: str, timeout: float) -> list | None:
    """6.4.1's worker: BLPOP one item (the decoded JSON), None after ``timeout`` s."""
    item = await conn.blpop([queue_key(queue)], timeout)
    return None if item is None else json.loads(item[1])


async def put_later(conn: aioredis.Redis, identifier: str, queue: str, function: str, args: list,
                    delay: float) -> None:
    """6.4.2's execute_later: due by the producer's clock ``delay`` s from now."""
    item = json.dumps([identifier, queue, function, args])
    if delay > 0:
        await conn.zadd(DELAYED, {item: time.time() + delay})
    else:
        await conn.rpush(queue_key(queue), item)


async def poll_delayed(conn: aioredis.Redis, sleep: float = POLL_SLEEP) -> None:
    """6.4.2's poll_queue: moves due items onto their queues' lists; runs until cancelled."""
    while True:
        first = await conn.zrange(DELAYED, 0, 0, withscores=True)
        if not first or first[0][1] > time.time():
            await asyncio.sleep(sleep)
            continue
        item = first[0][0]
        queue = json.loads(item)[1]
        if await conn.zrem(DELAYED, item):
            await conn.rpush(queue_key(queue), item)

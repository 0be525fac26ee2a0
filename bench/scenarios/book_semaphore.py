"""The fair counting semaphore of "Redis in Action" (section 6.3.2), written from
the algorithm, for the semaphore-handoff comparison.

Keys, all owned by the client library (no server-side logic beyond plain commands):

    NAME          zset  holder id -> the acquiring client's clock (time.time()) at acquire
    NAME:owner    zset  holder id -> ticket from NAME:counter (arrival order)
    NAME:counter  string, INCR'ed once per attempt

One attempt is two MULTI/EXEC round trips, plus a third when it fails:

 1. drop the entries older than ``timeout`` by the caller's clock from the time zset;
    ZINTERSTORE the owner zset with the time zset (weight 0) so the owner zset
    forgets them too; INCR the counter to get a ticket.
 2. ZADD the id to the time zset (score: the caller's clock) and to the owner zset
    (score: the ticket); ZRANK it in the owner zset.
 3. rank < limit: acquired. Otherwise ZREM the id from both zsets (a failed attempt).

Release is ZREM from both zsets in one MULTI/EXEC. Nothing blocks: a caller that
wants to wait retries the whole attempt (with a fresh id and ticket) after a short
sleep, so its place in line is not kept between attempts.

Known weaknesses this reproduces on purpose (the bench measures them):
  - step 1 and step 2 are separate transactions: a caller that took an earlier
    ticket but adds it after a later-ticket caller has passed its rank check lands
    ahead of it and passes too, so more than ``limit`` can hold at once (the book
    fixes it later by taking a lock around the acquire);
  - expiry uses each caller's own clock: a caller whose clock runs ahead by close to
    ``timeout`` drops live holders of the others.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import redis


class FairSemaphore:
    def __init__(self, conn: redis.Redis, name: str, limit: int, timeout: float,
                 clock: Callable[[], float] = time.time) -> None:
        self.conn = conn
        self.name = name
        self.owners = f"{name}:owner"
        self.counter = f"{name}:counter"
        self.limit = limit
        self.timeout = timeout
        self.clock = clock

    def try_acquire(self) -> str | None:
        """One attempt; the holder id, or None when the rank check failed."""
        holder = uuid.uuid4().hex
        now = self.clock()
        with self.conn.pipeline(transaction=True) as tx:
            tx.zremrangebyscore(self.name, "-inf", now - self.timeout)
            tx.zinterstore(self.owners, {self.owners: 1, self.name: 0})
            tx.incr(self.counter)
            ticket = tx.execute()[-1]
            tx.zadd(self.name, {holder: now})
            tx.zadd(self.owners, {holder: ticket})
            tx.zrank(self.owners, holder)
            rank = tx.execute()[-1]
            if rank is not None and rank < self.limit:
                return holder
            tx.zrem(self.name, holder)
            tx.zrem(self.owners, holder)
            tx.execute()
        return None

    def acquire(self, wait: float, poll: float) -> str | None:
        """Retries try_acquire every ``poll`` s for up to ``wait`` s."""
        deadline = time.monotonic() + wait
        while True:
            holder = self.try_acquire()
            if holder is not None or time.monotonic() >= deadline:
                return holder
            time.sleep(poll)

    def release(self, holder: str) -> bool:
        """True if the id was still in the time zset (not expired or dropped)."""
        with self.conn.pipeline(transaction=True) as tx:
            tx.zrem(self.name, holder)
            tx.zrem(self.owners, holder)
            return bool(tx.execute()[0])

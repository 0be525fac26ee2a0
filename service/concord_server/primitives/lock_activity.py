"""A key space's lock activity for the console: handoffs per primitive (a queued
Acquire granted: locks, semaphores, read-write locks, elections) and deadlocks broken,
per interval of the Redis clock, summed over every replica and kept in Redis
(``{p:lock-activity}``, a list of the last ``keep`` intervals, newest first).

Calls count in their own process (tallies.py); each process's registry beat adds what
it counted to the current interval's entry (lua/lock_activity_add.lua), one script per
tenant that had any. An event is thus filed up to one beat late, in the interval its
beat fell in: a rate over a whole interval is exact to within a beat at its edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from ..keys import KeySpace
from ..store.reply_shapes import INT, STR, Seq
from ..store.scripts import Commands, script
from ..tallies import KINDS

INTERVAL_MS = 10_000
KEEP = 360  # intervals kept: an hour

_ADD = script("lock_activity_add.lua", INT)
_READ = script("lock_activity_read.lua", Seq(INT, each=(STR,)))

SCRIPTS = (_ADD, _READ)


class Interval(NamedTuple):
    at_ms: int  # the interval's start, Redis clock
    lock: int  # handoffs, per primitive
    semaphore: int
    rwlock: int
    election: int
    deadlocks: int  # deadlocks broken (a wait failed ABORTED / DEADLOCK)


class LockActivity:
    def __init__(self, redis: Commands, keyspace: KeySpace, *, interval_ms: int = INTERVAL_MS,
                 keep: int = KEEP) -> None:
        self._redis, self._key = redis, keyspace.lock_activity
        self.interval_ms, self.keep = interval_ms, keep

    async def add(self, counts: Mapping[str, int]) -> None:
        await _ADD.run(self._redis, [self._key], [self.interval_ms, self.keep, self.interval_ms * (self.keep + 1),
                                                  *(counts.get(kind, 0) for kind in KINDS)])

    async def read(self, limit: int | None = None) -> tuple[int, list[Interval]]:
        """The Redis clock (ms) and the last ``limit`` intervals that had activity (at
        most keep), oldest first."""
        reply = await _READ.run(self._redis, [self._key], [min(limit or self.keep, self.keep)])
        found = []
        for entry in reversed(reply[1:]):
            fields = (entry.decode() if isinstance(entry, bytes) else str(entry)).split()
            if len(fields) == 1 + len(KINDS) and all(f.isdigit() for f in fields):
                found.append(Interval(*map(int, fields)))
        return reply[0], found

"""Garbage collection that does not hold the event loop for long under load.

CPython's full (generation-2) collection walks every object the collector tracks.
A process holding 10,000 waiting calls tracks millions, so each automatic full
collection held the event loop, and with it every call of the process, for 0.5-2 s
(bench/ load scenario, README "Load"). Young collections (generations 0 and 1)
walk only recent objects and stay as they are.

The policy: automatic full collections are off, and once a second ``gc.freeze()``
moves every tracked object into the permanent generation, which collections never
walk (a freeze is O(1): list splicing). Just before each freeze, a collection of the
young generations lets their garbage cycles die young instead of being frozen with
the living. Reference counting still frees frozen objects as usual, so only garbage
*cycles* that outlived the young collections wait: they are reclaimed by one full collection (unfreeze, collect, freeze again)
when the process is next idle (no call in progress) and has grown by ``GROWTH``
bytes of resident memory since the last one, or after ``MAX_DEFERRED`` seconds in
any case, so memory stays bounded in a process that is never idle.

Why idle means no call at all: the walk holds every call of the process. With "at
most 10 calls" a server counted as idle whenever its streams broke (a Redis failover
ends them), and the chaos campaign's Sentinel runs saw collections of 100,000-230,000
dead objects hold the loop 0.35-1.1 s right then, answering the blocked calls still
in progress late.

Why the growth: a full collection walks the start-up objects too (modules, protobuf
descriptors: tens of milliseconds of walking however idle the process is), and a
process serving a few hundred calls a second is idle between them most of the time; a
collection every few seconds there was every call's p99 (bench ratelimit, 400 calls
a second: p99 27 ms against a p50 of 2 ms). The growth is read as the resident set
(/proc/self/statm: one small read), whichever allocator serves Python: the server runs
on the C allocator (c_heap.py), where ``sys.getallocatedblocks()``, the count used
before, is always 0, so no idle collection ever ran and a burst's memory stayed (the
abuse suite's mass_wait: 344 MB an idle minute after a 441 MB peak, from 67).
``gc.get_freeze_count()`` would walk every frozen object: 15 ms for two million.

After each idle full collection the C heap's free pages go back to the kernel
(c_heap.py), so a burst's memory does not stay with the process.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import time
from collections.abc import Callable

from . import c_heap

log = logging.getLogger(__name__)

PERIOD = 1.0  # seconds between freezes
IDLE_CALLS = 0  # "idle": no call in progress, so no blocked call or stream waits out the walk
IDLE_EVERY = 5.0  # seconds between full collections while idle: a burst's garbage cycles go soon after it
MAX_DEFERRED = 600.0  # a full collection at least this often, idle or not
SLOW_MS = 100.0  # a full collection that held the event loop this long is logged as a warning
GROWTH = 32 * 2**20  # bytes of resident memory grown since the last full collection that make an idle one worth its walk
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def resident_bytes() -> int:
    """The process's resident memory (Linux's /proc/self/statm); 0 where it cannot be read,
    and then only MAX_DEFERRED brings a full collection."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


class GcPolicy:
    """Runs on the event loop; ``in_flight()`` counts the process's calls in progress."""

    def __init__(self, in_flight: Callable[[], int], *, period: float = PERIOD, idle_every: float = IDLE_EVERY,
                 max_deferred: float = MAX_DEFERRED, growth: int = GROWTH) -> None:
        self._in_flight = in_flight
        self._period, self._idle_every, self._max_deferred = period, idle_every, max_deferred
        self._growth = growth
        self._task: asyncio.Task[None] | None = None
        self._thresholds: tuple[int, int, int] | None = None

    def start(self) -> None:
        self._thresholds = gc.get_threshold()
        gc.collect()
        gc.freeze()  # start-up's objects (modules, descriptors, servicers) are never walked again
        young, middle, _ = self._thresholds
        gc.set_threshold(young, middle, 2**31 - 1)  # no automatic full collection
        self._task = asyncio.create_task(self._run(), name="concord-gc-policy")

    async def _run(self) -> None:
        last_full = time.monotonic()
        kept = resident_bytes()  # after the last full collection
        while True:
            await asyncio.sleep(self._period)
            # The young generations (a bounded walk: a few thousand objects) lose their
            # garbage cycles here instead of having them frozen with the living. Not
            # generation 2: under load a second's survivors are many (the load scenario's
            # ramp-up: 0.2 s a walk).
            gc.collect(1)
            gc.freeze()
            now = time.monotonic()
            idle = self._in_flight() <= IDLE_CALLS and resident_bytes() - kept >= self._growth
            if (idle and now - last_full >= self._idle_every) or now - last_full >= self._max_deferred:
                gc.unfreeze()
                found = gc.collect()
                gc.freeze()
                collected = time.monotonic()
                if idle:
                    c_heap.return_free_memory()
                kept = resident_bytes()  # after the free pages went back
                last_full = time.monotonic()
                held_ms = (last_full - now) * 1000
                # Every call of the process waited that long: say so where an operator looks.
                log.log(logging.WARNING if held_ms >= SLOW_MS else logging.DEBUG,
                        "full collection (%s): %d unreachable objects, the event loop held %.1f ms (%.1f ms "
                        "collecting, %.1f ms returning memory)", "idle" if idle else "deferred", found, held_ms,
                        (collected - now) * 1000, (last_full - collected) * 1000)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        gc.unfreeze()
        if self._thresholds:
            gc.set_threshold(*self._thresholds)

"""Deadlock detection between callers that hold locks and wait for others.

A caller is its owner label (set it to one per process or task: the default, the
connection's address, is not looked at). A lock held under the waiter's own label
is no edge: callers may share a label, and one of them waiting for another is an
ordinary wait (so a caller waiting for a lock it holds itself waits, as before). While a caller waits for locks it is
written in one registry hash, owner -> the locks it waits for, when it started
waiting (Redis clock) and its queue place; the edge "A waits for B" is A's entry
plus the owner in the holder hash of a lock A waits for. A cycle of such edges is a
deadlock: nobody in it can move until a TTL runs out.

Who looks: every waiter with an owner that is still waiting FIRST_LOOK after it
queued registers itself and walks the edges from itself (a few reads per step,
bounded), then again every ``period`` while it waits. Each waiter in a cycle finds
it, and only the youngest wait in it (the latest start) fails itself, with ABORTED /
DEADLOCK and the cycle, so the others go on. The waiter whose queueing closes a
cycle is its youngest and the older ones registered before it looked, so a fresh
deadlock ends FIRST_LOOK after it formed; one closed by two waits at once on two
replicas, at the younger's next look. A cycle is believed only if a second walk
finds it again (a true deadlock stays; edges read at different moments may not).

Cost: nothing on an uncontended acquire, for callers without an owner, or for a
wait shorter than FIRST_LOOK; for a longer one, two registry writes and a walk per
look. The cost is bounded however large the waits-for graph grows (400 owners each
waiting for 64 locks once made every waiter walk hundreds of owners every second):

- a walk reads at most MAX_READS Redis values (the rest of the graph stays unseen:
  a cycle behind more than that is found by a waiter nearer to it, or not at all,
  and its TTLs end it);
- at most LOOKS_AT_ONCE walks run at once in a process, the first looks (a fresh
  deadlock) ahead of the repeated ones, and each waiter looks again only after
  ``period * max(1, watchers / LOOKS_PER_PERIOD)``: a process's walks per second
  stay bounded however many of its calls wait;
- a look never runs past its wait's end: a wait answers in time whatever the walk
  costs (an unfinished look finds nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass

from .. import tallies
from ..errors import Deadlock
from ..keys import KeySpace
from ..store.client import command
from ..store.reply_shapes import Codes
from ..store.scripts import Commands, script

MAX_DEPTH = 16  # callers in a cycle the walk can find
MAX_NODES = 256  # callers one walk may visit
MAX_READS = 256  # Redis values one walk may read (an owner's entry, and two per lock it waits for)
FIRST_LOOK = 0.1  # seconds after queueing: a wait that closed a cycle fails this soon
LOOKS_AT_ONCE = 2  # walks one process runs at once
LOOKS_PER_PERIOD = 16  # repeated looks one process makes per period, however many wait

_WAITS_FOR = script("waits_for.lua", Codes(1))

SCRIPTS = (_WAITS_FOR,)


@dataclass(frozen=True)
class Edge:
    waiter: str  # owner
    lock: str  # the lock it waits for
    holder: str  # the owner holding that lock
    since_ms: int  # when the waiter started waiting (Redis clock)


class Watch:
    """One wait's part in detection. ``queued`` once it is in line; the caller waits
    at most ``wait_for(left)`` at a time and then calls ``look``, which returns the
    cycle's text when this wait must fail to break it. The first look comes
    FIRST_LOOK after queueing (most waits are over by then, and cost nothing), the
    next ones every ``period``."""

    def __init__(self, detector: Deadlocks | None, owner: str, lease: str, names: Sequence[str], wait_ms: int) -> None:
        self._d, self._owner, self._lease, self._names, self._wait_ms = detector, owner, lease, names, wait_ms
        self._since: int | None = None
        self._registered = False
        self._look_at = float("inf")

    def queued(self, now_ms: int) -> None:
        if self._d is not None and self._since is None:
            self._since = now_ms
            self._look_at = asyncio.get_running_loop().time() + FIRST_LOOK

    def wait_for(self, left: float) -> float:
        return max(0.0, min(left, self._look_at - asyncio.get_running_loop().time()))

    async def look(self, until: float) -> str | None:
        """The cycle this wait must fail to break, or None; returns by loop time
        ``until`` (the wait's end) whatever Redis and the other looks cost."""
        loop = asyncio.get_running_loop()
        if self._d is None or self._since is None or loop.time() < self._look_at:
            return None
        first = not self._registered
        try:
            async with asyncio.timeout_at(until):
                if first:
                    self._registered = True
                    self._d.watching += 1
                    await self._d.begin(self._owner, self._lease, self._names, self._since,
                                        self._since + self._wait_ms)
                async with self._d.turn(first):
                    return await self._d.victim(self._owner)
        except TimeoutError:
            return None
        finally:
            self._look_at = loop.time() + self._d.next_look()

    def done(self) -> None:
        """Clears the registry entry in the background: the call answers now, even
        while Redis does not (an entry left behind ends with its wait's deadline)."""
        if self._d is not None and self._registered:
            self._d.watching -= 1
            self._d.end_soon(self._owner, self._lease)


class Deadlocks:
    def __init__(self, redis: Commands, keyspace: KeySpace, *, period: float = 1.0) -> None:
        self._redis = redis
        self._keys = keyspace
        self.period = period
        self.watching = 0  # this process's waits that look (registered)
        self._ending: set[asyncio.Task[None]] = set()
        self._running = 0  # walks running now
        self._turns: dict[bool, deque[asyncio.Future[None]]] = {True: deque(), False: deque()}  # first looks, others

    def next_look(self) -> float:
        """Seconds until a waiter looks again: the period, stretched so that the
        process's waiters make at most LOOKS_PER_PERIOD looks per period."""
        return self.period * max(1.0, self.watching / LOOKS_PER_PERIOD)

    @contextlib.asynccontextmanager
    async def turn(self, first: bool) -> AsyncIterator[None]:
        """One of at most LOOKS_AT_ONCE walks; first looks go ahead of repeated ones."""
        if self._running >= LOOKS_AT_ONCE:
            fut = asyncio.get_running_loop().create_future()
            self._turns[first].append(fut)
            try:
                await fut  # the walk that ended handed its place over (_running unchanged)
            except BaseException:
                if fut.done() and not fut.cancelled():
                    self._hand_over()  # handed a place it will not use
                else:
                    with contextlib.suppress(ValueError):  # already passed over by _hand_over
                        self._turns[first].remove(fut)
                raise
        else:
            self._running += 1
        try:
            yield
        finally:
            self._hand_over()

    def _hand_over(self) -> None:
        for queue in (self._turns[True], self._turns[False]):
            while queue:
                fut = queue.popleft()
                if not fut.done():
                    fut.set_result(None)
                    return
        self._running -= 1

    @contextlib.asynccontextmanager
    async def watch(self, owner: str, lease: str, names: Sequence[str], wait_ms: int) -> AsyncIterator[Watch]:
        w = Watch(self if owner else None, owner, lease, names, wait_ms)
        try:
            yield w
        finally:
            w.done()

    async def begin(self, owner: str, lease: str, names: Sequence[str], since_ms: int, until_ms: int) -> None:
        entry = "\n".join([str(until_ms), str(since_ms), lease, *names])
        await _WAITS_FOR.run(self._redis, [self._keys.waits_for], ["begin", owner, lease, entry])

    def end_soon(self, owner: str, lease: str) -> None:
        task = asyncio.create_task(self._end(owner, lease))
        self._ending.add(task)
        task.add_done_callback(self._ending.discard)

    async def _end(self, owner: str, lease: str) -> None:
        with contextlib.suppress(Exception):  # Redis away: the entry ends with its wait's deadline
            await _WAITS_FOR.run(self._redis, [self._keys.waits_for], ["end", owner, lease])

    async def victim(self, owner: str) -> str | None:
        """The cycle through ``owner`` (as text) if there is one, found twice, and
        owner's wait is its youngest; else None."""
        cycle = await self.cycle(owner)
        if cycle is None or max(cycle, key=lambda e: (e.since_ms, e.waiter)).waiter != owner:
            return None
        again = await self.cycle(owner)
        if again is None or [(e.waiter, e.lock) for e in again] != [(e.waiter, e.lock) for e in cycle]:
            return None
        return " ".join(f"{e.waiter} -[{e.lock}]->" for e in cycle) + f" {owner}"

    async def cycle(self, owner: str) -> list[Edge] | None:
        """A path of waits-for edges from owner back to owner (depth first), within
        MAX_DEPTH, MAX_NODES and MAX_READS."""
        visited: set[str] = set()
        reads = [MAX_READS]

        async def walk(node: str, path: list[Edge]) -> list[Edge] | None:
            if len(path) >= MAX_DEPTH or len(visited) >= MAX_NODES or reads[0] <= 0:
                return None
            visited.add(node)
            for edge in await self._edges(node, reads):
                if edge.holder == owner:
                    return [*path, edge]
                if edge.holder not in visited:
                    found = await walk(edge.holder, [*path, edge])
                    if found:
                        return found
            return None

        return await walk(owner, [])

    async def _edges(self, waiter: str, reads: list[int]) -> list[Edge]:
        """waiter -> the owners holding the locks it waits for, if it still waits;
        ``reads[0]``, the walk's budget of reads, pays for the entry and two per lock
        (the locks past the budget are not looked at)."""
        reads[0] -= 1
        entry = await command(self._redis, "HGET", self._keys.waits_for, waiter)
        if not entry:
            return []
        _, since, lease, *names = entry.split("\n")
        names = names[:max(0, reads[0] // 2)]
        reads[0] -= 2 * len(names)
        keys = [self._keys.lock(n) for n in names]
        queued = await asyncio.gather(*(command(self._redis, "ZSCORE", k.queue, lease) for k in keys))
        holders = await asyncio.gather(*(command(self._redis, "HGET", k.holder, "owner") for k in keys))
        # A lock held under the waiter's own label is no edge: callers often share a label
        # (every replica of one service), and one of them waiting for another is no deadlock.
        return [Edge(waiter, n, h, int(since)) for n, q, h in zip(names, queued, holders)
                if q is not None and h and h != waiter]


def watching(deadlocks: Deadlocks | None, owner: str, lease: str, names: Sequence[str],
             wait_ms: int) -> contextlib.AbstractAsyncContextManager[Watch]:
    """deadlocks.watch(...), or a Watch that never looks when this wait is not checked."""
    if deadlocks is None:
        return contextlib.nullcontext(Watch(None, owner, lease, names, wait_ms))
    return deadlocks.watch(owner, lease, names, wait_ms)


def deadlock_error(name: str, cycle: str) -> Deadlock:
    """The error of the wait that gives up to break a cycle (counted for the console)."""
    tallies.count("deadlocks")
    return Deadlock(f"waiting for {name!r} would deadlock: {cycle}; this wait was the youngest in the cycle",
                    name=name, cycle=cycle)

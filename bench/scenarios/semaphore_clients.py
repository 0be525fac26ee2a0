"""The client side of the semaphore-handoff scenario: one process runs some of the clients.

Every client loops: acquire one permit (wait up to ``wait`` s), hold ``hold`` s,
release, think ``think`` s, until ``end_at``. Per acquisition it records CLOCK_MONOTONIC
readings (system-wide on Linux, so the processes' records can be merged), as in
handoff_clients:

    acq_start   just before the acquire call (the first attempt, for polling clients)
    acq_end     just after it returned
    rel_sent    just before the release call
    rel_end     just after it returned
    held        whether the release found the permit still held (False: it had been
                dropped while this client thought it held it)

An acquire that gave up records NaN for the last three times.

Implementations:
  concord     concord.AsyncClient semaphores, one asyncio task per client, one channel
              per process
  book-fair   "Redis in Action" 6.3.2 fair semaphore (book_semaphore.py) over sync
              redis-py, one thread per client, retrying every ``poll`` s
  book-fair-skew  the same, with the clock of every other client (odd ids) ``skew`` s
              ahead: the book's version stamps and expires entries by the caller's clock

The parent (semaphore_handoff.py) starts ``main`` in a spawned process, waits for
"ready", then sends one common start time, so setup is never measured.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from .handoff_clients import _handshake, _report, run_threads

Event = tuple[int, float, float, float, float, bool]  # client, acq_start, acq_end, rel_sent, rel_end, held
NAN = math.nan


@dataclass(frozen=True)
class Spec:
    impl: str
    target: str  # concord: host:port; book-fair*: Redis port
    name: str  # the semaphore
    limit: int
    clients: tuple[int, ...]  # ids of the clients this process runs
    hold: float
    think: float
    wait: float
    ttl: float  # Concord's permit TTL; the book's timeout
    poll: float = 0.001  # book: sleep between attempts
    skew: float = 0.0  # book-fair-skew: added to time.time() by clients with an odd id


def main(conn: Connection, spec: Spec) -> None:
    from ..harness import _die_with_parent

    _die_with_parent()
    run = _concord if spec.impl == "concord" else _threads
    run(conn, spec)


# --- Concord: asyncio tasks over the real client library --------------------------------

def _concord(conn: Connection, spec: Spec) -> None:
    asyncio.run(_concord_main(conn, spec))


async def _concord_main(conn: Connection, spec: Spec) -> None:
    import concord

    async with concord.AsyncClient(spec.target) as client:
        await client.semaphore(spec.name, limit=spec.limit).describe()  # connect before the clock starts
        start_at, end_at = await asyncio.to_thread(_handshake, conn)
        events: list[Event] = []
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = time.process_time()
        await asyncio.gather(*(_concord_client(client, cid, spec, end_at, events) for cid in spec.clients))
        cpu = time.process_time() - cpu0
    _report(conn, events, cpu, time.monotonic() - start_at)


async def _concord_client(client, cid: int, spec: Spec, end_at: float, events: list[Event]) -> None:
    from concord.errors import PermitNotHeld

    sem = client.semaphore(spec.name, limit=spec.limit, permits=1, ttl=spec.ttl)
    while time.monotonic() < end_at:
        t0 = time.monotonic()
        permit = await sem.acquire(timeout=spec.wait)
        t1 = time.monotonic()
        if permit is None:
            events.append((cid, t0, t1, NAN, NAN, False))
            continue
        await asyncio.sleep(spec.hold)
        t2 = time.monotonic()
        try:
            await sem.release(permit)
            held = True
        except PermitNotHeld:
            held = False
        events.append((cid, t0, t1, t2, time.monotonic(), held))
        await asyncio.sleep(spec.think)


# --- the book's fair semaphore: one thread per client, sync redis client -----------------

def _threads(conn: Connection, spec: Spec) -> None:
    run_threads(conn, spec, _thread_client, max_connections=len(spec.clients) + 4)


def _thread_client(r, cid: int, spec: Spec, start_at: float, end_at: float, events: list[Event]) -> None:
    from .book_semaphore import FairSemaphore

    skew = spec.skew if cid % 2 else 0.0
    sem = FairSemaphore(r, spec.name, spec.limit, spec.ttl, clock=lambda: time.time() + skew)
    time.sleep(max(0.0, start_at - time.monotonic()))
    while time.monotonic() < end_at:
        t0 = time.monotonic()
        holder = sem.acquire(spec.wait, spec.poll)
        t1 = time.monotonic()
        if holder is None:
            events.append((cid, t0, t1, NAN, NAN, False))
            continue
        time.sleep(spec.hold)
        t2 = time.monotonic()
        held = sem.release(holder)
        events.append((cid, t0, t1, t2, time.monotonic(), held))
        time.sleep(spec.think)

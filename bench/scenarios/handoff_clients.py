"""The client side of the handoff scenario: one process runs some of the clients.

Every client loops: acquire (wait up to ``wait`` s), hold ``hold`` s, release, think
``think`` s, until ``end_at``. It records, per acquisition, four CLOCK_MONOTONIC
readings (system-wide on Linux, so processes can be merged):

    acq_start   just before the acquire call
    acq_end     just after it returned
    rel_sent    just before the release call
    rel_end     just after it returned

Implementations:
  concord            concord.AsyncClient, one asyncio task per client, one channel (and so one
                     lock Session stream) per process
  concord-sync       concord.Client, one thread per client, one Client (and so one lock Session
                     stream, read by one thread) per process
  redis-py           redis.lock.Lock, blocking, default sleep=0.1, one thread per client
  redis-py-1ms       the same with sleep=0.001 (the book's 1 ms polling)
  python-redis-lock  redis_lock.Lock (SET NX + BLPOP on a signal list), one thread per client

etcd runs the same loop in a Go program (bench/peers/etcd_lock, etcd's concurrency.Mutex)
that reports the same events; bench/peers/etcd.py runs it.

The parent (handoff.py) starts this module's ``main`` in a spawned process, waits for
"ready" from every process, then sends one common start time, so setup (imports,
connections) is never part of the measured window.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

Event = tuple[int, float, float, float, float]  # client, acq_start, acq_end, rel_sent, rel_end
NAN = math.nan


@dataclass(frozen=True)
class Spec:
    impl: str
    target: str  # concord: host:port; the others: Redis port
    name: str  # the lock
    clients: tuple[int, ...]  # ids of the clients this process runs
    hold: float
    think: float
    wait: float
    ttl: float


def main(conn: Connection, spec: Spec) -> None:
    from ..harness import _die_with_parent

    _die_with_parent()
    run = {"concord": _concord, "concord-sync": _concord_sync}.get(spec.impl, _threads)
    run(conn, spec)


def _handshake(conn: Connection) -> tuple[float, float]:
    conn.send("ready")
    return conn.recv()  # (start_at, end_at)


def _report(conn: Connection, events: list[Event], cpu: float, window: float) -> None:
    conn.send({"events": events, "client_cpu_busy": cpu / window if window > 0 else NAN})
    conn.close()


# --- Concord: asyncio tasks over the real client library --------------------------------

def _concord(conn: Connection, spec: Spec) -> None:
    asyncio.run(_concord_main(conn, spec))


async def _concord_main(conn: Connection, spec: Spec) -> None:
    import concord

    async with concord.AsyncClient(spec.target) as client:
        await client.lock(spec.name).describe()  # connect before the clock starts
        start_at, end_at = await asyncio.to_thread(_handshake, conn)
        events: list[Event] = []
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = time.process_time()
        await asyncio.gather(*(_concord_client(client, cid, spec, end_at, events) for cid in spec.clients))
        cpu = time.process_time() - cpu0
    _report(conn, events, cpu, time.monotonic() - start_at)


async def _concord_client(client, cid: int, spec: Spec, end_at: float, events: list[Event]) -> None:
    lock = client.lock(spec.name, ttl=spec.ttl)
    while time.monotonic() < end_at:
        t0 = time.monotonic()
        lease = await lock.acquire(timeout=spec.wait)
        t1 = time.monotonic()
        if lease is None:
            events.append((cid, t0, t1, NAN, NAN))
            continue
        await asyncio.sleep(spec.hold)
        t2 = time.monotonic()
        await lock.release(lease)
        events.append((cid, t0, t1, t2, time.monotonic()))
        await asyncio.sleep(spec.think)


# --- one thread per client: Concord's sync client, redis-py and python-redis-lock ---------

def _concord_sync(conn: Connection, spec: Spec) -> None:
    """One thread per client over one concord.Client (so one lock Session)."""
    import concord

    with concord.Client(spec.target) as client:
        client.lock(spec.name).describe()  # connect before the clock starts
        in_threads(conn, spec, _thread_client, client)


def _threads(conn: Connection, spec: Spec) -> None:
    run_threads(conn, spec, _thread_client)


def run_threads(conn: Connection, spec, thread_client, **redis_kwargs) -> None:
    """One thread per client over one sync redis client; reports like the Concord side."""
    import redis

    r = redis.Redis(host="127.0.0.1", port=int(spec.target), client_name="bench-client", **redis_kwargs)
    r.ping()
    try:
        in_threads(conn, spec, thread_client, r)
    finally:
        r.close()


def in_threads(conn: Connection, spec, thread_client, client) -> None:
    """Runs thread_client(client, cid, spec, start_at, end_at, events) in a thread per
    client from the common start, and reports their events."""
    start_at, end_at = _handshake(conn)
    events: list[Event] = []  # list.append is atomic under the GIL
    threads = [threading.Thread(target=thread_client, args=(client, cid, spec, start_at, end_at, events))
               for cid in spec.clients]
    for t in threads:
        t.start()
    cpu0 = time.process_time()
    for t in threads:
        t.join()
    cpu = time.process_time() - cpu0
    _report(conn, events, cpu, time.monotonic() - start_at)


def _make_lock(client, spec: Spec):
    """A per-thread lock: acquire() returns what release() takes, falsy if not had."""
    if spec.impl == "concord-sync":
        lock = client.lock(spec.name, ttl=spec.ttl)
        return (lambda: lock.acquire(timeout=spec.wait)), lock.release
    if spec.impl == "python-redis-lock":
        import redis_lock

        lock = redis_lock.Lock(client, spec.name, expire=int(max(spec.ttl, spec.wait)))
        return (lambda: lock.acquire(blocking=True, timeout=spec.wait)), lambda _: lock.release()
    sleep = {"redis-py": 0.1, "redis-py-1ms": 0.001}[spec.impl]
    lock = client.lock(spec.name, timeout=spec.ttl, sleep=sleep, blocking=True, blocking_timeout=spec.wait)
    return lock.acquire, lambda _: lock.release()


def _thread_client(client, cid: int, spec: Spec, start_at: float, end_at: float, events: list[Event]) -> None:
    acquire, release = _make_lock(client, spec)
    time.sleep(max(0.0, start_at - time.monotonic()))
    while time.monotonic() < end_at:
        t0 = time.monotonic()
        held = acquire()
        t1 = time.monotonic()
        if not held:
            events.append((cid, t0, t1, NAN, NAN))
            continue
        time.sleep(spec.hold)
        t2 = time.monotonic()
        release(held)
        events.append((cid, t0, t1, t2, time.monotonic()))
        time.sleep(spec.think)

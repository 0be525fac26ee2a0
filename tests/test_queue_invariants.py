"""Queue invariants over a recorded history of producers and unreliable consumers.

3 producers enqueue tasks with random priorities, delays and max attempts while 8
consumers dequeue them with short leases and, per task, ack, nack, or "crash" (drop
it and let the lease expire). From the history:

- every enqueued task ends acked exactly once or dead after its max attempts, never
  both, and none is lost; nothing is left ready, delayed or leased;
- no two consumers hold a lease on the same task at once: a task's deliveries, each
  from the moment its reply arrived to the earlier of its settle being sent and its
  lease counted from when its Dequeue was sent, never overlap, and attempts increase;
- no task is delivered before its delay has passed;
- the tasks of one Dequeue reply come in priority order.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import concord

PRODUCERS, CONSUMERS = 3, 8
RUN_SECONDS = 5.0
LEASE = 0.3


@dataclass
class Enqueued:
    sent: float
    delay: float
    priority: int
    max_attempts: int


@dataclass
class Delivery:
    task_id: str
    attempt: int
    sent: float
    got: float
    settled: float | None = None


@dataclass
class History:
    tasks: dict[str, Enqueued] = field(default_factory=dict)
    deliveries: list[Delivery] = field(default_factory=list)
    acked: list[str] = field(default_factory=list)
    replies: list[list[int]] = field(default_factory=list)  # priorities of each reply, in order


async def producer(q: concord.AsyncQueue, h: History, rng: random.Random, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        batch = [concord.NewTask("t", priority=rng.randint(0, 3), delay=rng.choice([None, None, 0.05, 0.2]),
                                 max_attempts=rng.randint(1, 4)) for _ in range(rng.randint(1, 5))]
        sent = time.monotonic()
        for spec, r in zip(batch, await q.put_many(batch)):
            h.tasks[r.task_id] = Enqueued(sent, spec.delay or 0.0, spec.priority, spec.max_attempts)
        await asyncio.sleep(rng.uniform(0, 0.05))


async def consumer(q: concord.AsyncQueue, h: History, rng: random.Random, reliable: asyncio.Event) -> None:
    while True:
        sent = time.monotonic()
        got = await q.get(rng.randint(1, 3), lease_ttl=LEASE, timeout=0.2)
        arrived = time.monotonic()
        h.replies.append([t.priority for t in got])
        for task in got:
            d = Delivery(task.task_id, task.attempt, sent, arrived)
            h.deliveries.append(d)
            await asyncio.sleep(rng.uniform(0, 0.02))
            roll = 0.0 if reliable.is_set() else rng.random()
            if roll < 0.15:  # crash: forget the task; its lease expires
                continue
            d.settled = time.monotonic()
            try:
                if roll < 0.30:
                    await task.nack("flaky", retry_delay=rng.choice([0, 0.05]))
                else:
                    await task.ack()
                    h.acked.append(task.task_id)
            except concord.TaskLeaseNotHeld:
                pass  # held past its lease: the history check accounts for it
        if reliable.is_set() and not got:
            s = await q.stats()
            if s.ready + s.delayed + s.leased == 0:
                return


async def test_queue_invariants_under_crashing_consumers(concord_server, name):
    h = History()
    rng = random.Random(name)
    clients = [concord.AsyncClient(concord_server.target) for _ in range(4)]
    reliable = asyncio.Event()
    try:
        stop_at = time.monotonic() + RUN_SECONDS
        queues = [c.queue(name) for c in clients]
        producers = [producer(queues[i % 4], h, random.Random(rng.random()), stop_at) for i in range(PRODUCERS)]
        consumers = [asyncio.create_task(consumer(queues[i % 4], h, random.Random(rng.random()), reliable))
                     for i in range(CONSUMERS)]
        await asyncio.gather(*producers)
        reliable.set()  # drain: consumers stop crashing and nacking
        await asyncio.wait_for(asyncio.gather(*consumers), 60)
        stats = await queues[0].stats()
        dead = {t.task_id: t for t in await queues[0].dead(limit=1000)}
    finally:
        for c in clients:
            await c.close()

    assert len(h.tasks) > 100, f"too few tasks to mean anything: {len(h.tasks)}"
    assert (stats.ready, stats.delayed, stats.leased) == (0, 0, 0), stats
    acked = set(h.acked)
    assert len(acked) == len(h.acked), "a task was acked twice"
    assert not acked & dead.keys(), "a task was both acked and dead-lettered"
    assert acked | dead.keys() == set(h.tasks), f"lost: {set(h.tasks) - acked - dead.keys()}"
    for task_id, t in dead.items():
        assert t.attempt == h.tasks[task_id].max_attempts, f"{task_id} died after {t.attempt} attempts"

    by_task: dict[str, list[Delivery]] = {}
    for d in h.deliveries:
        by_task.setdefault(d.task_id, []).append(d)
    for task_id, ds in by_task.items():
        ds.sort(key=lambda d: d.got)
        assert ds[0].got >= h.tasks[task_id].sent + h.tasks[task_id].delay, f"{task_id} delivered before its delay"
        assert [d.attempt for d in ds] == sorted(d.attempt for d in ds)
        for a, b in zip(ds, ds[1:]):
            end = min(a.settled or float("inf"), a.sent + LEASE)
            assert end <= b.got, f"{task_id}: attempts {a.attempt} and {b.attempt} held at once"
            assert a.attempt < b.attempt
    for priorities in h.replies:
        assert priorities == sorted(priorities, reverse=True), f"reply out of priority order: {priorities}"

"""Three concord-server processes on one Redis keep every promise one process keeps.

Any replica may wake a waiter, deliver a task or carry a chat message of another:
replicas share nothing but Redis. The invariant workloads of
test_lock_invariants.py, test_queue_invariants.py and test_chat_invariants.py run
here with their clients spread over the replicas.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Iterator

import pytest

import concord
import test_chat_invariants as chat_inv
import test_lock_invariants as lock_inv
import test_queue_invariants as queue_inv
from support import ServerProcess

# Contention across server processes with answer-time bounds: run alone after the rest (make test).
pytestmark = pytest.mark.serial

REPLICAS = 3


@pytest.fixture(scope="module")
def replicas(redis_server, tmp_path_factory) -> Iterator[list[ServerProcess]]:
    logs = tmp_path_factory.mktemp("replicas")
    servers = []
    try:
        for i in range(REPLICAS):
            servers.append(ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING").start(
                logs / f"replica{i}.log"))
        yield servers
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()


@pytest.fixture
async def clients(replicas):
    """One AsyncClient per replica: clients[i] talks to replicas[i] only."""
    cs = [concord.AsyncClient(s.target) for s in replicas]
    yield cs
    for c in cs:
        await c.close()


async def _until(predicate, message: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (value := await predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {message}"
        await asyncio.sleep(0.01)
    return value


async def test_lock_waiters_on_other_replicas_are_woken_by_a_release_through_one(clients, name):
    a, b, c = clients
    first = await a.lock(name, ttl=60).acquire()
    on_b = asyncio.create_task(b.lock(name, ttl=60).acquire(timeout=30))
    await _until(lambda: _lock_waiters(a, name, 1), "the waiter on B queued")
    on_c = asyncio.create_task(c.lock(name, ttl=60).acquire(timeout=30))
    await _until(lambda: _lock_waiters(a, name, 2), "the waiter on C queued")

    await a.lock(name).release(first)  # through A: B's waiter is first in line
    second = await asyncio.wait_for(on_b, 30)
    assert not on_c.done()
    await a.lock(name).release(second)  # B's lease, released through A
    third = await asyncio.wait_for(on_c, 30)
    assert first.fencing_token < second.fencing_token < third.fencing_token
    assert (await b.lock(name).describe()).fencing_token == third.fencing_token
    await third.release()


async def _lock_waiters(client: concord.AsyncClient, name: str, n: int) -> bool:
    return (await client.lock(name).describe()).waiters == n


async def test_semaphore_waiters_on_other_replicas_are_woken_by_a_release_through_one(clients, name):
    a, b, c = clients
    held = [await a.semaphore(name, limit=2, ttl=60).acquire() for _ in range(2)]
    on_b = asyncio.create_task(b.semaphore(name, limit=2, ttl=60).acquire(timeout=30))
    await _until(lambda: _sem_waiters(a, name, 1), "the waiter on B queued")
    on_c = asyncio.create_task(c.semaphore(name, limit=2, ttl=60).acquire(timeout=30))
    await _until(lambda: _sem_waiters(a, name, 2), "the waiter on C queued")

    await a.semaphore(name, limit=2).release(held[0])
    got_b = await asyncio.wait_for(on_b, 30)
    assert not on_c.done()
    await a.semaphore(name, limit=2).release(held[1])
    got_c = await asyncio.wait_for(on_c, 30)
    holders = {h.permit_id for h in (await c.semaphore(name, limit=2).describe()).holders}
    assert holders == {got_b.permit_id, got_c.permit_id}
    for p in (got_b, got_c):
        await p.release()


async def _sem_waiters(client: concord.AsyncClient, name: str, n: int) -> bool:
    return (await client.semaphore(name, limit=2).describe()).waiters == n


async def test_lock_invariants_hold_across_replicas(clients, name):
    """test_lock_invariants' workload (random waits, holds past the TTL, cancellations)
    with its 24 clients spread over the three replicas."""
    names = [f"{name}:{n}" for n in lock_inv.LOCKS]
    history: list[lock_inv.Attempt] = []
    rng = random.Random(name)
    await asyncio.gather(*(lock_inv.client_loop(i, clients[i % REPLICAS], names, history, random.Random(rng.random()))
                           for i in range(lock_inv.CLIENTS)))
    for n in names:
        await lock_inv._until_idle(clients[0], n)

    grants = lock_inv.check_history(history, names)
    assert {a.client % REPLICAS for a in grants} == set(range(REPLICAS)), "some replica granted nothing"


async def test_semaphore_never_exceeds_its_limit_across_replicas(clients, name):
    """Clients on every replica take 1-2 permits of a 3-permit semaphore for random
    times, some past their TTL. From the recorded history: the permits held at any
    instant (each from its reply to the earlier of its release and its TTL counted
    from its request) never exceed the limit, and every replica granted some."""
    limit, run_until, give_up = 3, time.monotonic() + 4.0, time.monotonic() + 30.0
    held: list[tuple[float, float, int, int]] = []  # (from, to, permits, replica)

    def running() -> bool:  # 4 s, longer on a slow machine until there are grants enough to judge
        now = time.monotonic()
        return now < run_until or (len(held) <= 40 and now < give_up)

    async def loop(i: int, rng: random.Random) -> None:
        client = clients[i % REPLICAS]
        while running():
            permits, ttl = rng.choice([1, 1, 2]), rng.choice([0.1, 0.3, 1.0])
            sent = time.monotonic()
            permit = await client.semaphore(name, limit=limit, permits=permits, ttl=ttl).acquire(
                timeout=rng.choice([0.0, 0.1, 1.0]))
            if permit is None:
                continue
            got = time.monotonic()
            await asyncio.sleep(rng.choice([0.0, 0.01, ttl * 0.5, ttl * 1.5]))
            held.append((got, min(time.monotonic(), sent + ttl), permits, i % REPLICAS))
            try:
                await permit.release()
            except concord.PermitNotHeld:
                pass  # expired first: its interval ends at its TTL

    rng = random.Random(name)
    await asyncio.gather(*(loop(i, random.Random(rng.random())) for i in range(12)))
    assert len(held) > 30, f"too few grants to mean anything: {len(held)}"
    assert {r for *_, r in held} == set(range(REPLICAS)), "some replica granted nothing"
    events = sorted([(start, p) for start, end, p, _ in held if start < end] +
                    [(end, -p) for start, end, p, _ in held if start < end], key=lambda e: (e[0], e[1]))
    level = 0
    for _, delta in events:  # ends sort before starts at the same instant
        level += delta
        assert level <= limit, f"{level} permits held at once, limit {limit}"


async def test_queue_consumers_on_every_replica_process_each_task_exactly_once(clients, name):
    """test_queue_invariants' producers (random priorities and delays) enqueue through
    every replica; Consume streams and Dequeue loops on every replica ack what they get."""
    produced = queue_inv.History()
    acked: list[tuple[str, int, int]] = []  # (task id, attempt, replica)
    stop_at = time.monotonic() + 3.0
    rng = random.Random(name)

    async def streaming(r: int) -> None:
        async with clients[r].queue(name).consume(prefetch=2) as tasks:
            async for task in tasks:
                await tasks.ack(task)
                acked.append((task.task_id, task.attempt, r))

    async def polling(r: int) -> None:
        q = clients[r].queue(name)
        while True:
            for task in await q.get(3, timeout=1):
                await task.ack()
                acked.append((task.task_id, task.attempt, r))

    consumers = [asyncio.create_task(f(r)) for r in range(REPLICAS) for f in (streaming, polling)]
    try:
        await asyncio.gather(*(queue_inv.producer(clients[i % REPLICAS].queue(name), produced,
                                                  random.Random(rng.random()), stop_at) for i in range(REPLICAS)))
        await _until(lambda: _all_acked(acked, produced), "every task acked", timeout=30)
        stats = await clients[0].queue(name).stats()
    finally:
        for t in consumers:
            t.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)

    assert len(produced.tasks) > 100, f"too few tasks to mean anything: {len(produced.tasks)}"
    counts = Counter(task_id for task_id, _, _ in acked)
    assert set(counts) == set(produced.tasks), f"lost: {set(produced.tasks) - set(counts)}"
    assert max(counts.values()) == 1, f"acked twice: {[t for t, n in counts.items() if n > 1][:5]}"
    assert {attempt for _, attempt, _ in acked} == {1}, "a task was delivered more than once"
    assert {r for _, _, r in acked} == set(range(REPLICAS)), "a replica's consumers got nothing"
    assert (stats.ready, stats.delayed, stats.leased) == (0, 0, 0), stats


async def _all_acked(acked, produced) -> bool:
    return {task_id for task_id, _, _ in acked} >= set(produced.tasks)


async def test_chat_subscribers_on_every_replica_get_every_message_once_in_order(clients, name):
    """test_chat_invariants' subscribers (explicit acks, disconnecting and coming back,
    sometimes before acking) on every replica, every member also sending through
    another replica: every member gets 1..last, in order, nothing twice."""
    members = [chat_inv.Member(f"{name}:m{i}") for i in range(2 * REPLICAS)]
    room = chat_inv.Room()
    room.chat_id = await clients[0].chat.create(members[0].user, [m.user for m in members[1:]], "welcome")
    room.last_sent = 1
    rng = random.Random(name)
    subs = [asyncio.create_task(chat_inv.subscriber(clients[i % REPLICAS], m, room, random.Random(rng.random())))
            for i, m in enumerate(members)]
    try:
        stop_at = time.monotonic() + 3.0
        await asyncio.gather(*(_sender(clients[(i + 1) % REPLICAS], m.user, room, random.Random(rng.random()), stop_at)
                               for i, m in enumerate(members)))
        await _until(lambda: _caught_up(members, room), "every member caught up", timeout=30)
    finally:
        for t in subs:
            t.cancel()
        await asyncio.gather(*subs, return_exceptions=True)

    assert room.last_sent > 100, f"too few messages to mean anything: {room.last_sent}"
    assert not room.gaps
    for m in members:
        assert m.received == list(range(1, room.last_sent + 1)), f"{m.user}: missing, repeated or out of order"


async def _sender(client: concord.AsyncClient, user: str, room: chat_inv.Room, rng: random.Random,
                  stop_at: float) -> None:
    """chat_inv.sender, but reading room.last_sent only after its send returns: other
    senders move it meanwhile."""
    while time.monotonic() < stop_at:
        sent = await client.chat.send(room.chat_id, user, f"from {user}")
        room.last_sent = max(room.last_sent, sent)
        await asyncio.sleep(rng.uniform(0, 0.03))


async def _caught_up(members, room) -> bool:
    return all(m.received and m.received[-1] >= room.last_sent for m in members)

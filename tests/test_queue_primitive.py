"""The queue primitive on its own against real Redis, no gRPC."""

from __future__ import annotations

import asyncio

import pytest

from concord_server.errors import TaskFinished, TaskLeased, TaskLeaseNotHeld, TaskNotFound
from concord_server.primitives.queue import NewTask
from support import async_wait_until, queue_primitive


@pytest.fixture
async def queues(redis_server):
    async with queue_primitive(redis_server.url, retry_backoff_ms=50) as queues:
        yield queues


async def ids(queues, name, state="ready"):
    return [t.task_id for t in await queues.peek(name, state, 100)]


async def test_priority_then_fifo_and_binary_payloads(queues, name):
    added = await queues.enqueue(name, [NewTask("t", b"a"), NewTask("t", b"\x00\xff", priority=5),
                                        NewTask("t", b"c"), NewTask("t", b"d", priority=5), NewTask("t", b"e", priority=-1)])
    a, b, c, d, e = [r.task_id for r in added]
    assert await ids(queues, name) == [b, d, a, c, e]
    got = await queues.dequeue([name], 10, 10_000, 0)
    assert [t.task_id for t in got] == [b, d, a, c, e]
    assert got[0].payload == b"\x00\xff" and all(t.attempt == 1 and t.state == "leased" for t in got)
    assert len({t.lease for t in got}) == 5
    assert await queues.dequeue([name], 10, 10_000, 0) == []


async def test_several_queues_are_taken_strictly_in_order(queues, name):
    hi, lo = f"{name}:hi", f"{name}:lo"
    await queues.enqueue(lo, [NewTask("lo")] * 2)
    await queues.enqueue(hi, [NewTask("hi")])
    got = await queues.dequeue([hi, lo], 2, 10_000, 0)
    assert [(t.queue, t.type) for t in got] == [(hi, "hi"), (lo, "lo")]


async def test_ack_finishes_and_a_second_settle_is_refused(queues, name):
    (r,) = await queues.enqueue(name, [NewTask("t")])
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    await queues.ack(name, t.task_id, t.lease)
    for settle in (queues.ack(name, t.task_id, t.lease), queues.release(name, t.task_id, t.lease),
                   queues.nack(name, t.task_id, t.lease, None, "x"), queues.extend(name, t.task_id, t.lease, 1000)):
        with pytest.raises(TaskLeaseNotHeld):
            await settle
    stats = await queues.stats(name)
    assert (stats.ready, stats.delayed, stats.leased, stats.dead, stats.finished) == (0, 0, 0, 0, 1)
    assert (await queues.get_task(name, t.task_id)).state == "succeeded"


async def test_nack_backs_off_exponentially_then_dead_letters_with_the_error(queues, name):
    await queues.enqueue(name, [NewTask("t", max_attempts=3)])
    delays = []
    for attempt in (1, 2, 3):
        (t,) = await queues.dequeue([name], 1, 10_000, 5_000)
        assert t.attempt == attempt
        outcome = await queues.nack(name, t.task_id, t.lease, None, f"failure {attempt}")
        if attempt < 3:
            assert outcome.state == "delayed"
            delays.append(outcome.at_ms)
    assert outcome.state == "dead"
    (dead,) = await queues.peek(name, "dead", 10)
    assert dead.last_error == "failure 3" and dead.attempt == 3
    stats = await queues.stats(name)
    assert (stats.ready, stats.delayed, stats.leased, stats.dead) == (0, 0, 0, 1)
    assert await queues.retry_dead(name, [], 10) == 1
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    assert t.attempt == 1 and t.last_error == "failure 3"


async def test_nack_with_an_explicit_delay_and_release_does_not_count_the_attempt(queues, name):
    await queues.enqueue(name, [NewTask("t")])
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    await queues.release(name, t.task_id, t.lease)
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    assert t.attempt == 1
    outcome = await queues.nack(name, t.task_id, t.lease, 0, "again")
    assert outcome.state == "ready"
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    assert t.attempt == 2 and t.last_error == "again"


async def test_an_expired_lease_makes_the_task_ready_for_the_next_attempt(queues, name):
    await queues.enqueue(name, [NewTask("t", max_attempts=2)])
    (first,) = await queues.dequeue([name], 1, 100, 0)
    (second,) = await queues.dequeue([name], 1, 100, 5_000)  # blocks until the lease runs out
    assert second.task_id == first.task_id and second.attempt == 2 and second.lease != first.lease
    with pytest.raises(TaskLeaseNotHeld):
        await queues.ack(name, first.task_id, first.lease)
    await async_wait_until(lambda: _dead_count(queues, name, 1), message="out of attempts after the second expiry")
    (dead,) = await queues.peek(name, "dead", 10)
    assert "lease expired" in dead.last_error


async def _dead_count(queues, name, n):
    return (await queues.stats(name)).dead == n


async def test_extend_keeps_the_task_from_coming_back(queues, name):
    await queues.enqueue(name, [NewTask("t")])
    (t,) = await queues.dequeue([name], 1, 200, 0)
    for _ in range(4):
        await asyncio.sleep(0.1)
        await queues.extend(name, t.task_id, t.lease, 200)
    assert await queues.dequeue([name], 1, 1000, 0) == []
    await queues.ack(name, t.task_id, t.lease)


async def test_a_delayed_task_wakes_a_blocked_dequeue(queues, name):
    loop = asyncio.get_running_loop()
    (r,) = await queues.enqueue(name, [NewTask("t", delay_ms=300)])
    assert await ids(queues, name, "delayed") == [r.task_id]
    started = loop.time()
    (t,) = await queues.dequeue([name], 1, 10_000, 10_000)
    assert t.task_id == r.task_id and loop.time() - started >= 0.25
    assert t.ready_ms - t.enqueued_ms == 300


async def test_an_enqueue_wakes_a_blocked_dequeue_and_only_one_waiter_gets_the_task(queues, name):
    waiters = [asyncio.create_task(queues.dequeue([name], 1, 10_000, 10_000)) for _ in range(3)]
    await asyncio.sleep(0)  # let them block
    (r,) = await queues.enqueue(name, [NewTask("t")])
    done, pending = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    assert [t.task_id for t in done.pop().result()] == [r.task_id]
    await queues.enqueue(name, [NewTask("t"), NewTask("t")])
    rest = await asyncio.gather(*pending)
    assert sorted(len(x) for x in rest) == [1, 1]


async def test_dedupe_key_while_pending_and_within_its_window(queues, name):
    first, again = await queues.enqueue(name, [NewTask("t", dedupe_key="k", dedupe_window_ms=300),
                                               NewTask("t", dedupe_key="k")])
    assert not first.duplicate and again.duplicate and again.task_id == first.task_id
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    (during,) = await queues.enqueue(name, [NewTask("t", dedupe_key="k")])
    assert during.duplicate and during.task_id == first.task_id
    await queues.ack(name, t.task_id, t.lease)
    (window,) = await queues.enqueue(name, [NewTask("t", dedupe_key="k")])
    assert window.duplicate and window.task_id == first.task_id
    await asyncio.sleep(0.35)
    (after,) = await queues.enqueue(name, [NewTask("t", dedupe_key="k")])
    assert not after.duplicate and after.task_id != first.task_id


async def test_cancel_purge_and_stats(queues, name):
    a, b, c, d = [r.task_id for r in await queues.enqueue(
        name, [NewTask("t"), NewTask("t"), NewTask("t", delay_ms=60_000), NewTask("t")])]
    (leased,) = await queues.dequeue([name], 1, 10_000, 0)
    assert leased.task_id == a
    with pytest.raises(TaskLeased):
        await queues.cancel(name, a)
    await queues.cancel(name, b)
    assert (await queues.get_task(name, b)).state == "cancelled"
    with pytest.raises(TaskFinished):
        await queues.cancel(name, b)
    with pytest.raises(TaskNotFound):
        await queues.cancel(name, "no-such-task")
    stats = await queues.stats(name)
    assert (stats.ready, stats.delayed, stats.leased, stats.dead) == (1, 1, 1, 0)
    assert await queues.purge(name, include_dead=False) == 2
    stats = await queues.stats(name)
    assert (stats.ready, stats.delayed, stats.leased) == (0, 0, 1)
    await queues.ack(name, a, leased.lease)


async def test_priority_aging_lets_an_old_low_priority_task_overtake(redis_server, name):
    async with queue_primitive(redis_server.url, priority_aging_ms=100) as queues:
        (old,) = await queues.enqueue(name, [NewTask("low", priority=0)])
        await asyncio.sleep(0.25)  # waited > 2 aging steps
        fresh = await queues.enqueue(name, [NewTask("high", priority=2), NewTask("higher", priority=5)])
        order = await ids(queues, name)
        assert order == [fresh[1].task_id, old.task_id, fresh[0].task_id]


async def test_cancelled_dequeue_leaves_no_waiter_and_loses_no_task(queues, name):
    waiting = asyncio.create_task(queues.dequeue([name], 1, 10_000, 10_000))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await queues.enqueue(name, [NewTask("t")])
    assert len(await queues.dequeue([name], 1, 10_000, 0)) == 1


async def test_a_delay_enqueued_while_a_worker_waits_wakes_it_at_its_time(redis_server, name):
    # The safety ring is 60 s away: only the "due" notification can wake the waiter in time.
    async with queue_primitive(redis_server.url, interval=60) as queues:
        await queues.enqueue(name, [NewTask("late", delay_ms=30_000)])
        waiting = asyncio.create_task(queues.dequeue([name], 1, 10_000, 5_000))
        await asyncio.sleep(0.05)  # let it block, armed for the task due in 30 s
        await queues.enqueue(name, [NewTask("soon", delay_ms=200)])
        (t,) = await waiting
        assert t.type == "soon"
        waiting = asyncio.create_task(queues.dequeue([name], 1, 10_000, 5_000))
        await asyncio.sleep(0.05)
        await queues.nack(name, t.task_id, t.lease, 200, "retry soon")
        (again,) = await waiting
        assert again.task_id == t.task_id and again.attempt == 2


async def test_a_claim_passes_on_when_the_next_delayed_task_falls_due(redis_server, name):
    # Safety ring 60 s away: only the first claim's reply can tell the other waiter
    # when the second task falls due.
    async with queue_primitive(redis_server.url, interval=60) as queues:
        added = await queues.enqueue(name, [NewTask("t", delay_ms=150), NewTask("t", delay_ms=400)])
        waiters = [asyncio.create_task(queues.dequeue([name], 1, 10_000, 5_000)) for _ in range(2)]
        first, second = await asyncio.gather(*waiters)
        assert sorted(t.task_id for t in first + second) == sorted(r.task_id for r in added)


async def test_rechecks_due_at_once_can_be_armed_twice(queues, name):
    # uvloop hands back a plain Handle (no .when()) for a timer that is already due.
    waiting = asyncio.create_task(queues.dequeue([name], 1, 10_000, 5_000))
    bell = await async_wait_until(lambda: _bell(queues, name), message="the dequeue to wait")
    bell.recheck_in(0)
    bell.recheck_in(0)
    await queues.enqueue(name, [NewTask("t")])
    assert len(await waiting) == 1


async def _bell(queues, name):
    return queues._doorbells.listeners.get(queues._keys.queue(name).channel)

"""Task lookup, results, progress, retention and WaitTask, on the queue primitive
against real Redis (no gRPC)."""

from __future__ import annotations

import asyncio
import json

import pytest

from concord_server.errors import TaskFinished, TaskLeaseNotHeld, TaskNotFound
from concord_server.primitives.queue import NewTask, Policy, Retention, RetryPolicy, Settling
from support import async_wait_until, queue_primitive


@pytest.fixture
async def queues(redis_server):
    async with queue_primitive(redis_server.url, retry_backoff_ms=50) as queues:
        yield queues


async def put(queues, name, **kw) -> str:
    (r,) = await queues.enqueue(name, [NewTask("t", **kw)])
    return r.task_id


async def lease(queues, name, lease_ms=10_000):
    (t,) = await queues.dequeue([name], 1, lease_ms, 0)
    return t


async def test_get_task_follows_every_state_with_its_timestamps(queues, name):
    task_id = await put(queues, name, payload=b"p", priority=3)
    t = await queues.get_task(name, task_id)
    assert (t.state, t.attempt, t.priority, t.payload, t.leased_ms, t.finished_ms) == ("ready", 0, 3, b"p", None, None)
    await queues.pause(name, True)
    assert (await queues.get_task(name, task_id)).state == "waiting"
    await queues.pause(name, False)
    leased = await lease(queues, name)
    t = await queues.get_task(name, task_id)
    assert (t.state, t.attempt, t.lease_expires_ms is not None) == ("leased", 1, True)
    assert t.leased_ms >= t.enqueued_ms
    await queues.nack(name, task_id, leased.lease, 60_000, "boom")
    t = await queues.get_task(name, task_id)
    assert (t.state, t.last_error, t.ready_ms - t.leased_ms >= 60_000) == ("delayed", "boom", True)
    with pytest.raises(TaskNotFound):
        await queues.get_task(name, "no-such-task")


async def test_a_result_is_returned_exactly_as_acked(queues, name):
    task_id = await put(queues, name)
    t = await lease(queues, name)
    result = bytes(range(256)) * 4
    await queues.ack(name, task_id, t.lease, result, "application/octet-stream")
    got = await queues.get_task(name, task_id)
    assert (got.state, got.result, got.result_type, got.lease) == ("succeeded", result, "application/octet-stream", "")
    assert got.finished_ms >= got.leased_ms
    with pytest.raises(TaskFinished):
        await queues.cancel(name, task_id)


async def test_progress_is_kept_with_the_lease_and_after_the_end(queues, name):
    task_id = await put(queues, name)
    t = await lease(queues, name, lease_ms=5_000)
    expires = await queues.progress(name, task_id, t.lease, 0.25, json.dumps({"rows": 10}), None)
    assert expires == t.lease_expires_ms  # no lease_ms: the lease is unchanged
    longer = await queues.progress(name, task_id, t.lease, None, '{"rows": 20}', 60_000)
    assert longer > expires
    got = await queues.get_task(name, task_id)
    assert (got.progress.value, got.progress.json, got.lease_expires_ms) == (None, '{"rows": 20}', longer)
    await queues.ack(name, task_id, t.lease)
    assert (await queues.get_task(name, task_id)).progress.json == '{"rows": 20}'
    with pytest.raises(TaskLeaseNotHeld):
        await queues.progress(name, task_id, t.lease, 1.0, "", None)


async def test_dead_tasks_say_which_rule_ended_them(queues, name):
    by_nack = await put(queues, name, max_attempts=1)
    t = await lease(queues, name)
    await queues.nack(name, by_nack, t.lease, None, "bad input")
    by_lease = await put(queues, name, max_attempts=1)
    await lease(queues, name, lease_ms=20)
    await async_wait_until(lambda: _state(queues, name, by_lease, "dead"), message="the expired lease to kill it")
    a, b = await queues.get_task(name, by_nack), await queues.get_task(name, by_lease)
    assert (a.state, a.dead_reason, a.last_error) == ("dead", "attempts", "bad input")
    assert (b.state, b.dead_reason) == ("dead", "lease")


async def _waiting(queues, n: int) -> bool:
    return queues._outcomes.waiting() == n


async def _state(queues, name, task_id, state) -> bool:
    return (await queues.get_task(name, task_id)).state == state


async def test_wait_task_wakes_on_success_with_the_result(queues, name):
    task_id = await put(queues, name)
    waiter = asyncio.create_task(queues.wait_task(name, task_id, 30_000))
    t = await lease(queues, name)
    await async_wait_until(lambda: _waiting(queues, 1), message="the waiter to subscribe")
    assert not waiter.done()
    await queues.ack(name, task_id, t.lease, b"42", "text/plain")
    finished, got = await asyncio.wait_for(waiter, 10)
    assert (finished, got.state, got.result) == (True, "succeeded", b"42")


async def test_wait_task_wakes_on_death_by_an_expired_lease(queues, name):
    task_id = await put(queues, name, max_attempts=1)
    await lease(queues, name, lease_ms=300)
    # Nothing else touches the queue: the waiter itself must look when the lease ends.
    finished, got = await asyncio.wait_for(queues.wait_task(name, task_id, 30_000), 10)
    assert (finished, got.state, got.dead_reason) == (True, "dead", "lease")


async def test_wait_task_wakes_on_cancel_and_on_purge(queues, name):
    cancelled, purged = await put(queues, name), await put(queues, name, delay_ms=60_000)
    waiters = [asyncio.create_task(queues.wait_task(name, i, 30_000)) for i in (cancelled, purged)]
    await async_wait_until(lambda: _waiting(queues, 2), message="both waiters to subscribe")
    await queues.cancel(name, cancelled)
    finished, got = await asyncio.wait_for(waiters[0], 10)
    assert (finished, got.state) == (True, "cancelled")
    await queues.purge(name, include_dead=False)
    with pytest.raises(TaskNotFound):  # purge deletes: the waiter looks again and finds nothing
        await asyncio.wait_for(waiters[1], 10)


async def test_wait_task_times_out_and_reports_where_the_task_is(queues, name):
    task_id = await put(queues, name)
    finished, got = await queues.wait_task(name, task_id, 100)
    assert (finished, got.state) == (False, "ready")
    assert queues._outcomes.waiting() == 0
    finished, got = await queues.wait_task(name, task_id, 0)
    assert (finished, got.state) == (False, "ready")


async def test_many_waiters_on_one_queue_wake_only_for_their_own_task(queues, name):
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t") for _ in range(200)])]
    waiters = {i: asyncio.create_task(queues.wait_task(name, i, 30_000)) for i in ids}
    await async_wait_until(lambda: _waiting(queues, 200), message="every waiter to subscribe")
    tasks = await queues.dequeue([name], 10, 10_000, 0)
    for t in tasks:
        await queues.ack(name, t.task_id, t.lease, t.task_id.encode())
    done = [await asyncio.wait_for(waiters.pop(t.task_id), 10) for t in tasks]
    assert [(f, g.result) for f, g in done] == [(True, t.task_id.encode()) for t in tasks]
    assert not any(w.done() for w in waiters.values())
    for w in waiters.values():
        w.cancel()
    await asyncio.gather(*waiters.values(), return_exceptions=True)
    await async_wait_until(lambda: _waiting(queues, 0), message="the cancelled waiters to leave")


async def test_retention_keeps_at_most_the_count_newest_first_out(queues, name):
    policy = await queues.set_policy(name, Policy(succeeded=Retention(max_count=3)))
    assert (policy.succeeded, policy.dead) == (Retention(3, 0), Retention(None, 0))
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t") for _ in range(5)])]
    for t in await queues.dequeue([name], 5, 10_000, 0):
        await queues.ack(name, t.task_id, t.lease)
    kept = [i for i in ids if await _exists(queues, name, i)]
    assert kept == ids[2:]
    assert (await queues.stats(name)).finished == 3
    # Lowering the count applies at once.
    await queues.set_policy(name, Policy(succeeded=Retention(max_count=1)))
    assert [i for i in ids if await _exists(queues, name, i)] == ids[4:]


async def test_retention_holds_within_one_batch_of_settles(queues, name):
    """A script counts a finished set once and then keeps count itself: a batch that
    overflows the limit several times over, while expired leases die in the same
    script's sweep, still keeps exactly the newest of each kind."""
    await queues.set_policy(name, Policy(succeeded=Retention(max_count=3), dead=Retention(max_count=2)))
    old = [r.task_id for r in await queues.enqueue(name, [NewTask("t") for _ in range(2)])]
    for t in await queues.dequeue([name], 2, 10_000, 0):
        await queues.ack(name, t.task_id, t.lease)
    doomed = [r.task_id for r in await queues.enqueue(name, [NewTask("t", max_attempts=1) for _ in range(3)])]
    await queues.dequeue([name], 3, 1, 0)  # leases of 1 ms, on their last attempt: the next sweep kills them
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t", max_attempts=1) for _ in range(9)])]
    leased = await queues.dequeue([name], 9, 10_000, 0)
    assert {t.task_id for t in leased} == set(ids)  # the sweep of this dequeue killed the doomed ones
    dead_now = [t.task_id for t in await queues.peek(name, "dead", 10)]
    assert dead_now == doomed[1:]
    settles = [Settling(t.task_id, t.lease, "nack" if i in (1, 4) else "ack", text="boom" if i in (1, 4) else "")
               for i, t in enumerate(leased)]
    outcomes = await queues.settle_many(name, settles)
    assert [o.state for o in outcomes] == ["dead" if i in (1, 4) else "succeeded" for i in range(9)]
    acked = [s.task_id for s in settles if s.action == "ack"]
    assert [i for i in old + acked if await _exists(queues, name, i)] == acked[-3:]
    assert [t.task_id for t in await queues.peek(name, "dead", 10)] == [leased[1].task_id, leased[4].task_id]
    assert not any([await _exists(queues, name, i) for i in doomed])
    stats = await queues.stats(name)
    assert (stats.finished, stats.dead) == (3, 2)


async def _exists(queues, name, task_id) -> bool:
    try:
        await queues.get_task(name, task_id)
        return True
    except TaskNotFound:
        return False


async def test_retention_zero_keeps_nothing_and_age_makes_tasks_vanish(queues, name, redis_async):
    await queues.set_policy(name, Policy(succeeded=Retention(max_count=0)))
    gone = await put(queues, name)
    t = await lease(queues, name)
    await queues.ack(name, gone, t.lease, b"dropped")
    assert not await _exists(queues, name, gone)
    await queues.set_policy(name, Policy(succeeded=Retention(max_age_ms=200), dead=Retention(max_age_ms=200)))
    aged = await put(queues, name)
    dead = await put(queues, name, max_attempts=1)
    for t in await queues.dequeue([name], 2, 10_000, 0):
        if t.task_id == aged:
            await queues.ack(name, aged, t.lease, b"x")
        else:
            await queues.nack(name, dead, t.lease, None, "no")
    assert await _exists(queues, name, aged) and await _exists(queues, name, dead)
    # The hashes expire by themselves, with no script run: Redis's own key expiry.
    keys = queues._keys.queue(name)
    await async_wait_until(
        lambda: _none_exist(redis_async, [keys.task_prefix + aged, keys.task_prefix + dead]),
        message="the retained tasks to expire")
    stats = await queues.stats(name)  # the next script drops their ids
    assert (stats.finished, stats.dead) == (0, 0)


async def _none_exist(redis, keys) -> bool:
    return await redis.exists(*keys) == 0


async def test_dead_retention_by_count_and_the_defaults(queues, name):
    policy = await queues.get_policy(name)
    assert (policy.succeeded, policy.dead) == (Retention(1000, 86_400_000), Retention(None, 0))
    assert policy.retry == RetryPolicy(3, "exp", 50, 3_600_000, False)  # the server's backoff: 50 ms here
    await queues.set_policy(name, Policy(dead=Retention(max_count=1)))
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t", max_attempts=1) for _ in range(3)])]
    for t in await queues.dequeue([name], 3, 10_000, 0):
        await queues.nack(name, t.task_id, t.lease, None, "x")
    assert [t.task_id for t in await queues.peek(name, "dead", 10)] == ids[2:]
    policy = await queues.get_policy(name)
    assert (policy.succeeded, policy.dead) == (Retention(1000, 86_400_000), Retention(1, 0))
    # A retried dead task is pending again: its retention no longer applies.
    assert await queues.retry_dead(name, ids[2:], 10) == 1
    got = await queues.get_task(name, ids[2])
    assert (got.state, got.dead_reason, got.finished_ms) == ("ready", "", None)


async def test_a_queue_retry_policy_sets_attempts_and_a_fixed_backoff(queues, name):
    await queues.set_policy(name, Policy(retry=RetryPolicy(max_attempts=2, backoff="fixed", initial_ms=300_000)))
    task_id = await put(queues, name)
    assert (await queues.get_task(name, task_id)).max_attempts == 2
    t = await lease(queues, name)
    first = await queues.nack(name, task_id, t.lease, None, "x")
    leased_ms = (await queues.get_task(name, task_id)).leased_ms
    assert (first.state, first.at_ms - leased_ms >= 300_000) == ("delayed", True)
    # Enqueued before the change: keeps its attempts; the backoff follows the policy now.
    await queues.set_policy(name, Policy(retry=RetryPolicy(max_attempts=5)))
    assert (await queues.get_task(name, task_id)).max_attempts == 2
    assert (await queues.get_policy(name)).retry == RetryPolicy(5, "exp", 50, 3_600_000, False)


async def test_a_task_retry_policy_overrides_the_queue_and_jitter_stays_under_the_delay(queues, name):
    await queues.set_policy(name, Policy(retry=RetryPolicy(backoff="fixed", initial_ms=600_000)))
    own = RetryPolicy(max_attempts=10, backoff="exp", initial_ms=100_000, cap_ms=150_000, jitter=True)
    (r,) = await queues.enqueue(name, [NewTask("t", max_attempts=10, retry=own)])
    assert (await queues.get_task(name, r.task_id)).retry == RetryPolicy(None, "exp", 100_000, 150_000, True)
    delays = []
    for _ in range(1, 4):
        t = await _lease_now(queues, name, r.task_id)
        out = await queues.nack(name, r.task_id, t.lease, None, "x")
        delays.append(out.at_ms - (await queues.get_task(name, r.task_id)).leased_ms)
        assert out.state == "delayed"
        await _make_due(queues, name, r.task_id)
    caps = [100_000, 150_000, 150_000]  # exponential, capped; jitter draws from [0, cap)
    assert all(0 <= d <= cap for d, cap in zip(delays, caps)), delays
    assert len(set(delays)) > 1  # drawn, not fixed


async def _lease_now(queues, name, task_id):
    (t,) = await queues.dequeue([name], 1, 10_000, 0)
    assert t.task_id == task_id
    return t


async def _make_due(queues, name, task_id):
    """Moves a delayed task's run-at to now (what the clock would do, without the wait)."""
    keys = queues._keys.queue(name)
    await queues._redis.execute_command("ZADD", keys.delayed, 0, task_id)


async def test_nack_not_retryable_kills_at_once_with_its_reason(queues, name):
    task_id = await put(queues, name, max_attempts=5)
    t = await lease(queues, name)
    out = await queues.nack(name, task_id, t.lease, None, "bad input", retryable=False)
    got = await queues.get_task(name, task_id)
    assert (out.state, got.state, got.dead_reason, got.attempt, got.last_error) == (
        "dead", "dead", "not_retryable", 1, "bad input")

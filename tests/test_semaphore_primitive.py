"""The semaphore primitive on its own against real Redis, no gRPC."""

from __future__ import annotations

import asyncio

import pytest

from concord_server.errors import NotFound, PermitNotHeld, PermitsExceedLimit, SemaphoreLimitMismatch
from support import async_wait_until, semaphore_primitive


@pytest.fixture
async def sems(redis_server):
    async with semaphore_primitive(redis_server.url) as sems:
        yield sems


async def queued(sems, name: str, n: int) -> bool:
    return (await sems.describe(name)).waiters == n


async def test_at_most_limit_permits_and_release_frees(sems, name):
    a = await sems.acquire(name, 3, 2, 10_000, 0, "a")
    b = await sems.acquire(name, 3, 1, 10_000, 0, "b")
    assert a and b
    assert await sems.acquire(name, 3, 1, 10_000, 0, "c") is None
    state = await sems.describe(name)
    assert state.limit == 3 and state.held == 3
    assert sorted((h.owner, h.permits) for h in state.holders) == [("a", 2), ("b", 1)]
    await sems.release(name, a.permit_id)
    assert await sems.acquire(name, 3, 2, 10_000, 0, "c") is not None


async def test_release_or_refresh_of_a_permit_not_held(sems, name):
    p = await sems.acquire(name, 1, 1, 10_000, 0, "a")
    assert await sems.refresh(name, p.permit_id, 20_000) > p.expires_at_ms
    await sems.release(name, p.permit_id)
    with pytest.raises(PermitNotHeld):
        await sems.release(name, p.permit_id)
    with pytest.raises(PermitNotHeld):
        await sems.refresh(name, p.permit_id, 1000)


async def test_a_large_request_is_served_in_turn_and_whole(sems, name):
    h1 = await sems.acquire(name, 4, 2, 10_000, 0, "h1")
    h2 = await sems.acquire(name, 4, 2, 10_000, 0, "h2")
    big = asyncio.create_task(sems.acquire(name, 4, 3, 10_000, 20_000, "big"))
    await async_wait_until(lambda: queued(sems, name, 1), message="big queued")
    small = asyncio.create_task(sems.acquire(name, 4, 1, 10_000, 20_000, "small"))
    await async_wait_until(lambda: queued(sems, name, 2), message="small queued")
    await sems.release(name, h1.permit_id)
    # Two permits are free: enough for 'small', but 'big' came first and nobody overtakes.
    assert (await sems.describe(name)).held == 2 and not big.done() and not small.done()
    await sems.release(name, h2.permit_id)
    granted_big, granted_small = await asyncio.gather(big, small)
    assert granted_big.permits == 3 and granted_small.permits == 1
    assert (await sems.describe(name)).held == 4


async def test_expired_holders_free_their_permits_and_ttls_differ(sems, name):
    await sems.acquire(name, 2, 1, 200, 0, "short")
    await sems.acquire(name, 2, 1, 60_000, 0, "long")
    state = await sems.describe(name)
    assert sorted(h.ttl_remaining_ms > 1000 for h in state.holders) == [False, True]
    waiter = await sems.acquire(name, 2, 1, 10_000, 10_000, "next")
    assert waiter is not None
    assert sorted(h.owner for h in (await sems.describe(name)).holders) == ["long", "next"]


async def test_the_first_acquire_stores_the_limit_and_only_set_limit_changes_it(sems, name):
    assert (await sems.describe(name)).limit == 0
    p = await sems.acquire(name, 3, 1, 10_000, 0, "first")
    assert (await sems.describe(name)).limit == 3
    assert await sems.acquire(name, 3, 1, 10_000, 0, "same") is not None
    assert await sems.set_limit(name, 5) == 3
    assert (await sems.describe(name)).limit == 5
    with pytest.raises(SemaphoreLimitMismatch):
        await sems.acquire(name, 3, 1, 10_000, 0, "stale")  # the limit it first had is no longer it
    await sems.release(name, p.permit_id)


async def test_an_acquire_with_another_limit_is_refused_and_changes_nothing(sems, redis_async, name):
    k = sems._keys.semaphore(name)
    holder = await sems.acquire(name, 2, 1, 10_000, 0, "holder")
    waiter = asyncio.create_task(sems.acquire(name, 2, 2, 10_000, 20_000, "waiter"))
    await async_wait_until(lambda: queued(sems, name, 1), message="waiter queued")
    before = await sems.describe(name)
    kept = [key for key in k.keys if key != k.procs]  # (procs: the waiter's heartbeat, whenever it polls)
    dump = {key: await redis_async.dump(key) for key in kept}
    for limit, wait_ms in ((5, 0), (1, 0), (5, 5_000)):
        with pytest.raises(SemaphoreLimitMismatch) as err:
            await sems.acquire(name, limit, 1, 10_000, wait_ms, "misconfigured")
        assert err.value.metadata == {"name": name, "limit": "2", "requested": str(limit)}
    after = await sems.describe(name)
    assert (after.limit, after.held, after.waiters) == (before.limit, before.held, before.waiters) == (2, 1, 1)
    assert [h.owner for h in after.holders] == ["holder"]
    assert {key: await redis_async.dump(key) for key in kept} == dump  # not a byte changed
    await sems.release(name, holder.permit_id)
    assert (await asyncio.wait_for(waiter, 10)).permits == 2


async def test_limit_0_takes_the_stored_limit(sems, name):
    with pytest.raises(NotFound):
        await sems.acquire(name, 0, 1, 10_000, 0, "nobody set it")
    with pytest.raises(NotFound):
        await sems.acquire(name, 0, 1, 10_000, 1_000, "nor waits")
    k = sems._keys.semaphore(name)
    assert await sems._redis.execute_command("EXISTS", *k.keys) == 0  # the refusals wrote nothing
    assert await sems.set_limit(name, 2) == 0
    a = await sems.acquire(name, 0, 2, 10_000, 0, "a")
    assert a is not None and a.permits == 2
    assert await sems.acquire(name, 0, 1, 10_000, 0, "b") is None  # 2 of 2 held
    with pytest.raises(PermitsExceedLimit) as err:
        await sems.acquire(name, 0, 3, 10_000, 0, "greedy")
    assert err.value.metadata == {"name": name, "limit": "2", "permits": "3"}
    assert (await sems.describe(name)).limit == 2


async def test_a_lowered_limit_evicts_nobody(sems, name):
    permits = [await sems.acquire(name, 3, 1, 10_000, 0, f"h{i}") for i in range(3)]
    assert await sems.set_limit(name, 1) == 3
    state = await sems.describe(name)
    assert state.limit == 1 and state.held == 3 and len(state.holders) == 3
    assert await sems.acquire(name, 1, 1, 10_000, 0, "late") is None
    await sems.release(name, permits[0].permit_id)
    await sems.release(name, permits[1].permit_id)
    assert await sems.acquire(name, 1, 1, 10_000, 0, "late") is None  # 1 held = the new limit
    await sems.release(name, permits[2].permit_id)
    assert await sems.acquire(name, 1, 1, 10_000, 0, "late") is not None


async def test_a_lowered_limit_holds_queued_waiters_until_the_held_permits_fit(sems, name):
    holders = [await sems.acquire(name, 4, 1, 10_000, 0, f"h{i}") for i in range(4)]
    waiter = asyncio.create_task(sems.acquire(name, 4, 1, 10_000, 20_000, "waiter"))
    await async_wait_until(lambda: queued(sems, name, 1), message="waiter queued")
    assert await sems.set_limit(name, 2) == 4
    await sems.release(name, holders[0].permit_id)
    await sems.release(name, holders[1].permit_id)
    assert not waiter.done() and (await sems.describe(name)).held == 2  # 2 held = the new limit
    await sems.release(name, holders[2].permit_id)
    assert (await asyncio.wait_for(waiter, 10)).permits == 1
    assert (await sems.describe(name)).held == 2


async def test_a_raised_limit_admits_waiters_at_once_in_order(redis_server, name):
    # No safety poll in this test (an hour apart): only set_limit's own grants and
    # their notifications can admit the waiters.
    async with semaphore_primitive(redis_server.url, interval=3600) as sems:
        await sems.acquire(name, 1, 1, 60_000, 0, "holder")
        first = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 20_000, "first"))
        await async_wait_until(lambda: queued(sems, name, 1), message="first queued")
        second = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 20_000, "second"))
        await async_wait_until(lambda: queued(sems, name, 2), message="second queued")
        third = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 20_000, "third"))
        await async_wait_until(lambda: queued(sems, name, 3), message="all three queued")
        assert await sems.set_limit(name, 3) == 1
        # The set_limit script itself granted the two that fit, in order...
        state = await sems.describe(name)
        assert state.held == 3 and state.waiters == 1
        assert sorted(h.owner for h in state.holders) == ["first", "holder", "second"]
        # ...and published their grants, which wake them.
        granted = await asyncio.wait_for(asyncio.gather(first, second), 10)
        assert all(granted) and not third.done()
        third.cancel()


async def test_set_limit_keeps_its_limit_for_good_and_an_acquired_one_expires_with_the_keys(sems, redis_async, name):
    k = sems._keys.semaphore(name)
    p = await sems.acquire(name, 2, 1, 10_000, 0, "a")
    assert await redis_async.hget(k.meta, "by") == "acquire"
    holders_ms, meta_ms = await _expiries(redis_async, k.holders, k.meta)
    assert 0 < holders_ms <= meta_ms
    assert await sems.set_limit(name, 4) == 2
    assert await redis_async.hget(k.meta, "by") == "set" and await redis_async.pttl(k.meta) == -1
    await sems.refresh(name, p.permit_id, 20_000)  # keep_for leaves a kept limit alone
    await sems.release(name, p.permit_id)
    short = await sems.acquire(name, 4, 1, 50, 0, "short")
    await async_wait_until(lambda: _gone(redis_async, k.holders), message="the holders key to expire")
    assert short is not None and await redis_async.pttl(k.meta) == -1
    assert (await sems.describe(name)).limit == 4
    with pytest.raises(SemaphoreLimitMismatch):
        await sems.acquire(name, 2, 1, 10_000, 0, "b")
    assert await sems.acquire(name, 0, 4, 10_000, 0, "c") is not None


async def test_an_acquired_limit_outlives_every_holder_and_waiter(sems, redis_async, name):
    k = sems._keys.semaphore(name)
    await sems.acquire(name, 1, 1, 300, 0, "short")
    assert await sems.acquire(name, 1, 1, 10_000, 2_000, "waits past the holder") is not None
    meta_ms, *others = await _expiries(redis_async, k.meta, *(key for key in k.keys if key != k.meta))
    assert meta_ms >= max(others) > 0
    with pytest.raises(SemaphoreLimitMismatch):  # the first one's limit is still stored
        await sems.acquire(name, 2, 1, 10_000, 0, "other")


async def test_limit_from_acquire_restores_the_latest_acquire_wins(sems, redis_async, name):
    sems.limit_from_acquire = True  # --semaphore-limit-from-acquire
    holder = await sems.acquire(name, 1, 1, 10_000, 0, "holder")
    waiter = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 20_000, "waiter"))
    await async_wait_until(lambda: queued(sems, name, 1), message="waiter queued")
    raiser = await sems.acquire(name, 3, 1, 10_000, 0, "raiser")
    assert raiser is not None and await asyncio.wait_for(waiter, 10) is not None
    assert (await sems.describe(name)).limit == 3 and (await sems.describe(name)).held == 3
    assert await sems.acquire(name, 1, 1, 10_000, 0, "lowerer") is None
    assert (await sems.describe(name)).limit == 1
    # A limit SetLimit kept for good is an acquired one again once an Acquire changes it.
    k = sems._keys.semaphore(name)
    assert await sems.set_limit(name, 5) == 1 and await redis_async.pttl(k.meta) == -1
    assert await sems.acquire(name, 5, 1, 10_000, 0, "same") is not None
    assert await redis_async.pttl(k.meta) == -1
    assert await sems.acquire(name, 6, 1, 10_000, 0, "changer") is not None
    assert (await sems.describe(name)).limit == 6
    assert await redis_async.hget(k.meta, "by") == "acquire" and await redis_async.pttl(k.meta) > 0
    await sems.release(name, holder.permit_id)


async def _a_queued_request_above_a_lowered_limit_fails(sems, name) -> None:
    """3 permits queued under limit 4; SetLimit lowers the limit to 2; the holder
    releases: the queued request fails rather than wait for ever."""
    holder = await sems.acquire(name, 4, 4, 10_000, 0, "holder")
    big = asyncio.create_task(sems.acquire(name, 4, 3, 10_000, 20_000, "big"))
    await async_wait_until(lambda: queued(sems, name, 1), message="big queued")
    assert await sems.set_limit(name, 2) == 4
    await sems.release(name, holder.permit_id)
    with pytest.raises(PermitsExceedLimit):
        await asyncio.wait_for(big, 10)


async def test_a_queued_request_above_a_lowered_limit_fails(sems, name):
    await _a_queued_request_above_a_lowered_limit_fails(sems, name)
    assert (await sems.describe(name)).waiters == 0


async def test_a_failure_whose_notification_is_lost_is_reported_by_the_poll(sems, redis_async, name, monkeypatch):
    from concord_server.wakeups.waiters import WaitGroup

    # Pub/sub may drop the "-1", or publish it before the waiter's process subscribed:
    # here every notification is lost, so only the poll can tell the waiter it failed.
    # Taking it for a waiter dropped as dead would queue it again with its own limit,
    # which would then be in force and grant it.
    monkeypatch.setattr(WaitGroup, "on_message", lambda self, data: None)
    await _a_queued_request_above_a_lowered_limit_fails(sems, name)
    state = await sems.describe(name)
    assert state.limit == 2 and state.held == 0 and state.waiters == 0
    k = sems._keys.semaphore(name)  # the failure's record goes once the caller has heard
    await async_wait_until(lambda: _gone(redis_async, k.waiters), message="the failure record to go")


async def test_the_poll_and_a_withdraw_tell_a_failed_waiter_from_a_dropped_one(sems, name):
    from concord_server.primitives.semaphore import _ACQUIRE, _WITHDRAW

    k = sems._keys.semaphore(name)
    holder = await sems.acquire(name, 4, 4, 10_000, 0, "holder")
    # Queued by the script alone: no process listens for its notification.
    for waiter, permits in (("failed", 3), ("gone", 1)):
        status, *_ = await _ACQUIRE(sems._redis, k.keys, [k.channel, waiter, permits, 4, 10_000, waiter, 60_000,
                                                          "test-proc", 60_000, 0])
        assert status == 2
    await sems._redis.execute_command("ZREM", k.queue, "gone")  # passed over as dead
    assert await sems.set_limit(name, 2) == 4
    result = await sems._poll(k, ["failed", "gone"])
    assert list(result.dropped) == ["gone"]
    assert result.granted == {holder.permit_id: str(holder.expires_at_ms), "failed": "-1"}
    assert (await sems._poll(k, ["failed"])).granted["failed"] == "-1"  # until its caller withdraws
    assert await _WITHDRAW(sems._redis, k.keys, [k.channel, "failed", 0]) == [-2]
    assert await _WITHDRAW(sems._redis, k.keys, [k.channel, "failed", 0]) == [-1]
    assert list((await sems._poll(k, ["failed"])).dropped) == ["failed"]


async def test_cancelled_waiter_leaves_the_queue_and_takes_nothing(sems, name):
    holder = await sems.acquire(name, 1, 1, 10_000, 0, "holder")
    task = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 30_000, "quitter"))
    await async_wait_until(lambda: queued(sems, name, 1), message="waiter queued")
    task.cancel()
    await async_wait_until(lambda: queued(sems, name, 0), message="cancelled waiter gone")
    await sems.release(name, holder.permit_id)
    assert (await sems.describe(name)).held == 0


async def test_keep_alive_renews_until_the_permit_is_gone(sems, name):
    p = await sems.acquire(name, 1, 1, 300, 0, "a")
    renewals = []
    async for renewed in sems.keep_alive(name, p, 300):
        renewals.append(renewed)
        if len(renewals) == 2:
            await sems.release(name, p.permit_id)
    assert len(renewals) == 2 and renewals[-1].expires_at_ms > p.expires_at_ms


async def test_nothing_is_left_in_redis_once_idle(sems, redis_async, name):
    p = await sems.acquire(name, 1, 1, 10_000, 0, "a")
    assert await sems.acquire(name, 1, 1, 10_000, 100, "w") is None
    await sems.release(name, p.permit_id)
    k = sems._keys.semaphore(name)
    assert await redis_async.exists(k.holders, k.permits, k.queue, k.waiters) == 0
    for key in k.keys:  # whatever remains (meta, procs) expires by itself
        assert await redis_async.pttl(key) != -1


async def test_waiters_of_a_dead_server_process_are_skipped(redis_server, name):
    from concord_server.primitives.semaphore import _ACQUIRE

    async with semaphore_primitive(redis_server.url) as sems:
        holder = await sems.acquire(name, 1, 1, 10_000, 0, "holder")
        k = sems._keys.semaphore(name)
        # A waiter queued by a server process that then died: it never polls again.
        status, *_ = await _ACQUIRE(sems._redis, k.keys, [k.channel, "ghost", 1, 1, 60_000, "ghost", 60_000,
                                                          "dead-proc", 300, 0])
        assert status == 2
        live = asyncio.create_task(sems.acquire(name, 1, 1, 10_000, 30_000, "alive"))
        await async_wait_until(lambda: _zcard_is(sems, k.queue, 2), message="both queued")
        await async_wait_until(lambda: queued(sems, name, 1), message="the ghost's liveness to lapse")
        await sems.release(name, holder.permit_id)
        assert await asyncio.wait_for(live, 10) is not None
        assert [h.owner for h in (await sems.describe(name)).holders] == ["alive"]


async def _zcard_is(sems, key, n) -> bool:
    return await sems._redis.execute_command("ZCARD", key) == n


async def test_permits_of_holders_that_expired_with_their_key_come_back(sems, redis_async, name):
    k = sems._keys.semaphore(name)
    holder = await sems.acquire(name, 1, 1, 10_000, 0, "holder")
    # A waiter that gives up still leaves the semaphore's keys kept alive for a while...
    assert await sems.acquire(name, 1, 1, 10_000, 300, "impatient") is None
    await sems.release(name, holder.permit_id)
    # ...so this short holder's key expires by itself, long before the counters do.
    await sems.acquire(name, 1, 1, 100, 0, "short")
    await async_wait_until(lambda: _gone(redis_async, k.holders), message="the holders key to expire")
    assert (await sems.describe(name)).held == 0
    assert await sems.acquire(name, 1, 1, 10_000, 0, "next") is not None


async def _expiries(redis_async, *keys) -> list[int]:
    """When the keys expire, in Unix ms. Absolute times compare whatever the instant each
    is read at: PTTLs read one after another differ by the milliseconds between the reads
    (Redis 7.0 moves its clock even inside a script)."""
    return [await redis_async.pexpiretime(k) for k in keys]


async def _gone(redis_async, key) -> bool:
    return await redis_async.exists(key) == 0

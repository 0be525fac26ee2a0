"""The lock primitive on its own: scripts, queue and wake-ups against real Redis, no gRPC."""

from __future__ import annotations

import asyncio

import pytest

from concord_server.errors import LockNotHeld
from concord_server.primitives.lock import _ACQUIRE, _RELEASE

from support import async_wait_until, lock_primitive


@pytest.fixture
async def locks(redis_server):
    async with lock_primitive(redis_server.url) as locks:
        yield locks


async def waiters(locks, name: str) -> int:
    return (await locks.describe(name)).waiters


async def test_acquire_release_describe(locks, name):
    grant = await locks.acquire(name, 10_000, 0, "alice")
    assert grant is not None and len(grant.lease) == 32
    state = await locks.describe(name)
    assert state.held and state.owner == "alice" and state.fencing_token == grant.fencing_token
    assert 0 < state.ttl_remaining_ms <= 10_000
    assert await locks.acquire(name, 10_000, 0, "bob") is None
    await locks.release(name, grant.lease)
    assert not (await locks.describe(name)).held
    again = await locks.acquire(name, 10_000, 0, "bob")
    assert again.fencing_token > grant.fencing_token


async def test_only_the_holder_releases_or_refreshes(locks, name):
    grant = await locks.acquire(name, 10_000, 0, "alice")
    with pytest.raises(LockNotHeld):
        await locks.release(name, "f" * 32)
    with pytest.raises(LockNotHeld):
        await locks.refresh(name, "f" * 32, 5000)
    refreshed = await locks.refresh(name, grant.lease, 20_000)
    assert refreshed.expires_at_ms > grant.expires_at_ms
    await locks.release(name, grant.lease)
    with pytest.raises(LockNotHeld):
        await locks.release(name, grant.lease)


async def test_waiters_are_served_in_fifo_order(locks, name):
    holder = await locks.acquire(name, 10_000, 0, "holder")
    order: list[int] = []

    async def waiter(i: int) -> None:
        grant = await locks.acquire(name, 10_000, 20_000, f"w{i}")
        order.append(i)
        await locks.release(name, grant.lease)

    tasks = []
    for i in range(6):
        tasks.append(asyncio.create_task(waiter(i)))
        await async_wait_until(lambda: _eq(waiters(locks, name), i + 1), message=f"waiter {i} queued")
    await locks.release(name, holder.lease)
    await asyncio.gather(*tasks)
    assert order == list(range(6))


async def _eq(coro, value) -> bool:
    return await coro == value


async def test_wait_timeout_returns_none_and_leaves_the_queue(locks, name):
    await locks.acquire(name, 10_000, 0, "holder")
    assert await locks.acquire(name, 10_000, 200, "late") is None
    assert await waiters(locks, name) == 0


async def test_expired_holder_hands_over_without_client_action(locks, name):
    first = await locks.acquire(name, 200, 0, "crashed")
    second = await locks.acquire(name, 10_000, 10_000, "next")
    assert second is not None and second.fencing_token > first.fencing_token


async def test_cancelled_waiter_leaves_the_queue_at_once(locks, name):
    holder = await locks.acquire(name, 10_000, 0, "holder")
    task = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "quitter"))
    await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="waiter queued")
    task.cancel()
    await async_wait_until(lambda: _eq(waiters(locks, name), 0), message="cancelled waiter gone")
    await locks.release(name, holder.lease)
    assert not (await locks.describe(name)).held  # nobody was handed the lock


async def test_grant_is_found_by_the_poll_when_the_notification_is_lost(redis_server, name):
    async with lock_primitive(redis_server.url, interval=0.2) as locks:
        holder = await locks.acquire(name, 10_000, 0, "holder")
        task = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "waiter"))
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="waiter queued")
        k = locks._keys.lock(name)
        # Release through a channel nobody listens on: the grant's message is lost.
        assert (await _RELEASE(locks._redis, k.keys, ["nowhere", 60_000, holder.lease]))[0] == 1
        grant = await asyncio.wait_for(task, 10)
        assert grant.fencing_token > holder.fencing_token
        assert (await locks.describe(name)).owner == "waiter"


async def test_a_release_wakes_a_waiter_of_its_own_process_from_its_reply(redis_server, name):
    """The release script's reply names the waiter it granted, and the releasing
    process wakes it from that, not from the pub/sub copy (here sent to a channel
    nobody hears, with the poll an hour away)."""
    async with lock_primitive(redis_server.url, interval=3600) as locks:
        holder = await locks.acquire(name, 10_000, 0, "holder")
        task = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "waiter"))
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="waiter queued")
        k = locks._keys.lock(name)
        ok, message = await _RELEASE(locks._redis, k.keys, ["nowhere", 60_000, holder.lease])
        assert ok == 1 and len(message.split()) == 3
        locks._waiters.deliver(k.channel, message)
        grant = await asyncio.wait_for(task, 5)
        assert grant.fencing_token == int(message.split()[1])


async def test_a_grant_to_a_waiter_of_the_releasing_process_is_not_published(locks, redis_async, name):
    """The releasing process wakes its own waiter from the reply, so that grant costs no
    SPUBLISH; a grant to another process's waiter is published. Messages on a channel
    arrive in order, so the first one heard must be the second (foreign) grant."""
    k = locks._keys.lock(name)
    pubsub = redis_async.pubsub()
    await pubsub.ssubscribe(k.channel)
    try:
        holder = await locks.acquire(name, 10_000, 0, "holder")
        local = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "local waiter"))
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="waiter queued")
        await locks.release(name, holder.lease)
        held = await asyncio.wait_for(local, 5)
        task = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "woken by another process"))
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="second waiter queued")
        ok, message = await _RELEASE(locks._redis, k.keys, [k.channel, 60_000, held.lease, "another-process"])
        assert ok == 1
        heard = None
        async with asyncio.timeout(10):
            while heard is None:
                heard = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
        assert heard["data"] in (message, message.encode())
        assert (await asyncio.wait_for(task, 5)).fencing_token == int(message.split()[1])
    finally:
        await pubsub.aclose()


async def test_a_grant_between_two_waits_of_a_ticket_is_kept_for_the_next(redis_server, name):
    """A ticket's wait that times out cancels its future; a grant delivered before its
    next wait begins is kept for that wait, not lost until a poll (an hour away here)."""
    async with lock_primitive(redis_server.url, interval=3600) as locks:
        k = locks._keys.lock(name)
        holder = await locks.acquire(name, 10_000, 0, "holder")
        await locks._run(_ACQUIRE, k, "waiter-token", 10_000, "waiter", *locks._waiting_args(30_000))
        with locks._waiters.ticket(k.channel, "waiter-token", lambda tokens: locks._poll(k, tokens)) as ticket:
            assert await ticket.wait(0.05, None) is None  # timed out: its future is cancelled
            assert locks._waiters.deliver(k.channel, "waiter-token 7 12345")
            assert await asyncio.wait_for(ticket.wait(30, None), 5) == "7 12345"
        await locks.release(name, holder.lease)


async def test_a_waiter_rides_out_a_redis_restart_and_gets_the_lock(fresh_redis, name):
    """Redis SIGKILLed and restarted from its AOF while a waiter is queued: the
    waiter's call keeps waiting through the outage (its subscription is renewed by
    the bus's next connection) and is granted when the holder releases."""
    async with lock_primitive(fresh_redis.url, interval=0.2) as locks:
        holder = await locks.acquire(name, 30_000, 0, "holder")
        task = asyncio.create_task(locks.acquire(name, 30_000, 30_000, "waiter"))
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="waiter queued")
        await asyncio.to_thread(fresh_redis.kill)
        await asyncio.to_thread(fresh_redis.start)
        released = await async_wait_until(lambda: _released(locks, name, holder.lease), message="release after restart")
        assert released
        grant = await asyncio.wait_for(task, 10)
        assert grant.fencing_token > holder.fencing_token


async def _released(locks, name, lease):
    from concord_server.errors import Unavailable

    try:
        return await locks.release(name, lease) or True
    except Unavailable:
        return False


async def test_waiters_of_a_dead_server_process_are_skipped(redis_server, name):
    async with lock_primitive(redis_server.url) as locks:
        holder = await locks.acquire(name, 10_000, 0, "holder")
        k = locks._keys.lock(name)
        # A waiter queued by a process that then died: it never polls again.
        status, *_ = await _ACQUIRE(locks._redis, k.keys, [k.channel, 60_000, "ghost-lease", 60_000, "ghost",
                                                           60_000, "dead-proc", 300])
        assert status == 2
        live = asyncio.create_task(locks.acquire(name, 10_000, 30_000, "alive"))
        await async_wait_until(lambda: _eq(locks._redis.execute_command("ZCARD", k.queue), 2), message="both queued")
        await async_wait_until(lambda: _eq(waiters(locks, name), 1), message="the ghost's liveness to lapse")
        await locks.release(name, holder.lease)
        grant = await asyncio.wait_for(live, 10)
        assert grant is not None and (await locks.describe(name)).owner == "alive"


async def test_fencing_tokens_increase_even_when_redis_forgets_them(locks, redis_async, name):
    tokens = []
    for _ in range(3):
        grant = await locks.acquire(name, 10_000, 0, "a")
        tokens.append(grant.fencing_token)
        await locks.release(name, grant.lease)
    # An emptied Redis (replaced, or flushed) has no memory of the last token.
    await redis_async.delete(*locks._keys.lock(name).keys)
    tokens.append((await locks.acquire(name, 10_000, 0, "a")).fencing_token)
    assert tokens == sorted(set(tokens))


async def test_keep_alive_renews_until_the_lock_is_taken_away(locks, redis_async, name):
    grant = await locks.acquire(name, 300, 0, "a")
    renewals = []
    async for renewed in locks.keep_alive(name, grant, 300):
        renewals.append(renewed)
        if len(renewals) == 3:
            await redis_async.delete(locks._keys.lock(name).holder)
    assert len(renewals) == 3
    assert renewals[-1].expires_at_ms > grant.expires_at_ms


async def test_all_keys_vanish_once_nothing_is_held_or_waiting(locks, redis_async, name):
    holder = await locks.acquire(name, 10_000, 0, "holder")
    assert await locks.acquire(name, 10_000, 100, "w") is None
    await locks.release(name, holder.lease)
    k = locks._keys.lock(name)
    # Only the fence remains, with a TTL: nothing lives forever.
    assert await redis_async.exists(k.holder, k.queue, k.waiters) == 0
    assert await redis_async.pttl(k.fence) > 0


async def test_views_read_many_locks_in_order_with_their_holders_and_first_waiters(locks, name):
    """The console's read: more locks than one script takes (VIEW_BATCH), each with its
    holder and its waiters in FIFO order; a lock nobody holds reads as free."""
    from concord_server.primitives.lock import VIEW_BATCH

    names = [f"{name}-{i}" for i in range(VIEW_BATCH + 10)]
    held = {i: await locks.acquire(names[i], 30_000, 0, f"owner-{i}") for i in range(0, len(names), 3)}
    contended = 0  # held: its waiters queue
    waiting = [asyncio.create_task(locks.acquire(names[contended], 30_000, 20_000, f"waiter-{w}")) for w in range(3)]
    try:
        await async_wait_until(lambda: _eq(waiters(locks, names[contended]), 3), message="three waiters queued")
        views = await locks.views(names, limit=2)
        assert len(views) == len(names)
        for i, (state, first) in enumerate(views):
            if i in held:
                assert state.held and state.owner == f"owner-{i}" and state.fencing_token == held[i].fencing_token
                assert 0 < state.ttl_remaining_ms <= 30_000
            else:
                assert not state.held and state.owner == "" and state.waiters == 0
            if i == contended:
                assert state.waiters == 3 and [owner for owner, _ in first] == ["waiter-0", "waiter-1"]  # limit 2
                assert all(since <= state.now_ms for _, since in first)
            else:
                assert first == []
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def test_views_on_a_cluster_read_each_slots_locks_in_their_own_script(redis_cluster, name):
    """A script touches one slot of a cluster: views groups the locks by slot and
    still answers in the order asked."""
    from concord_server.keys import KeySpace
    from concord_server.primitives.lock import Locks
    from concord_server.store.client import connect_cluster
    from concord_server.store.cluster import ClusterCommands
    from concord_server.store.link import Endpoint
    from concord_server.store.notifications import NotificationBus
    from concord_server.wakeups.waiters import Waiters

    slot_map = connect_cluster(redis_cluster.url, 4)
    commands = ClusterCommands(slot_map, Endpoint.from_url(redis_cluster.url))
    bus = NotificationBus(Endpoint.from_url(redis_cluster.url))  # unused: nothing here waits
    locks = Locks(commands, KeySpace(f"views-{name.split(':')[1]}"), Waiters(bus), process_id="test-proc",
                  liveness_ms=5000)
    try:
        names = [f"{name}-{i}" for i in range(12)]
        assert len({slot_map.keyslot(locks._keys.lock(n).holder) for n in names}) > 1
        held = {i: await locks.acquire(names[i], 30_000, 0, f"owner-{i}") for i in (0, 5, 11)}
        views = await locks.views(names)
        assert [(s.held, s.owner) for s, _ in views] == [(i in held, f"owner-{i}" if i in held else "")
                                                         for i in range(len(names))]
        assert [s.fencing_token for s, _ in views if s.held] == [held[i].fencing_token for i in (0, 5, 11)]
    finally:
        await locks.drain(1.0)
        await bus.close()
        await commands.aclose()

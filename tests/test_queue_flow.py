"""Queue flow control on the primitive against real Redis: groups taking turns, caps,
lease rates, pausing a group, and the reason a ready task gives for waiting."""

from __future__ import annotations

import asyncio
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concord_server.primitives.queue import GroupRules, NewTask, Policy, Rate
from support import queue_primitive


@pytest.fixture
async def queues(redis_server):
    async with queue_primitive(redis_server.url, retry_backoff_ms=50) as queues:
        yield queues


async def take(queues, name, n=1, wait_ms=0):
    return await queues.dequeue([name], n, 30_000, wait_ms)


async def test_a_lone_task_of_a_quiet_group_is_not_queued_behind_another_groups_burst(queues, name):
    await queues.enqueue(name, [NewTask("t", group="burst")] * 500)
    (quiet,) = await queues.enqueue(name, [NewTask("t", group="quiet")])
    got = await take(queues, name, 2)
    assert [t.group for t in got] == ["burst", "quiet"] and got[1].task_id == quiet.task_id


async def test_a_burst_delays_another_group_by_at_most_one_lease_per_other_busy_group(queues, name):
    """Three groups each with a burst; a fourth's single task comes within three leases,
    one at a time or in one batch."""
    for g in ("a", "b", "c"):
        await queues.enqueue(name, [NewTask("t", group=g)] * 50)
    await take(queues, name, 7)  # the turns are under way
    (lone,) = await queues.enqueue(name, [NewTask("t", group="lone")])
    one_by_one = [(await take(queues, name))[0] for _ in range(4)]
    assert lone.task_id in [t.task_id for t in one_by_one]
    (again,) = await queues.enqueue(name, [NewTask("t", group="lone")])
    batch = await take(queues, name, 4)
    assert again.task_id in [t.task_id for t in batch]


async def test_priorities_order_tasks_within_a_group_and_ungrouped_tasks_take_their_turn(queues, name):
    low, high = await queues.enqueue(name, [NewTask("low", group="g"), NewTask("high", group="g", priority=5)])
    await queues.enqueue(name, [NewTask("plain")] * 3)
    got = await take(queues, name, 4)
    assert [t.type for t in got if t.group == "g"] == ["high", "low"]
    assert sorted(t.type for t in got) == ["high", "low", "plain", "plain"]


async def test_weights_share_the_turns(queues, name):
    await queues.set_group(name, "heavy", GroupRules(weight=3))
    await queues.enqueue(name, [NewTask("t", group="heavy")] * 100 + [NewTask("t", group="light")] * 100)
    got = await take(queues, name, 40)
    heavy = sum(t.group == "heavy" for t in got)
    assert 29 <= heavy <= 31, heavy


async def test_a_group_at_its_cap_waits_and_a_settle_frees_it_for_a_waiting_worker(queues, name):
    await queues.set_policy(name, Policy(group_max_leased=1))
    a1, a2 = await queues.enqueue(name, [NewTask("t", group="a")] * 2)
    (b1,) = await queues.enqueue(name, [NewTask("t", group="b")])
    first = await take(queues, name, 5)
    assert sorted(t.task_id for t in first) == sorted([a1.task_id, b1.task_id])
    assert (await queues.get_task(name, a2.task_id)).wait_reason == "group_capped"
    info = await queues.get_group(name, "a")
    assert (info.ready, info.leased, info.max_leased, info.wait_reason) == (1, 1, 1, "group_capped")
    waiting = asyncio.ensure_future(take(queues, name, 1, 10_000))
    await asyncio.sleep(0)  # the waiter parks on the doorbell (not a settle: its wake-up is what is tested)
    held = next(t for t in first if t.task_id == a1.task_id)
    await queues.ack(name, held.task_id, held.lease)
    (got,) = await asyncio.wait_for(waiting, 10)
    assert got.task_id == a2.task_id


async def test_the_queues_cap_bounds_leases_across_workers(queues, name):
    await queues.set_policy(name, Policy(max_leased=2))
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t")] * 4)]
    got = await take(queues, name, 4)
    assert len(got) == 2 and await take(queues, name, 4) == []
    assert (await queues.get_task(name, ids[2])).wait_reason == "queue_capped"
    await queues.nack(name, got[0].task_id, got[0].lease, None, "x")
    assert len(await take(queues, name, 4)) == 1


async def test_a_lease_rate_lets_the_burst_through_then_spaces_the_rest(queues, name):
    await queues.set_policy(name, Policy(rate=Rate(count=5, period_ms=500, burst=2)))
    ids = [r.task_id for r in await queues.enqueue(name, [NewTask("t")] * 4)]
    assert len(await take(queues, name, 4)) == 2
    assert (await queues.get_task(name, ids[2])).wait_reason == "queue_limited"
    # The third fits 100 ms after the burst; a waiting Dequeue is woken for it by the
    # clock (next_change), not by a doorbell.
    loop = asyncio.get_running_loop()
    start = loop.time()
    (third,) = await take(queues, name, 1, 5_000)
    assert third.task_id == ids[2] and loop.time() - start < 2.0


async def test_a_groups_rate_holds_only_that_group(queues, name):
    await queues.set_group(name, "slow", GroupRules(rate=Rate(count=1, period_ms=60_000, burst=1)))
    await queues.enqueue(name, [NewTask("t", group="slow")] * 3 + [NewTask("t", group="fast")] * 3)
    got = await take(queues, name, 6)
    assert sorted(t.group for t in got) == ["fast", "fast", "fast", "slow"]
    info = await queues.get_group(name, "slow")
    assert (info.ready, info.wait_reason, info.rate) == (2, "group_limited", Rate(1, 60_000, 1))
    # A new rate is judged afresh.
    await queues.set_group(name, "slow", GroupRules(rate=Rate(count=100, period_ms=1000, burst=10)))
    assert len(await take(queues, name, 6)) == 2


async def test_a_paused_group_waits_while_the_others_go_on_and_resuming_wakes_a_worker(queues, name):
    assert not await queues.pause(name, True, "p")
    (p,) = await queues.enqueue(name, [NewTask("t", group="p")])
    (o,) = await queues.enqueue(name, [NewTask("t", group="o")])
    assert [t.task_id for t in await take(queues, name, 5)] == [o.task_id]
    assert (await queues.get_task(name, p.task_id)).wait_reason == "group_paused"
    assert (await queues.get_group(name, "p")).paused
    waiting = asyncio.ensure_future(take(queues, name, 1, 10_000))
    await asyncio.sleep(0)
    assert await queues.pause(name, False, "p")
    (got,) = await asyncio.wait_for(waiting, 10)
    assert got.task_id == p.task_id


async def test_held_groups_are_reported_to_watchers(queues, name):
    await queues.set_policy(name, Policy(group_max_leased=1))
    await queues.enqueue(name, [NewTask("t", group="a")] * 2)
    await take(queues, name)
    held = [e async for e in _events(queues, name) if e.kind == "held"]
    assert [(e.group, e.wait_reason, e.task_id) for e in held] == [("a", "group_capped", "")]


async def _events(queues, name):
    async for e in queues.watch(name, 0, True):
        if e.kind == "caught_up":
            return
        yield e


async def test_cancel_purge_and_stats_see_grouped_tasks(queues, name):
    added = await queues.enqueue(name, [NewTask("t", group="g")] * 3 + [NewTask("t")])
    assert (await queues.stats(name)).ready == 4
    assert len(await queues.peek(name, "ready", 10)) == 4
    await queues.cancel(name, added[0].task_id)
    assert (await queues.get_group(name, "g")).ready == 2
    assert await queues.purge(name, False) == 3
    assert (await queues.stats(name)).ready == 0
    assert await take(queues, name) == []
    assert await queues.groups(name, "", 10) == []  # a group that holds nothing is forgotten


async def test_groups_list_by_name_in_pages(queues, name):
    await queues.enqueue(name, [NewTask("t", group=g) for g in ("c", "a", "b")])
    first = await queues.groups(name, "", 2)
    rest = await queues.groups(name, first[-1].name, 2)
    assert [g.name for g in first + rest] == ["a", "b", "c"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(1, 30)), min_size=1, max_size=12),
       st.integers(1, 4))
async def test_no_group_is_overtaken_twice_by_another_while_it_waits(redis_server, groups, batch):
    """The invariant: while a group has ready tasks, no other group is leased two tasks
    between two of its own, however big its burst and however many a Dequeue takes."""
    name = f"test:fair:{random.getrandbits(48):x}"
    async with queue_primitive(redis_server.url) as queues:
        for g, n in groups:
            await queues.enqueue(name, [NewTask("t", group=g)] * n)
        left: dict[str, int] = {}
        for g, n in groups:
            left[g] = left.get(g, 0) + n
        overtaken = {g: {} for g in left}  # g -> {other group: leases since g's last}
        while any(left.values()):
            got = await queues.dequeue([name], batch, 30_000, 0)
            assert got
            for t in got:
                for g in left:
                    if left[g] > 0 and g != t.group:
                        n = overtaken[g][t.group] = overtaken[g].get(t.group, 0) + 1
                        assert n <= 1, (g, t.group, left)
                overtaken[t.group] = {}
                left[t.group] -= 1


async def test_a_lane_left_listed_with_nothing_ready_does_not_stop_the_others(queues, name, redis_sync):
    """lanes is a hint checked at each pick: a stale entry (here written by hand) is set
    aside, and the lanes behind it are served in the same Dequeue."""
    (task,) = await queues.enqueue(name, [NewTask("t", group="real")])
    redis_sync.zadd(queues._keys.queue(name).lanes, {"ghost": -1})
    (got,) = await take(queues, name, 2)
    assert got.task_id == task.task_id
    assert redis_sync.zscore(queues._keys.queue(name).lanes, "ghost") is None

"""The chat primitive on its own against real Redis, no gRPC."""

from __future__ import annotations

import asyncio

import pytest

from concord_server.errors import ChatExists, ChatFull, ChatNotFound, NotAMember
from concord_server.primitives.chat import CAUGHT_UP, Batch, Gap, Message
from support import async_wait_until, chat_primitive

@pytest.fixture
async def wired(redis_server):
    """Chats and Feeds under a key prefix of the test's own, so user names do not collide."""
    async with chat_primitive(redis_server.url, max_messages=5, max_members=4) as wired:
        yield wired


@pytest.fixture
def chats(wired):
    return wired[0]


@pytest.fixture
def feeds(wired):
    return wired[1]


async def pending(feeds, user) -> list:
    return [e async for e in feeds.fetch_pending(user)]


def messages(events) -> list[Message]:
    return [m for e in events if isinstance(e, Batch) for m in e.messages]


def ids(events) -> list[int]:
    return [m.message_id for m in messages(events)]


async def test_create_send_and_ids_that_increase(chats, name):
    cid, first = await chats.create("joe", ["jeff", "jenny", "jeff"], "hi", name)
    assert (cid, first) == (name, 1)
    assert [await chats.send(cid, "jeff", f"m{i}") for i in range(3)] != []
    view = (await chats.views("jenny", [cid]))[0]
    assert [(m.message_id, m.sender, m.body) for m in view.messages] == [
        (1, "joe", "hi"), (2, "jeff", "m0"), (3, "jeff", "m1"), (4, "jeff", "m2")]
    with pytest.raises(ChatExists):
        await chats.create("joe", ["x"], "again", name)
    assert name in await chats.chats_of("jeff")


async def test_only_members_send_and_missing_chats_are_not_found(chats, name):
    cid, _ = await chats.create("a", ["b"], "hi", name)
    with pytest.raises(NotAMember):
        await chats.send(cid, "mallory", "let me in")
    with pytest.raises(ChatNotFound):
        await chats.send(f"{name}:nope", "a", "anyone?")
    with pytest.raises(ChatNotFound):
        await chats.join(f"{name}:nope", "a")
    assert f"{name}:nope" not in await chats.chats_of("a")


async def test_fetch_pending_spans_chats_marks_seen_and_deletes_what_all_have_seen(chats, feeds, redis_sync, name):
    c1, _ = await chats.create("a", ["b"], "one", f"{name}:1")
    c2, _ = await chats.create("c", ["b"], "two", f"{name}:2")
    await chats.send(c1, "a", "three")
    events = await pending(feeds, "b")
    assert [[(m.chat_id, m.message_id) for m in e.messages] for e in events] == [[(c1, 1), (c1, 2)], [(c2, 1)]]
    await feeds.drain(5)  # seen positions are written in the background
    assert await pending(feeds, "b") == []
    # "a" has not read c1 yet, so b's reading deletes nothing there ...
    assert redis_sync.xlen(chats._keys.chat(c1).msgs) == 2
    assert ids(await pending(feeds, "a")) == [1, 2]
    await feeds.drain(5)
    # ... and now every member has seen both: gone, in the same step as a's ack.
    assert redis_sync.xlen(chats._keys.chat(c1).msgs) == 0
    assert (await chats.views("a", [c1], count=0))[0].unread == 0


async def test_a_stream_cut_halfway_leaves_the_rest_pending(chats, feeds, name):
    c1, _ = await chats.create("a", ["b"], "m1", f"{name}:1")
    await chats.send(c1, "a", "m2")
    c2, _ = await chats.create("a", ["b"], "n1", f"{name}:2")
    await chats.send(c2, "a", "n2")
    stream = feeds.fetch_pending("b")
    first, second = await anext(stream), await anext(stream)
    await stream.aclose()
    await feeds.drain(5)  # the background write of what was delivered
    # Asking for the second batch confirmed the first; the second was still in
    # flight when the stream was cut, so it stays pending (at least once, never lost).
    assert [m.body for m in first.messages + second.messages] == ["m1", "m2", "n1", "n2"]
    assert [m.body for m in messages(await pending(feeds, "b"))] == ["n1", "n2"]


async def test_join_starts_at_the_latest_and_leave_deletes_the_chat_with_the_last_member(chats, feeds, redis_sync,
                                                                                       name):
    cid, _ = await chats.create("a", ["b"], "before", name)
    assert await chats.join(cid, "c") == 1
    assert await pending(feeds, "c") == []
    await chats.send(cid, "a", "after")
    assert ids(await pending(feeds, "c")) == [2]
    assert await chats.join(cid, "d") == 2
    with pytest.raises(ChatFull):
        await chats.join(cid, "e")
    for user in ("a", "b", "c"):
        assert await chats.leave(cid, user) is False
    with pytest.raises(NotAMember):
        await chats.leave(cid, "a")
    assert await chats.leave(cid, "d") is True
    await feeds.drain(5)
    assert not redis_sync.keys(chats._keys.tag("chat", cid) + "*")
    for user in "abcd":
        assert cid not in await chats.chats_of(user)


async def test_retention_drops_the_oldest_and_says_so_with_a_gap(chats, feeds, name):
    cid, _ = await chats.create("a", ["b"], "m1", name)
    for i in range(2, 9):
        await chats.send(cid, "a", f"m{i}")
    events = await pending(feeds, "b")
    assert events[0] == Gap(cid, 4)
    assert ids(events) == [4, 5, 6, 7, 8]
    history = await chats.history(cid, 0, 0, 100)
    assert [m.message_id for m in history] == [4, 5, 6, 7, 8]
    assert [m.message_id for m in await chats.history(cid, 7, 0, 2)] == [6, 5]
    assert [m.message_id for m in await chats.history(cid, 0, 5, 2)] == [6, 7]


async def test_subscribe_delivers_pending_then_live_messages_and_new_chats(chats, feeds, name):
    cid, _ = await chats.create("a", ["b"], "old", name)
    feed = feeds.subscribe("b", auto_ack=True)
    assert ids([await anext(feed)]) == [1]
    assert await anext(feed) is CAUGHT_UP
    nxt = asyncio.ensure_future(anext(feed))
    await chats.send(cid, "a", "live")
    assert [m.body for m in (await asyncio.wait_for(nxt, 5)).messages] == ["live"]
    other, _ = await chats.create("c", ["b"], "a new chat", f"{name}:new")
    batch = await asyncio.wait_for(anext(feed), 5)
    assert [(m.chat_id, m.body) for m in batch.messages] == [(other, "a new chat")]
    await feed.aclose()


async def test_subscribers_of_one_chat_share_one_read_per_message(fresh_redis, name):
    # A Redis of its own: the script counts below must not see other tests' servers.
    # No body travels whole in its publish (carry_bytes=0): every message is read
    # (test_chat_direct.py has the messages that need no read).
    async with chat_primitive(fresh_redis.url, carry_bytes=0) as (chats, feeds):
        await _share_one_read(chats, feeds, fresh_redis.client(), name)


async def _share_one_read(chats, feeds, redis_sync, name):
    members = [f"u{i}" for i in range(8)]
    cid, _ = await chats.create("sender", members, "hello", name)
    subs = [feeds.subscribe(u, auto_ack=True) for u in members]
    for sub in subs:
        assert ids([await anext(sub)]) == [1] and await anext(sub) is CAUGHT_UP
    nexts = [asyncio.ensure_future(anext(sub)) for sub in subs]
    members_key = chats._keys.chat(cid).members
    # The first message is confirmed and its seen positions written; all are waiting.
    await async_wait_until(lambda: _all_seen(redis_sync, members_key, members, 1), message="first message seen")
    before = _script_calls(redis_sync)
    await chats.send(cid, "sender", "to all")
    batches = await asyncio.wait_for(asyncio.gather(*nexts), 5)
    assert all([m.body for m in b.messages] == ["to all"] for b in batches)
    # The send and one shared read, not one per subscriber (8). One or two more may
    # come from the rings that confirm the subscribers' new subscriptions (a loaded
    # loop sees them in two turns: 3 on CI once).
    reads = _script_calls(redis_sync) - before - 1
    assert 1 <= reads <= 3
    # Asking for more confirms the delivery: the eight seen positions go in one write.
    nexts = [asyncio.ensure_future(anext(sub)) for sub in subs]
    await async_wait_until(lambda: _all_seen(redis_sync, members_key, members, 2), message="seen positions written")
    assert _script_calls(redis_sync) - before == 1 + reads + 1
    for fut in nexts:
        fut.cancel()
    await asyncio.gather(*nexts, return_exceptions=True)


async def _all_seen(redis_sync, key, members, upto) -> bool:
    return all(redis_sync.zscore(key, m) == upto for m in members)


def _script_calls(redis_sync) -> int:
    return int(redis_sync.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


async def test_explicit_ack_mode_redelivers_what_was_not_acked(chats, feeds, name):
    c1, _ = await chats.create("a", ["b"], "m1", f"{name}:1")
    c2, _ = await chats.create("a", ["b"], "n1", f"{name}:2")
    feed = feeds.subscribe("b", auto_ack=False)
    first, second = await anext(feed), await anext(feed)
    await chats.ack("b", first.chat_id, first.messages[-1].message_id)
    await feed.aclose()
    again = feeds.subscribe("b", auto_ack=False)
    assert [m.body for m in (await anext(again)).messages] == [second.messages[0].body]
    assert await anext(again) is CAUGHT_UP
    await again.aclose()


async def test_pending_messages_larger_than_one_read_all_arrive_in_order(redis_server, name):
    """A read stops after about READ_BYTES of bodies; the feed reads again until it
    has everything, so a backlog of big messages arrives whole, a slice at a time."""
    body = "x" * (300 * 1024)
    async with chat_primitive(redis_server.url, max_messages=100, max_bytes=8 * 1024 * 1024) as (chats, feeds):
        chat_id, _ = await chats.create("ann", ["bob"], "hello", name)
        for i in range(12):  # about 3.5 MiB: four reads
            await chats.send(chat_id, "ann", f"{i}:{body}")
        one_read = (await chats.read(chat_id, "bob")).messages
        assert 3 <= len(one_read) <= 5  # stopped after the message that reached 1 MiB
        events = await pending(feeds, "bob")
    assert [m.body.split(":")[0] for e in events for m in e.messages] == ["hello", *map(str, range(12))]

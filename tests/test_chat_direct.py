"""Chat messages that travel whole in the send's publish (primitives/chat_feeds.py).

A subscriber's server hands on a message it heard on the chat's channel only when
the stream's cursor is exactly the message's id - 1 and a read since the last
revocation (a leave, a (re)subscription) found the user a member; otherwise it
reads. These tests break each condition on purpose: a publish that never arrives,
a body over the carry bound (published as its id only), a leave whose user keeps
listening, the bus's pub/sub connection killed under a flow of messages, senders on
two server replicas at once, a subscriber switching channels while messages flow.
Each checks that every stream gets every message once, in order: a direct path that
skipped the contiguity check would deliver out of order or skip, one that did not
drop what a read already returned would deliver twice, one that ignored the leave
would deliver to a non-member.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import redis

import concord
from concord_server.primitives import chat as chat_primitive_module
from concord_server.primitives.chat import CAUGHT_UP, Batch
from concord_server.statuses import CHAT
from support import ServerProcess, async_wait_until, chat_primitive


def ids(batch) -> list[int]:
    assert isinstance(batch, Batch), batch
    return [m.message_id for m in batch.messages]


async def next_batch(feed) -> Batch:
    return await asyncio.wait_for(anext(feed), 10)


async def started(feeds, user: str, auto_ack: bool = True):
    """A subscription past its pending messages, listening (its first read done)."""
    feed = feeds.subscribe(user, auto_ack=auto_ack)
    while (await next_batch(feed)) is not CAUGHT_UP:
        pass
    return feed


async def send_unpublished(chats, chat_id: str, sender: str, body: str) -> int:
    """chat_send.lua with its publish going to a channel nobody listens to: a
    message whose notice is lost, as pub/sub may lose one."""
    k = chats._keys.chat(chat_id)
    reply = await chat_primitive_module._SEND.run(chats._redis, k.keys,
                                                  [f"{k.channel}:nobody", *chats._retention, sender, body, 1 << 20])
    return reply.message_id


async def test_a_lost_publish_is_read_and_nothing_comes_twice_or_out_of_order(redis_server, name):
    async with chat_primitive(redis_server.url) as (chats, feeds):
        cid, _ = await chats.create("a", ["b"], "m1", name)
        feed = await started(feeds, "b")
        await chats.send(cid, "a", "m2")
        await chats.send(cid, "a", "m3")
        got = ids(await next_batch(feed))
        while got[-1] < 3:
            got += ids(await next_batch(feed))
        assert got == [2, 3]
        # 4's notice is lost; 5 is heard whole, one past what the stream has: it must
        # read 4 and 5 (in that order), then drop the 5 it heard (the read had it).
        assert await send_unpublished(chats, cid, "a", "m4") == 4
        await chats.send(cid, "a", "m5")
        await chats.send(cid, "a", "m6")
        while got[-1] < 6:
            got += ids(await next_batch(feed))
        assert got == [2, 3, 4, 5, 6]
        await feed.aclose()


async def test_a_lost_publish_with_nothing_after_it_arrives_on_the_safety_ring(redis_server, name):
    """The last message's notice lost: the doorbell's subscription confirmation or
    safety ring reads it (here: a resubscription after joining another chat)."""
    async with chat_primitive(redis_server.url) as (chats, feeds):
        cid, _ = await chats.create("a", ["b"], "m1", name)
        feed = await started(feeds, "b")
        await send_unpublished(chats, cid, "a", "m2")
        other, _ = await chats.create("c", ["b"], "n1", f"{name}:other")  # rings b's user channel
        seen = {}
        while seen.get(cid, [0])[-1] < 2 or other not in seen:
            batch = await next_batch(feed)
            seen.setdefault(batch.chat_id, []).extend(ids(batch))
        assert seen == {cid: [2], other: [1]}
        await feed.aclose()


async def test_a_message_heard_whole_costs_no_read_and_one_seen_write(fresh_redis, name):
    # A Redis of its own: the script counts below must not see other tests' servers.
    async with chat_primitive(fresh_redis.url) as (chats, feeds):
        admin = fresh_redis.client()
        members = [f"u{i}" for i in range(8)]
        cid, _ = await chats.create("sender", members, "hello", name)
        subs = [await started(feeds, u) for u in members]
        nexts = [asyncio.ensure_future(anext(sub)) for sub in subs]  # each starts listening
        channel = chats._keys.chat(cid).channel
        # Redis holds the subscription: its confirmation reaches the server before any
        # later publish, and the read it causes is done once message 2 is delivered.
        await async_wait_until(lambda: _subscribed(admin, channel), message="the chat's channel subscribed")
        await chats.send(cid, "sender", "two")
        assert all(ids(b) == [2] for b in await asyncio.wait_for(asyncio.gather(*nexts), 10))
        nexts = [asyncio.ensure_future(anext(sub)) for sub in subs]
        members_key = chats._keys.chat(cid).members
        await async_wait_until(lambda: _all_seen(admin, members_key, members, 2), message="message 2 seen")
        before = _script_calls(admin)
        await chats.send(cid, "sender", "three")
        batches = await asyncio.wait_for(asyncio.gather(*nexts), 10)
        assert all(ids(b) == [3] for b in batches)
        assert len({id(b) for b in batches}) == 1  # one Batch, parsed once, for all eight streams
        assert _script_calls(admin) - before == 1  # the send: nobody read
        nexts = [asyncio.ensure_future(anext(sub)) for sub in subs]  # confirms message 3
        await async_wait_until(lambda: _all_seen(admin, members_key, members, 3), message="message 3 seen")
        assert _script_calls(admin) - before == 2  # and one write of the eight seen positions
        for fut in nexts:
            fut.cancel()
        await asyncio.gather(*nexts, return_exceptions=True)
        admin.close()


async def _subscribed(admin, channel) -> bool:
    return admin.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] >= 1


async def _all_seen(admin, key, members, upto) -> bool:
    return all(admin.zscore(key, m) == upto for m in members)


def _script_calls(admin) -> int:
    return int(admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0))


async def test_bodies_over_the_carry_bound_travel_as_ids_and_are_read_in_order(redis_server, name):
    async with chat_primitive(redis_server.url, carry_bytes=100) as (chats, feeds):
        cid, _ = await chats.create("a", ["b", "c"], "m1", name)
        feeds_b, feeds_c = await started(feeds, "b"), await started(feeds, "c")
        channel = chats._keys.chat(cid).channel
        tap = redis.Redis.from_url(redis_server.url, decode_responses=True).pubsub()
        tap.ssubscribe(channel)
        assert tap.get_message(timeout=5)["type"] == "ssubscribe"
        bodies = ["small", "x" * 101, "small again", "y" * 5000, "z" * 100]
        for body in bodies:
            await chats.send(cid, "a", body)
        for feed in (feeds_b, feeds_c):
            got = []
            while len(got) < len(bodies):
                got += (await next_batch(feed)).messages
            assert [(m.message_id, m.body) for m in got] == list(zip(range(2, 7), bodies))
            await feed.aclose()
        published = [tap.get_message(timeout=5)["data"] for _ in bodies]
        tap.close()
        assert published == ["2 " + published[0].split(" ")[1] + " a\nsmall", "3",
                             "4 " + published[2].split(" ")[1] + " a\nsmall again", "5",
                             "6 " + published[4].split(" ")[1] + " a\n" + "z" * 100]


async def test_a_member_who_left_gets_nothing_sent_after_it_left_while_still_listening(redis_server, name):
    """The leave's notice on the chat's channel stops direct delivery before the next
    message arrives, even though the user's stream has not yet stopped listening to
    the chat (its user channel is not rung here: only the chat's membership changes)."""
    async with chat_primitive(redis_server.url) as (chats, feeds):
        cid, _ = await chats.create("a", ["b"], "m1", name)
        feed = await started(feeds, "b")
        await chats.send(cid, "a", "m2")
        assert ids(await next_batch(feed)) == [2]  # heard whole and handed on
        k = chats._keys.chat(cid)
        left = await chat_primitive_module._MEMBER.run(chats._redis, k.keys,
                                                       [k.channel, *chats._retention, "leave", "b", 0])
        assert (left.status, left.value) == (CHAT.OK, 0)  # left; the chat is kept
        await chats.send(cid, "a", "m3 is not for b")
        # b joins again (its index still names the chat, so its user channel stays
        # quiet): it starts at 3, so the next thing its stream sends must be 4.
        assert await chats.join(cid, "b") == 3
        await chats.send(cid, "a", "m4")
        batch = await next_batch(feed)
        assert [(m.message_id, m.body) for m in batch.messages] == [(4, "m4")]
        await feed.aclose()


async def test_a_resubscription_after_a_lost_leave_notice_revokes_before_what_it_heard_since(redis_server, name):
    """The bus lost the leave's notice, then resubscribed: its confirmation rings while
    b's stream is busy (suspended at a yield), and what the stream hears after it
    must wait for a read, even though the ring has not been looked at yet."""
    async with chat_primitive(redis_server.url) as (chats, feeds):
        cid, _ = await chats.create("a", ["b", "c"], "m1", name)
        feed_b, feed_c = await started(feeds, "b"), await started(feeds, "c")
        await chats.send(cid, "a", "m2")
        assert ids(await next_batch(feed_b)) == [2] and ids(await next_batch(feed_c)) == [2]
        k = chats._keys.chat(cid)
        left = await chat_primitive_module._MEMBER.run(  # the notice goes where nobody listens: lost
            chats._redis, k.keys, [f"{k.channel}:nobody", *chats._retention, "leave", "b", 0])
        assert (left.status, left.value) == (CHAT.OK, 0)
        feeds._bells.listeners[k.channel].on_subscribed()  # what the bus does once it has resubscribed
        await chats.send(cid, "a", "m3 is not for b")
        assert await chats.join(cid, "b") == 3
        await chats.send(cid, "a", "m4")
        got_c: list[int] = []  # c's stream hears each message in the same call as b's
        while 4 not in got_c:
            got_c += ids(await next_batch(feed_c))
        assert got_c == [3, 4]
        batch = await next_batch(feed_b)
        assert [(m.message_id, m.body) for m in batch.messages] == [(4, "m4")]
        await feed_b.aclose()
        await feed_c.aclose()


async def test_switching_channels_under_a_flow_of_messages_skips_and_repeats_nothing(redis_server, name):
    """A subscriber listens again each time it joins a chat; meanwhile messages flow
    into its first chat. Every message arrives once, in order."""
    async with chat_primitive(redis_server.url, max_members=10) as (chats, feeds):
        cid, _ = await chats.create("a", ["b"], "m1", name)
        feed = await started(feeds, "b")
        stop = asyncio.Event()
        last = 1

        async def send() -> None:
            nonlocal last
            while not stop.is_set():
                last, _ = await chats.send(cid, "a", f"m{last + 1}")

        async def switch() -> None:
            for i in range(20):
                await chats.create("c", ["b"], "hello", f"{name}:{i}")
            stop.set()

        sender, switcher = asyncio.create_task(send()), asyncio.create_task(switch())
        got: list[int] = []
        others: dict[str, list[int]] = {}
        try:
            while not (stop.is_set() and sender.done() and got and got[-1] == last and len(others) == 20):
                batch = await next_batch(feed)
                if batch.chat_id == cid:
                    got += ids(batch)
                else:
                    others.setdefault(batch.chat_id, []).extend(ids(batch))
        finally:
            stop.set()
            await asyncio.gather(sender, switcher)
            await feed.aclose()
        assert last > 20
        assert got == list(range(2, last + 1))
        assert all(v == [1] for v in others.values())


# --- through gRPC, on server processes ----------------------------------------------


@pytest.fixture(scope="module")
def two_servers(redis_server, tmp_path_factory) -> Iterator[list[ServerProcess]]:
    logs = tmp_path_factory.mktemp("chat-direct")
    servers = []
    try:
        for i in range(2):
            servers.append(ServerProcess("--redis-url", redis_server.url, "--log-level", "WARNING").start(
                logs / f"server{i}.log"))
        yield servers
    finally:
        for s in servers:
            assert s.stop() == 0, s.log_text()


async def _collect(feed, got: dict[str, list[int]], bodies: dict[tuple[str, int], str], errors: list) -> None:
    try:
        async for m in feed:
            got.setdefault(m.chat_id, []).append(m.message_id)
            bodies[(m.chat_id, m.message_id)] = m.body
    except Exception as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)


async def test_senders_on_two_replicas_reach_subscribers_on_both_once_in_order(two_servers, name):
    clients = [concord.AsyncClient(s.target) for s in two_servers]
    members = [f"{name}:m{i}" for i in range(6)]
    try:
        chat_ids = [await clients[0].chat.create(members[0], members[1:], "hello", chat_id=f"{name}:{c}")
                    for c in range(3)]
        feeds = [clients[i % 2].chat.subscribe(u) for i, u in enumerate(members)]  # auto ack
        got = [dict() for _ in members]
        bodies = [dict() for _ in members]
        errors: list = []
        tasks = [asyncio.create_task(_collect(f, g, b, errors)) for f, g, b in zip(feeds, got, bodies)]
        await asyncio.wait_for(asyncio.gather(*(f.wait_caught_up() for f in feeds)), 30)
        sent: dict[tuple[str, int], str] = {}

        async def sender(k: int) -> None:
            client, user = clients[k % 2], members[k]
            for i in range(60):
                chat_id = chat_ids[(i + k) % len(chat_ids)]
                body = f"{user} #{i}" + ("!" * 20_000 if i % 17 == 0 else "")  # some over the carry bound
                sent[(chat_id, await client.chat.send(chat_id, user, body))] = body

        await asyncio.gather(*(sender(k) for k in range(4)))
        last = {c: max(i for (cc, i) in sent if cc == c) for c in chat_ids}
        await async_wait_until(lambda: _all_have(got, last, errors), timeout=30, message="every subscriber has all")
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert not errors
        for g, b in zip(got, bodies):
            for c in chat_ids:
                assert g[c] == list(range(1, last[c] + 1)), "missing, repeated or out of order"
            assert {key: b[key] for key in sent} == sent
    finally:
        for c in clients:
            await c.close()


async def _all_have(got, last, errors) -> bool:
    return bool(errors) or all(g.get(c, [0])[-1] >= n for g in got for c, n in last.items())


async def test_pubsub_connections_killed_under_a_flow_of_messages_lose_and_repeat_nothing(two_servers, redis_server,
                                                                                      name):
    """The servers' pub/sub connections are killed again and again while messages are
    sent: notices published while a server reconnects are lost, and the messages after
    them are heard out of contiguity; every subscriber still gets all, once, in order."""
    clients = [concord.AsyncClient(s.target) for s in two_servers]
    members = [f"{name}:m{i}" for i in range(4)]
    admin = redis_server.client()
    try:
        chat_id = await clients[0].chat.create(members[0], members[1:], "hello", chat_id=name)
        feeds = [clients[i % 2].chat.subscribe(u) for i, u in enumerate(members)]
        got = [dict() for _ in members]
        errors: list = []
        tasks = [asyncio.create_task(_collect(f, g, {}, errors)) for f, g in zip(feeds, got)]
        await asyncio.wait_for(asyncio.gather(*(f.wait_caught_up() for f in feeds)), 30)
        last = 1
        killed = 0
        deadline = time.monotonic() + 30
        while killed < 8:
            for _ in range(20):
                last = await clients[last % 2].chat.send(chat_id, members[0], f"m{last + 1}")
            killed += await asyncio.to_thread(_kill_subscribers, admin)
            assert time.monotonic() < deadline
        for _ in range(5):
            last = await clients[0].chat.send(chat_id, members[0], f"m{last + 1}")
        await async_wait_until(lambda: _all_have(got, {chat_id: last}, errors), timeout=30,
                               message="every subscriber has all")
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert not errors
        for g in got:
            assert g[chat_id] == list(range(1, last + 1)), "missing, repeated or out of order"
    finally:
        admin.close()
        for c in clients:
            await c.close()


def _kill_subscribers(admin: redis.Redis) -> int:
    """Kills every connection holding a shard channel subscription (the servers' buses)."""
    ids = [c["id"] for c in admin.client_list() if int(c.get("ssub", 0) or 0) > 0]
    for client_id in ids:
        admin.client_kill_filter(_id=client_id)
    return len(ids)

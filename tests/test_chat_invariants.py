"""Chat invariants over a recorded history: members send concurrently while others
join and leave, and every subscriber (explicit ack mode) keeps disconnecting and
reconnecting, sometimes before acking what it received.

A message counts as received when its ack succeeded. From the history:

- each member's received ids strictly increase: in order, never twice;
- a member that stayed receives every message, 1..last, with no gap;
- in each membership of a member that joined and left, it received a gap-free run
  starting right after the id it joined at and reaching at least the last message
  it had seen sent before it decided to leave;
- no Gap marker was ever sent (retention is far above what the test sends).
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field

import concord

STAYING, CHURNING = 5, 3
RUN_SECONDS = 4.0


@dataclass
class Member:
    user: str
    received: list[int] = field(default_factory=list)
    periods: list[tuple[int, int]] = field(default_factory=list)  # (joined at id, last id it must have)


@dataclass
class Room:
    chat_id: str = ""
    last_sent: int = 0
    gaps: list = field(default_factory=list)


async def subscriber(client: concord.AsyncClient, m: Member, room: Room, rng: random.Random) -> None:
    while True:
        feed = client.chat.subscribe(m.user, ack_mode="explicit")
        try:
            async for item in feed:
                if isinstance(item, concord.Gap):
                    room.gaps.append((m.user, item))
                    continue
                if rng.random() < 0.05:
                    break  # "crash" before acking: it must come again
                try:
                    await client.chat.ack(m.user, item.chat_id, item.message_id)
                except concord.NotAMember:
                    continue  # left meanwhile
                m.received.append(item.message_id)
                if rng.random() < 0.05:
                    break  # disconnect after acking
        finally:
            feed.close()


async def sender(client: concord.AsyncClient, user: str, room: Room, rng: random.Random, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        sent = await client.chat.send(room.chat_id, user, f"from {user}")
        room.last_sent = max(room.last_sent, sent)  # read after the await: another send may have raised it
        await asyncio.sleep(rng.uniform(0, 0.03))


async def churner(client: concord.AsyncClient, m: Member, room: Room, rng: random.Random, stop_at: float) -> None:
    while time.monotonic() < stop_at:
        joined = await client.chat.join(room.chat_id, m.user)
        until = time.monotonic() + rng.uniform(0.2, 0.8)
        while time.monotonic() < until:
            sent = await client.chat.send(room.chat_id, m.user, "churn")
            room.last_sent = max(room.last_sent, sent)
            await asyncio.sleep(rng.uniform(0, 0.05))
        must_have = room.last_sent
        deadline = time.monotonic() + 15
        while not m.received or m.received[-1] < must_have:  # catch up, then leave
            assert time.monotonic() < deadline, f"{m.user} never caught up to {must_have}"
            await asyncio.sleep(0.01)
        await client.chat.leave(room.chat_id, m.user)
        m.periods.append((joined, must_have))
        await asyncio.sleep(rng.uniform(0, 0.2))


async def test_every_member_gets_every_message_once_in_order(concord_server, name):
    rng = random.Random(name)
    clients = [concord.AsyncClient(concord_server.target) for _ in range(4)]
    staying = [Member(f"{name}:s{i}") for i in range(STAYING)]
    churning = [Member(f"{name}:c{i}") for i in range(CHURNING)]
    room = Room()
    room.chat_id = await clients[0].chat.create(staying[0].user, [m.user for m in staying[1:]], "welcome")
    room.last_sent = 1
    subs = [asyncio.create_task(subscriber(clients[i % 4], m, room, random.Random(rng.random())))
            for i, m in enumerate(staying + churning)]
    try:
        stop_at = time.monotonic() + RUN_SECONDS
        await asyncio.gather(
            *(sender(clients[i % 4], m.user, room, random.Random(rng.random()), stop_at) for i, m in enumerate(staying)),
            *(churner(clients[i % 4], m, room, random.Random(rng.random()), stop_at) for i, m in enumerate(churning)))
        deadline = time.monotonic() + 20
        while any(not m.received or m.received[-1] < room.last_sent for m in staying):
            assert time.monotonic() < deadline, "staying members did not catch up"
            await asyncio.sleep(0.02)
    finally:
        for t in subs:
            t.cancel()
        await asyncio.gather(*subs, return_exceptions=True)
        for c in clients:
            await c.close()

    assert room.last_sent > 100, f"too few messages to mean anything: {room.last_sent}"
    assert not room.gaps
    for m in staying:
        assert m.received == list(range(1, room.last_sent + 1)), f"{m.user}: missing or repeated messages"
    for m in churning:
        assert m.received == sorted(set(m.received)), f"{m.user}: out of order or repeated"
        assert m.periods, f"{m.user} never completed a membership"
        for joined, must_have in m.periods:
            run = [i for i in m.received if i > joined]
            run = run[:next((k for k, (a, b) in enumerate(zip(run, run[1:])) if b != a + 1), len(run) - 1) + 1]
            assert run and run[0] == joined + 1 and run[-1] >= must_have, (
                f"{m.user}: joined at {joined}, must have up to {must_have}, got the run {run[:3]}..{run[-3:]}")

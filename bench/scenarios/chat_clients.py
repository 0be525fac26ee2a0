"""The client side of the chat-latency scenario: one process runs some subscribers,
or the sender.

  subscribe  one Subscribe stream (ack mode auto) per user of ``users``, over
             concord.AsyncClient (one channel per process). Once every stream has
             sent CAUGHT_UP the process says "ready"; from then until ``end_at`` +
             ``drain`` it records each bench message as it comes out of the stream:
             (sent, arrived, chat id, message id).
  send       concord.AsyncClient chat.send from ``start_at`` to ``end_at``: message i
             goes to chat i mod len(chats), from its member (i // len(chats)) mod
             members. With ``rate`` > 0 a call is issued every 1/rate s whatever the
             replies do (open loop); with ``rate`` 0, ``in_flight`` loops send back to
             back (as fast as the server takes them). Records (sent, replied, chat
             id, message id) per message.

Every body is PREFIX + repr(time.monotonic()) read just before the SendMessage call
was issued. CLOCK_MONOTONIC is system-wide on Linux, so a subscriber in another
process can subtract it from its own reading: latency = arrival - sent.

The parent (chat_latency.py) starts ``main`` in spawned processes through
handoff.run_client_processes, waits for "ready" from every process, then sends one
common start time, so setup (imports, connections, subscribing) is never measured.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection

from .handoff_clients import _handshake, _report

PREFIX = "bench "
Record = tuple[float, float, str, int]  # sent, arrived (or replied), chat id, message id
SETUP_TIMEOUT = 60.0


@dataclass(frozen=True)
class Spec:
    impl: str  # "subscribe" | "send"
    target: str
    users: tuple[str, ...] = ()  # subscribe: one stream each
    chats: tuple[tuple[str, tuple[str, ...]], ...] = ()  # send: (chat id, members)
    rate: float = 0.0  # send: messages/s; 0 = as fast as in_flight loops go
    in_flight: int = 32
    drain: float = 0.0  # subscribe: keep recording this long after end_at


def main(conn: Connection, spec: Spec) -> None:
    from ..harness import _die_with_parent

    _die_with_parent()
    asyncio.run((_subscribe if spec.impl == "subscribe" else _send)(conn, spec))


async def _subscribe(conn: Connection, spec: Spec) -> None:
    import concord
    from concord.chats import ChatMessage

    records: list[Record] = []

    async def listen(feed) -> None:
        async for item in feed:
            arrived = time.monotonic()
            if isinstance(item, ChatMessage) and item.body.startswith(PREFIX):
                records.append((float(item.body[len(PREFIX):]), arrived, item.chat_id, item.message_id))

    async with concord.AsyncClient(spec.target) as client:
        await client.chat.list_chats(spec.users[0])  # connect before subscribing
        feeds = [client.chat.subscribe(user) for user in spec.users]
        listeners = [asyncio.create_task(listen(feed)) for feed in feeds]
        await asyncio.wait_for(asyncio.gather(*(f.wait_caught_up() for f in feeds)), SETUP_TIMEOUT)
        start_at, end_at = await asyncio.to_thread(_handshake, conn)
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = time.process_time()
        await asyncio.sleep(max(0.0, end_at + spec.drain - time.monotonic()))
        cpu = time.process_time() - cpu0
        for feed in feeds:
            feed.close()
        await asyncio.gather(*listeners, return_exceptions=True)
    _report(conn, records, cpu, end_at + spec.drain - start_at)


async def _send(conn: Connection, spec: Spec) -> None:
    import concord

    records: list[Record] = []
    chats = spec.chats

    async with concord.AsyncClient(spec.target) as client:
        async def one(i: int) -> None:
            chat_id, members = chats[i % len(chats)]
            sender = members[(i // len(chats)) % len(members)]
            sent = time.monotonic()
            message_id = await client.chat.send(chat_id, sender, f"{PREFIX}{sent!r}")
            records.append((sent, time.monotonic(), chat_id, message_id))

        await client.chat.list_chats(chats[0][1][0])  # connect before the clock starts
        start_at, end_at = await asyncio.to_thread(_handshake, conn)
        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu0 = time.process_time()
        if spec.rate > 0:
            calls = []
            i = 0
            while (due := start_at + i / spec.rate) < end_at:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                calls.append(asyncio.create_task(one(i)))
                i += 1
            await asyncio.gather(*calls)
        else:
            numbers = iter(range(10**9))

            async def loop() -> None:
                for i in numbers:  # shared iterator: each i is taken by exactly one loop
                    if time.monotonic() >= end_at:
                        return
                    await one(i)

            await asyncio.gather(*(loop() for _ in range(spec.in_flight)))
        cpu = time.process_time() - cpu0
    _report(conn, records, cpu, time.monotonic() - start_at)

"""The chat-latency workload on Redis Streams used directly, the way redis-py users
write group chat without Concord: one stream per chat, XADD to send, one XREAD BLOCK
per subscriber. A peer of Concord's Subscribe streams (chat_latency.py runs it on the
same Valkey, after the Concord runs, with the same chats, rate and latency definition).

  subscribe  one redis.asyncio client per user of ``users`` (so one connection each:
             XREAD BLOCK holds its connection until something arrives, so every
             blocked reader needs a connection of its own, and a shared pool would
             open one per reader anyway). Each reads its chat stream's newest id
             (XREVRANGE + - COUNT 1), then loops XREAD BLOCK 0 from the last id it
             has seen, so nothing added after that id can be missed however late a
             read is issued. The process says "ready" once Valkey counts every
             reader as blocked (INFO clients: blocked_clients), the "caught_up" of
             Concord's streams; from then until ``end_at`` + ``drain`` it records each
             bench entry as it comes out of XREAD: (sent, arrived, chat, entry id).
  send       XADD <chat> MAXLEN ~ KEEP * sender <member> body <PREFIX+sent> from
             ``start_at`` to ``end_at``, message i to chat i mod len(chats) from
             member (i // len(chats)) mod members, one XADD issued every 1/rate s
             whatever the replies do (open loop), each in its own task over one
             redis.asyncio client (its pool opens a connection per XADD in flight).
             Records (sent, replied, chat, entry id).

``target`` is the Valkey's port; a chat id is its stream's key. The subscribers run
in one asyncio process with the hiredis parser, like Concord's subscribers (one
process, one event loop), so the client side costs both the same kind of work; 1,000
threads with the sync client would mostly measure the GIL.
"""

from __future__ import annotations

import asyncio
import time
from multiprocessing.connection import Connection

from .chat_clients import PREFIX, SETUP_TIMEOUT, Record, Spec
from .handoff_clients import _handshake, _report

KEEP = 1000  # XADD MAXLEN ~ KEEP: streams stay bounded, as a real chat would keep them


def main(conn: Connection, spec: Spec) -> None:
    from ..harness import _die_with_parent

    _die_with_parent()
    asyncio.run((_subscribe if spec.impl == "subscribe" else _send)(conn, spec))


def _client(port: str, name: str):
    import redis.asyncio as aioredis

    return aioredis.Redis(host="127.0.0.1", port=int(port), client_name=name, decode_responses=True)


async def _subscribe(conn: Connection, spec: Spec) -> None:
    records: list[Record] = []
    chat_of = {user: chat for chat, members in spec.chats for user in members}
    clients = [_client(spec.target, "bench-streams-sub") for _ in spec.users]

    async def listen(r, chat: str) -> None:
        newest = await r.xrevrange(chat, "+", "-", count=1)
        last = newest[0][0] if newest else "0-0"
        while True:
            reply = await r.xread({chat: last}, block=0)
            arrived = time.monotonic()
            for _key, entries in reply:
                for entry_id, fields in entries:
                    last = entry_id
                    body = fields.get("body", "")
                    if body.startswith(PREFIX):
                        records.append((float(body[len(PREFIX):]), arrived, chat, entry_id))

    control = _client(spec.target, "bench")
    listeners = [asyncio.create_task(listen(r, chat_of[u])) for r, u in zip(clients, spec.users)]

    async def all_blocked() -> None:
        while (await control.info("clients"))["blocked_clients"] < len(spec.users):
            for t in listeners:
                if t.done():
                    t.result()  # a reader failed: raise its error
            await asyncio.sleep(0.05)

    await asyncio.wait_for(all_blocked(), SETUP_TIMEOUT)
    start_at, end_at = await asyncio.to_thread(_handshake, conn)
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    cpu0 = time.process_time()
    await asyncio.sleep(max(0.0, end_at + spec.drain - time.monotonic()))
    cpu = time.process_time() - cpu0
    for t in listeners:
        t.cancel()
    await asyncio.gather(*listeners, return_exceptions=True)
    for r in (*clients, control):
        await r.aclose()
    _report(conn, records, cpu, end_at + spec.drain - start_at)


async def _send(conn: Connection, spec: Spec) -> None:
    records: list[Record] = []
    chats = spec.chats
    r = _client(spec.target, "bench-streams-send")

    async def one(i: int) -> None:
        chat, members = chats[i % len(chats)]
        sender = members[(i // len(chats)) % len(members)]
        sent = time.monotonic()
        entry_id = await r.xadd(chat, {"sender": sender, "body": f"{PREFIX}{sent!r}"},
                                maxlen=KEEP, approximate=True)
        records.append((sent, time.monotonic(), chat, entry_id))

    await r.ping()  # connect before the clock starts
    start_at, end_at = await asyncio.to_thread(_handshake, conn)
    await asyncio.sleep(max(0.0, start_at - time.monotonic()))
    cpu0 = time.process_time()
    calls = []
    i = 0
    while (due := start_at + i / spec.rate) < end_at:
        await asyncio.sleep(max(0.0, due - time.monotonic()))
        calls.append(asyncio.create_task(one(i)))
        i += 1
    await asyncio.gather(*calls)
    cpu = time.process_time() - cpu0
    await r.aclose()
    _report(conn, records, cpu, time.monotonic() - start_at)


def create_chats(port: int, chats: tuple[tuple[str, tuple[str, ...]], ...]) -> None:
    """Each chat's stream with a first message, as chat.create makes one."""
    import redis

    with redis.Redis(host="127.0.0.1", port=port, client_name="bench") as r:
        pipe = r.pipeline(transaction=False)
        for chat, members in chats:
            pipe.xadd(chat, {"sender": members[0], "body": "hello"}, maxlen=KEEP, approximate=True)
        pipe.execute()

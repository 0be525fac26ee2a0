"""Chat fetch: FetchPending for one user in CHATS chats with UNREAD unseen messages
each, against the book's fetch_pending_messages ("Redis in Action" 6.5.2,
chat_book.py) over redis-py on the same Valkey, in the same run.

Data, built afresh for every measured fetch (a fetch consumes it): CHATS chats of two
members, the user and a peer; the peer sent UNREAD messages and has seen them all, the
user none. So a fetch returns CHATS x UNREAD messages, marks them seen and deletes
them all (every member has seen them): the same work for both.

  time         Concord: FetchPending through the sync generated stub until the
               stream ends (the server writes the seen positions before it ends the
               stream), plus the time to the first message and the server's CPU;
               the book: until fetch_pending_messages returns. Medians over --reps,
               after one warm-up.
  round trips  counted by RoundTrips, a TCP proxy in the bench process in front of
               the same Valkey: a round trip starts when a client sends a command
               while it is owed no reply, i.e. it waited for every reply before
               sending more (a MULTI ... EXEC block, sent whole, counts once). It
               also parses each command's name. Concord's count
               comes from a second concord-server whose Redis URL is the proxy; the
               timed fetches go to a server (and a redis-py client) connected
               directly, so the proxy's forwarding never shows in the times.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence

import grpc
import hiredis
import redis

from concord.chat.v1 import chat_pb2 as pb
from concord.chat.v1 import chat_pb2_grpc
from concord_server.store.embedded_valkey import free_port

from ..harness import RedisServer, concord_server, cpu_seconds, redis_server
from ..report import Row, fmt
from . import Context
from . import chat_book as book
from .queue_cost import medians

SC = "chat-fetch"
CHATS, UNREAD = 100, 10


class RoundTrips:
    """A TCP proxy on 127.0.0.1 in front of a Redis port that counts, over all its
    connections, the commands clients send (by name) and their round trips."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = free_port()
        self.round_trips = 0
        self.commands: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="round-trips", daemon=True)

    def snapshot(self) -> tuple[int, Counter[str]]:
        return self.round_trips, Counter(self.commands)

    def since(self, before: tuple[int, Counter[str]]) -> tuple[int, Counter[str]]:
        """Round trips and commands since ``before`` (a snapshot)."""
        return self.round_trips - before[0], self.commands - before[1]

    def _run(self) -> None:
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        self._started.set()
        await self._stop.wait()
        server.close()
        connections = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in connections:
            t.cancel()
        await asyncio.gather(*connections, return_exceptions=True)

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        redis_r, redis_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        # Replies this connection's client is still waiting for; a transaction
        # (MULTI ... EXEC) is sent whole before any reply is read: one round trip,
        # even when a reply to its first commands comes back before its last leave.
        owed, in_multi = 0, False

        async def requests() -> None:
            nonlocal owed, in_multi
            parser = hiredis.Reader()
            while data := await client_r.read(1 << 20):
                parser.feed(data)
                while (command := parser.gets()) is not False:
                    name = command[0].decode().upper()
                    if not owed and not in_multi:
                        self.round_trips += 1
                    owed += 1
                    in_multi = name == "MULTI" or in_multi and name not in ("EXEC", "DISCARD")
                    self.commands[name] += 1
                redis_w.write(data)
                await redis_w.drain()
            redis_w.close()  # Redis then closes its side, which ends replies()

        async def replies() -> None:
            nonlocal owed
            parser = hiredis.Reader()
            while data := await redis_r.read(1 << 20):
                parser.feed(data)
                while parser.gets() is not False:
                    owed = max(0, owed - 1)
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        try:
            await asyncio.gather(requests(), replies())
        except (ConnectionError, OSError):
            redis_w.close()
            client_w.close()

    def __enter__(self) -> RoundTrips:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def _text(i: int) -> str:
    return f"message {i + 1} of {UNREAD}: see you at the usual place"


def _book_data(rds: RedisServer, users: Sequence[str]) -> None:
    conn = rds.client()
    for user in users:
        for c in range(CHATS):
            peer = f"{user}-peer{c}"
            book.put_chat(conn, f"{user}:{c}", {peer: UNREAD, user: 0}, [(peer, _text(i)) for i in range(UNREAD)])
    conn.close()


async def _concord_data(target: str, users: Sequence[str]) -> None:
    async def one(chats: chat_pb2_grpc.ChatServiceStub, user: str, c: int) -> None:
        chat_id, peer = f"bench:chat-fetch:{user}:{c}", f"{user}-peer{c}"
        await chats.CreateChat(pb.CreateChatRequest(sender=peer, recipients=[user], message=_text(0),
                                                    chat_id=chat_id), timeout=30)
        for i in range(1, UNREAD):
            await chats.SendMessage(pb.SendMessageRequest(chat_id=chat_id, sender=peer, body=_text(i)), timeout=30)
        await chats.Ack(pb.AckRequest(recipient=peer, chat_id=chat_id, up_to_id=UNREAD), timeout=30)

    async with grpc.aio.insecure_channel(target) as channel:
        chats = chat_pb2_grpc.ChatServiceStub(channel)
        await asyncio.gather(*(one(chats, user, c) for user in users for c in range(CHATS)))


def _check(n: int, what: str) -> None:
    if n != CHATS * UNREAD:
        raise RuntimeError(f"{what} gave {n} messages, not {CHATS * UNREAD}")


def _concord_fetch(chats: chat_pb2_grpc.ChatServiceStub, user: str, ps) -> dict:
    """FetchPending (sync stub) until the stream ends: seconds, seconds to the first
    message, and the server's CPU meanwhile."""
    cpu0, t0 = cpu_seconds(ps), time.perf_counter()
    first, n = math.nan, 0
    for resp in chats.FetchPending(pb.FetchPendingRequest(recipient=user), timeout=30):
        if not n:
            first = time.perf_counter() - t0
        n += len(resp.messages)
    out = {"s": time.perf_counter() - t0, "first_s": first, "server_cpu_s": cpu_seconds(ps) - cpu0}
    _check(n, f"FetchPending for {user}")
    return out


def _book_fetch(conn: redis.Redis, user: str) -> dict:
    t0 = time.perf_counter()
    pending = book.fetch_pending_messages(conn, user)
    out = {"s": time.perf_counter() - t0}
    _check(sum(len(messages) for _, messages in pending), f"fetch_pending_messages for {user}")
    return out


def _measure(prefix: str, put_data: Callable[[Sequence[str]], None], fetch: Callable[[object, str], dict],
             timed: object, counted: object, proxy: RoundTrips, reps: int) -> list[dict]:
    """Per repetition, after one warm-up, each on fresh data: a fetch through ``timed``
    (connected directly) for its figures, and one through ``counted`` (behind the
    proxy) for its round trips and commands."""
    out = []
    for rep in range(-1, reps):
        users = f"{prefix}t{rep}", f"{prefix}c{rep}"
        put_data(users)
        r = fetch(timed, users[0])
        before = proxy.snapshot()
        fetch(counted, users[1])
        r["round_trips"], commands = proxy.since(before)
        if rep >= 0:
            out.append({**r, "commands": dict(commands)})
    return out


def run(ctx: Context) -> tuple[list[Row], dict]:
    with redis_server(ctx.tmp) as rds, RoundTrips(rds.port) as proxy, \
            concord_server(rds.url, ctx.tmp, profile_to=ctx.profile(SC)) as srv, \
            concord_server(f"redis://127.0.0.1:{proxy.port}", ctx.tmp) as behind_proxy, \
            grpc.insecure_channel(srv.target) as a, grpc.insecure_channel(behind_proxy.target) as b, \
            rds.client() as direct, redis.Redis(host="127.0.0.1", port=proxy.port, client_name="bench") as via_proxy:
        runs = {
            "concord": _measure("c", lambda users: asyncio.run(_concord_data(srv.target, users)),
                                lambda stub, user: _concord_fetch(stub, user, srv.ps),
                                chat_pb2_grpc.ChatServiceStub(a), chat_pb2_grpc.ChatServiceStub(b), proxy, ctx.reps),
            "book": _measure("b", lambda users: _book_data(rds, users), _book_fetch, direct, via_proxy, proxy,
                             ctx.reps),
        }
    return _rows(runs), {"chats": CHATS, "unread": UNREAD, "reps": ctx.reps, "runs": runs}


def _commands(counts: dict[str, int]) -> str:
    parts = ", ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
    return f"{sum(counts.values())} commands: {parts}"


def _rows(runs: dict[str, list[dict]]) -> list[Row]:
    c = {k: medians(runs["concord"], k) for k in ("s", "first_s", "server_cpu_s", "round_trips")}
    b = {k: medians(runs["book"], k) for k in ("s", "round_trips")}
    return [
        Row(SC, "Concord FetchPending (sync stub, stream drained): time", c["s"][0], "s", runs=c["s"][1],
            note=f"1 user, {CHATS} chats x {UNREAD} unread = {CHATS * UNREAD} messages, one per stream response; "
                 f"first after {fmt(c['first_s'][0], 's')}; server CPU {fmt(c['server_cpu_s'][0], 's')}"),
        Row(SC, "Concord FetchPending: Redis round trips", c["round_trips"][0], "", runs=c["round_trips"][1],
            note=_commands(runs["concord"][0]["commands"])),
        Row(SC, "book fetch_pending_messages (sync redis-py): time", b["s"][0], "s", baseline=c["s"][0],
            baseline_label="Concord", runs=b["s"][1], note="same data, same Valkey"),
        Row(SC, "book fetch_pending_messages: Redis round trips", b["round_trips"][0], "", baseline=c["round_trips"][0],
            baseline_label="Concord", runs=b["round_trips"][1], note=_commands(runs["book"][0]["commands"])),
    ]

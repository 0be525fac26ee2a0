"""Pull-based group chat (the book's multi-recipient messaging), with live delivery.

A chat's members, messages and counters share one hash tag; each change is one
script (lua/chat_*.lua): sending appends and enforces retention, and moving a
member's seen position deletes what every member has seen, in the same step. No
lock, no WATCH.

A user's list of chats is an index in the user's own slot (a different slot from
its chats on a cluster), so it cannot change in the same script as a chat. It is
written first when someone joins (create, join) and last when they leave, and every
read checks membership in the chat itself: a crash in between leaves, at worst, an
index entry that reads ignore, never a member who cannot see a chat.

Each chat publishes every message on its shard channel, and each user's index its
changes: chat_feeds.py turns them into live streams. A message whose body has at
most ``carry_bytes`` bytes (CARRY_BYTES) travels whole in the publish, so the servers
of its subscribers hand it on without reading it back; a bigger one publishes only
its id, and they read it (pub/sub output buffers stay small whatever the bodies).
A leave publishes "leave <user>" there too (lua/include/chat_common.lua has the
formats).

Imports no grpc: api/chat.py maps its errors to status codes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..errors import ChatExists, ChatFull, ChatNotFound, NotAMember
from ..keys import ChatKeys, KeySpace
from ..store.client import command
from ..store.reply_shapes import Codes, Either, INT, STR, Seq, Tagged, Tup
from ..store.scripts import Commands, script
from ..statuses import CHAT, CREATE
from .listing import note, scan_names

# Each script's reply, by name: the shape is checked, then decoded here and only here.


class SentReply(NamedTuple):
    status: int  # chat_create: CREATE.*; chat_send: CHAT.*
    message_id: int = 0
    sent_ms: int = 0


class ReadReply(NamedTuple):
    status: int  # CHAT.OK or CHAT.NO_SUCH_CHAT
    last: int = 0
    first: int = 0
    seen: list[int] = []  # per user asked about: its seen id, -1 if not a member
    messages: list[tuple[int, str, str, str]] = []  # (id, sender, body, sent ms), in id order


class MemberReply(NamedTuple):
    status: int  # CHAT.*
    value: int = 0  # ack, join: the member's seen id; leave: 1 if the chat was deleted


def _read_reply(r: list[Any]) -> ReadReply:
    if r[0] != CHAT.OK:
        return ReadReply(r[0])
    k = r[3]
    flat = r[4 + k:]  # grouped by zip over slices (no per-message Python step)
    return ReadReply(r[0], r[1], r[2], r[4:4 + k], list(zip(flat[::4], flat[1::4], flat[2::4], flat[3::4])))


_CREATE = script("chat_create.lua", Tagged({CREATE.TAKEN: Tup(), CREATE.CREATED: Tup(INT, INT)}),
                 decode=lambda r: SentReply(*r))
_SEND = script("chat_send.lua", Tagged({CHAT.NO_SUCH_CHAT: Tup(), CHAT.NOT_A_MEMBER: Tup(), CHAT.OK: Tup(INT, INT)}),
               decode=lambda r: SentReply(*r))
_READ = script("chat_read.lua",
               Tagged({CHAT.NO_SUCH_CHAT: Tup(), CHAT.OK: Seq(INT, INT, INT, each=(Either(INT, STR),))}),
               decode=_read_reply)
_MEMBER = script("chat_member.lua", Tagged({CHAT.NO_SUCH_CHAT: Tup(), CHAT.NOT_A_MEMBER: Tup(), CHAT.FULL: Tup(),
                                            CHAT.OK: Tup(INT)}),
                 decode=lambda r: MemberReply(*r))
_INDEX = script("chat_index.lua", Codes(0, 1))
_SEEN = script("chat_seen.lua", INT)
_SUMMARY = script("chat_summary.lua", Either(Tup(), Seq(INT, INT, INT, INT, INT, each=(STR, INT))))

SCRIPTS = (_CREATE, _SEND, _READ, _MEMBER, _INDEX, _SEEN, _SUMMARY)

CARRY_BYTES = 16 * 1024  # bodies up to this size travel whole in the send's publish
READ_BATCH = 500  # messages per chat per read; a stream reads again while a chat has more
READ_BYTES = 1024 * 1024  # and message bytes: a read stops after the message that reaches this


@dataclass(frozen=True)
class Message:
    chat_id: str
    message_id: int
    sender: str
    body: str
    sent_ms: int


@dataclass(frozen=True)
class Batch:
    """Consecutive messages of one chat, in id order: what a stream sends at once."""

    chat_id: str
    messages: list[Message]
    shared: bool = field(default=False, compare=False)  # one object that several streams send (chat_feeds)


@dataclass(frozen=True)
class Gap:
    """Unseen messages of chat_id were dropped by retention; the next is first_available_id."""

    chat_id: str
    first_available_id: int


class CaughtUp:
    """Subscribe's marker between the pending messages and the live ones."""


CAUGHT_UP = CaughtUp()
Event = Batch | Gap | CaughtUp


@dataclass(frozen=True)
class ChatView:
    chat_id: str
    seen: int
    last_id: int
    first_id: int  # oldest kept; last_id + 1 when none is
    messages: list[Message]

    @property
    def unread(self) -> int:
        return self.last_id - max(self.seen, self.first_id - 1)


@dataclass(frozen=True)
class ChatSummary:
    """One chat as the web console shows it (chat_summary.lua)."""

    chat_id: str
    last_id: int
    first_id: int  # oldest kept; last_id + 1 when none is
    kept: int  # messages kept
    kept_bytes: int  # their bodies' bytes
    member_count: int
    members: list[tuple[str, int]]  # (user, seen id), furthest behind first

    def unread(self, seen: int) -> int:
        return self.last_id - max(seen, self.first_id - 1)

    def missed(self, seen: int) -> int:
        """Messages the member never saw that retention dropped (a gap it will be told of)."""
        return max(0, self.first_id - 1 - seen)


class Chats:
    """A chat's data: members, messages, seen positions. Streams: chat_feeds.Feeds."""

    def __init__(self, redis: Commands, keyspace: KeySpace, *,
                 max_messages: int = 10_000, max_bytes: int = 16 * 1024 * 1024, max_members: int = 1000,
                 carry_bytes: int = CARRY_BYTES) -> None:
        self._redis = redis
        self._keys = keyspace
        self._retention = (max_messages, max_bytes)
        self._max_members = max_members
        self._carry_bytes = carry_bytes

    def _run(self, s, k: ChatKeys, *args: object):
        return s.run(self._redis, k.keys, [k.channel, *self._retention, *args])

    async def _index(self, user: str, action: str, chat_id: str) -> None:
        u = self._keys.user(user)
        await _INDEX(self._redis, [u.chats], [u.channel, action, chat_id])

    async def create(self, sender: str, recipients: Sequence[str], body: str, chat_id: str | None) -> tuple[str, int]:
        """A chat of sender + recipients with the sender's first message: (chat id, message id)."""
        members = list(dict.fromkeys([sender, *recipients]))
        # A taken id is refused before the members' indexes are written, so a refused
        # create leaves nothing behind (only a create racing this check can leave an
        # index entry, which reads ignore).
        if chat_id and await command(self._redis, "EXISTS", self._keys.chat(chat_id).meta):
            raise ChatExists(f"chat {chat_id!r} exists already", chat_id=chat_id)
        while True:
            cid = chat_id or str(await command(self._redis, "INCR", self._keys.chat_ids))
            await asyncio.gather(*(self._index(m, "add", cid) for m in members))
            reply = await self._run(_CREATE, self._keys.chat(cid), sender, body, *members)
            if reply.status == CREATE.CREATED:
                await note(self._redis, self._keys, "chat", cid)
                return cid, reply.message_id
            if chat_id:
                raise ChatExists(f"chat {chat_id!r} exists already", chat_id=chat_id)
            # A user-chosen id took this number: take the next one.

    async def send(self, chat_id: str, sender: str, body: str) -> tuple[int, int]:
        """(message id, sent ms on the Redis clock)."""
        reply = await self._run(_SEND, self._keys.chat(chat_id), sender, body, self._carry_bytes)
        _check(reply.status, chat_id, sender)
        return reply.message_id, reply.sent_ms

    async def read_for(self, chat_id: str, users: Sequence[str], after: int, count: int = READ_BATCH
                       ) -> list[ChatView | None]:
        """Each user's view of the chat, with up to count messages (and about READ_BYTES)
        after ``after`` or after the user's seen id, whichever is later (one script for all of them);
        None for a user who is not a member or when the chat is gone."""
        reply = await self._run(_READ, self._keys.chat(chat_id), after, count, READ_BYTES, *users)
        if reply.status != CHAT.OK:
            return [None] * len(users)
        last, first = reply.last, reply.first
        messages = [Message(chat_id, int(message_id), sender, body, int(sent_ms))
                    for message_id, sender, body, sent_ms in reply.messages]
        return [None if seen < 0 else ChatView(chat_id, seen, last, first,
                                                [m for m in messages if m.message_id > max(after, seen)])
                for seen in reply.seen]

    async def read(self, chat_id: str, user: str, after: int = -1, count: int = READ_BATCH) -> ChatView | None:
        """The member's view and up to count messages after ``after`` or its seen id,
        whichever is later; None when the chat is gone or user is not a member."""
        return (await self.read_for(chat_id, [user], after, count))[0]

    async def write_seen(self, chat_id: str, seen: dict[str, int]) -> int:
        """Moves several members' seen positions at once (auto acks); returns how many moved."""
        return await self._run(_SEEN, self._keys.chat(chat_id), *[x for pair in seen.items() for x in pair])

    async def members(self, chat_id: str) -> list[str]:
        k = self._keys.chat(chat_id)
        members = await command(self._redis, "ZRANGE", k.members, 0, -1)
        if not members:
            raise ChatNotFound(f"chat {chat_id!r} does not exist", chat_id=chat_id)
        return members

    @property
    def retention(self) -> tuple[int, int]:
        """(most messages, most body bytes) a chat keeps: this server's settings."""
        return self._retention

    async def summary(self, chat_id: str, members: int) -> ChatSummary | None:
        """The chat's positions, what it keeps, and its first ``members`` (at most 50)
        members, furthest behind first; None when it is gone. One bounded script that
        writes nothing; the web console's read."""
        r = await self._run(_SUMMARY, self._keys.chat(chat_id), members)
        if not r:
            return None
        return ChatSummary(chat_id, r[0], r[1], r[2], r[3], r[4], [(r[i], r[i + 1]) for i in range(5, len(r), 2)])

    async def names(self, page_token: str, count: int) -> tuple[list[str], str]:
        """A page of all chats' ids (listing.scan_names)."""
        return await scan_names(self._redis, self._keys, "chat", page_token, count)

    async def chats_of(self, user: str) -> list[str]:
        return sorted(await command(self._redis, "SMEMBERS", self._keys.user(user).chats))

    async def ack(self, user: str, chat_id: str, up_to: int) -> int:
        """Marks messages up to up_to seen; returns the member's seen id."""
        reply = await self._run(_MEMBER, self._keys.chat(chat_id), "ack", user, up_to)
        _check(reply.status, chat_id, user)
        return reply.value

    async def join(self, chat_id: str, user: str) -> int:
        """Adds the member at the latest message; returns its seen id."""
        await self._index(user, "add", chat_id)
        reply = await self._run(_MEMBER, self._keys.chat(chat_id), "join", user, self._max_members)
        if reply.status in (CHAT.NO_SUCH_CHAT, CHAT.FULL):
            await self._index(user, "remove", chat_id)
        if reply.status == CHAT.FULL:
            raise ChatFull(f"chat {chat_id!r} has {self._max_members} members already", chat_id=chat_id)
        _check(reply.status, chat_id, user)
        return reply.value

    async def leave(self, chat_id: str, user: str) -> bool:
        """Removes the member; True when it was the last and the chat is deleted."""
        reply = await self._run(_MEMBER, self._keys.chat(chat_id), "leave", user, 0)
        if reply.status != CHAT.NOT_A_MEMBER:  # gone or left: either way it is no chat of theirs
            await self._index(user, "remove", chat_id)
        _check(reply.status, chat_id, user)
        return reply.value == 1

    async def views(self, user: str, chats: Iterable[str], cursors: dict[str, int] | None = None,
                    count: int = READ_BATCH) -> list[ChatView]:
        """The user's chats read together: the reads go out in one pipelined write."""
        cursors = cursors or {}
        views = await asyncio.gather(*(self.read(c, user, cursors.get(c, -1), count) for c in chats))
        return [v for v in views if v is not None]

    async def history(self, chat_id: str, before: int, after: int, limit: int) -> list[Message]:
        """Kept messages: the newest below ``before`` (if set, newest first), else the
        oldest above ``after``."""
        k = self._keys.chat(chat_id)
        if not await command(self._redis, "EXISTS", k.meta):
            raise ChatNotFound(f"chat {chat_id!r} does not exist", chat_id=chat_id)
        if before:
            entries = await command(self._redis, "XREVRANGE", k.msgs, f"({before}-0", "-", "COUNT", limit)
        else:
            entries = await command(self._redis, "XRANGE", k.msgs, f"({after}-0", "+", "COUNT", limit)
        return [_message(chat_id, entry_id, fields) for entry_id, fields in entries]


def _check(status: int, chat_id: str, user: str) -> None:
    if status == CHAT.NO_SUCH_CHAT:
        raise ChatNotFound(f"chat {chat_id!r} does not exist", chat_id=chat_id)
    if status == CHAT.NOT_A_MEMBER:
        raise NotAMember(f"{user!r} is not a member of chat {chat_id!r}", chat_id=chat_id, user=user)


def _message(chat_id: str, entry_id: str, fields: list[str] | dict[str, str]) -> Message:
    f = fields if isinstance(fields, dict) else dict(zip(fields[::2], fields[1::2]))
    return Message(chat_id, int(entry_id.split("-")[0]), f["s"], f["b"], int(f["t"]))

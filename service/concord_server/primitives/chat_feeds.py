"""Chat streams: FetchPending and Subscribe, on top of primitives/chat.py.

A stream keeps a cursor per chat: the last message it delivered. It sends a chat's
new messages as one Batch (split at BATCH_BYTES), and a Batch counts as delivered
when the stream asks for the next item (gRPC has written it), so one in flight when
the stream is cut is sent again: at least once, never lost. In auto-ack mode every
delivery is also written back as the member's seen position.

Live delivery. A subscriber listens on broadcast doorbells to its user channel and
to each of its chats' channels. A send publishes the message itself on the chat's
channel when its body is small (chat.CARRY_BYTES; else only its id), so the servers
of the chat's subscribers deliver it from what they heard, without reading it
back: one Redis round trip and one script fewer between send and delivery. A
stream hands on a message it heard only when both hold:

- contiguity: its cursor in that chat is exactly the message's id - 1 (ids are
  sequential per chat), so nothing between was skipped. Anything else (a publish
  missed on a reconnect or while the stream was switching channels, a message too
  big to travel, a cursor behind) makes it read the chat after its cursor, as it
  did for every message before, and what it heard up to what the read returned is
  dropped (id <= cursor: never twice in one stream);
- membership: a read made since the stream last had reason to doubt it found the
  user a member. A leave publishes "leave <user>" on the chat's channel, in order
  with the messages, and every (re)subscription confirmation rings; either revokes
  the chat's direct delivery and bumps its epoch, and only a read issued after the
  last revocation (same epoch when it returns) grants it again. So a message sent
  after the user left is never handed on from pub/sub, even if the leave's notice
  was lost: the confirmation that follows a lost notice revokes first.

A server process does the per-chat work once for all of its local streams: a heard
message is parsed once into one Message and one Batch shared by every local
subscriber (api/chat.py builds its response once too); reads that streams want in
the same event-loop turn share one script call (all their users' seen ids and the
messages after the lowest cursor); auto acks noted in one turn are written with one
script per chat.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field

from ..errors import Unavailable
from ..keys import KeySpace
from ..wakeups.doorbells import Doorbells
from .chat import CAUGHT_UP, Batch, Chats, ChatView, Event, Gap, Message

log = logging.getLogger(__name__)

BATCH_BYTES = 1024 * 1024  # a Batch's bodies stay well under the gRPC message limit
SEEN_DELAY = 0.002  # auto acks wait this long to be written together
LIVE_WAIT = 30.0  # a subscriber's doorbell wait, re-armed until the stream ends

Delivered = Callable[[str, int], None]


class Feeds:
    def __init__(self, chats: Chats, keyspace: KeySpace, doorbells: Doorbells) -> None:
        self._chats = chats
        self._keys = keyspace
        self._bells = doorbells
        self._reads = _SharedReads(chats)
        self._seen = _SeenWriter(chats, 0.0)  # FetchPending: written in the turn after (before its next read)
        self._live_seen = _SeenWriter(chats, SEEN_DELAY)  # Subscribe: a moment later, a chat's streams at once
        self._heard: tuple[str, str, Heard] | None = None  # (data, chat, decoded): the last message heard

    def _delivered(self, user: str, auto_ack: bool, live: bool = False) -> Delivered:
        if not auto_ack:
            return lambda chat_id, upto: None
        writer = self._live_seen if live else self._seen
        return lambda chat_id, upto: writer.note(chat_id, user, upto)

    def decode(self, chat_id: str, data: str) -> Heard:
        """What a chat's channel said, decoded once per message for all local streams
        (a doorbell hands the same data to each of them in turn)."""
        last = self._heard
        if last is not None and last[0] is data and last[1] == chat_id:
            return last[2]
        heard = _decode(chat_id, data)
        self._heard = (data, chat_id, heard)
        return heard

    async def fetch_pending(self, user: str) -> AsyncIterator[Event]:
        """Every unseen message across the user's chats, marked seen as delivered."""
        async for event in self._drain(user, await self._chats.chats_of(user), {}, self._delivered(user, True)):
            yield event

    async def subscribe(self, user: str, auto_ack: bool) -> AsyncIterator[Event]:
        """The pending messages, CAUGHT_UP, then live ones until the caller stops."""
        cursors: dict[str, int] = {}
        delivered = self._delivered(user, auto_ack, live=True)
        user_channel = self._keys.user(user).channel
        chats = await self._chats.chats_of(user)
        async for event in self._drain(user, chats, cursors, delivered):
            yield event
        yield CAUGHT_UP
        while True:
            live = _Live(self, user, {self._keys.chat(c).channel: c for c in chats})
            async with self._bells.watch([user_channel, *live.channels], hear=live.hear) as watch:
                watch.arm()
                # The user's chats again, now that a join or leave rings this watch: one
                # made while the last watch was being replaced rang nobody. If the set
                # moved meanwhile, listen again, to the new one.
                latest = await self._chats.chats_of(user)
                if set(latest) == set(chats):
                    live.stale.update(chats)  # all: whatever came before these doorbells listened
                    async for event in self._listen(user, live, watch, cursors, delivered):
                        yield event
                    latest = await self._chats.chats_of(user)
            for gone in set(chats) - set(latest):
                cursors.pop(gone, None)
            chats = latest

    async def _listen(self, user: str, live: _Live, watch, cursors: dict[str, int],
                      delivered: Delivered) -> AsyncIterator[Event]:
        """One watch's live delivery, until the user's channel rings (a join or leave)."""
        user_channel = self._keys.user(user).channel
        while True:
            # Rings first, each time round, before the inbox: a confirmation that rang
            # while this stream was busy (at a yield) may follow lost messages, a leave's
            # notice among them, so what was heard since must wait for a read.
            rung = watch.arm()  # before looking: what rings or is heard from now on wakes the wait
            if user_channel in rung:
                return  # joined or left a chat: listen again, to the new set
            for channel in rung:  # confirmations (maybe after missed messages), safety rings
                if (chat_id := live.channels.get(channel)) is not None:
                    live.revoke(chat_id)
                    live.stale.add(chat_id)
            if live.stale:
                dirty, live.stale = live.stale, set()
                async for event in self._drain(user, dirty, cursors, delivered, live):
                    yield event
                continue
            if live.inbox:
                chat_id = next(iter(live.inbox))
                heard = live.inbox.pop(chat_id)
                cursor = cursors.get(chat_id)
                if cursor is None or chat_id not in live.direct:
                    live.stale.add(chat_id)  # membership unconfirmed: read
                    continue
                batches, rest = _contiguous(chat_id, heard, cursor)
                for batch in batches:
                    yield batch
                    cursor = cursors[chat_id] = batch.messages[-1].message_id
                    delivered(chat_id, cursor)
                if rest:
                    live.stale.add(chat_id)  # a gap: read after the cursor
                continue
            await watch.wait(LIVE_WAIT)

    async def _drain(self, user: str, chats: Collection[str], cursors: dict[str, int],
                     delivered: Delivered, live: _Live | None = None) -> AsyncIterator[Event]:
        """Everything after the cursors in these chats, chat by chat, reading again
        while a chat has more; moves a cursor once its event has been taken. With
        ``live``, a read that finds the user a member grants the chat direct delivery
        unless it was revoked while the read was out."""
        todo = list(chats)
        while todo:
            epochs = [live.epochs.get(c, 0) for c in todo] if live is not None else []
            views = await asyncio.gather(*(self._reads.read(c, user, cursors.get(c, -1)) for c in todo))
            if live is not None:
                for chat_id, epoch, view in zip(todo, epochs, views):
                    if view is None:
                        live.direct.discard(chat_id)
                    elif live.epochs.get(chat_id, 0) == epoch:
                        live.direct.add(chat_id)
            more = []
            for view in views:
                if view is None:
                    continue  # left, or the chat is gone
                start = cursor = max(cursors.get(view.chat_id, view.seen), view.seen)
                if cursor + 1 < view.first_id <= view.last_id:
                    yield Gap(view.chat_id, view.first_id)
                    cursor = cursors[view.chat_id] = view.first_id - 1
                    delivered(view.chat_id, cursor)
                for batch in _batches(view, cursor):
                    yield batch
                    cursor = cursors[view.chat_id] = batch.messages[-1].message_id
                    delivered(view.chat_id, cursor)
                cursors[view.chat_id] = cursor  # at least the seen position, even when nothing was new: a
                # message heard whole later must follow it (a rejoin sets seen past what came while away)
                if start < cursor < view.last_id:  # the read's count or bytes ran out before the end
                    more.append(view.chat_id)
            todo = more

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for seen positions still being written; at shutdown."""
        await asyncio.gather(self._seen.drain(timeout), self._live_seen.drain(timeout))


# A chat channel's message, decoded: a message that travelled whole (as a one-message
# Batch), the user named by a leave, or None (a doorbell: read the chat).
Heard = Batch | str | None


def _decode(chat_id: str, data: str) -> Heard:
    """lua/include/chat_common.lua's formats: "<id> <ms> <sender>\\n<body>", "<id>",
    "leave <user>"."""
    head, newline, body = data.partition("\n")
    if newline:
        try:
            message_id, sent_ms, sender = head.split(" ", 2)
            return Batch(chat_id, [Message(chat_id, int(message_id), sender, body, int(sent_ms))], shared=True)
        except ValueError:
            log.warning("unexpected message on chat %s: %r", chat_id, head)
            return None
    if head.startswith("leave "):
        return head[6:]
    return None


class _Live:
    """One Subscribe stream's state while it listens to a set of chats: what it heard,
    which chats it may deliver from what it hears, and which it must read."""

    __slots__ = ("_feeds", "user", "channels", "inbox", "direct", "epochs", "stale")

    def __init__(self, feeds: Feeds, user: str, channels: dict[str, str]) -> None:
        self._feeds = feeds
        self.user = user
        self.channels = channels  # chat channel -> chat id
        self.inbox: dict[str, list[Batch]] = {}  # chat id -> messages heard whole, in publish order
        self.direct: set[str] = set()  # chats a read since the last revocation found the user a member of
        self.epochs: dict[str, int] = {}  # chat id -> revocations so far
        self.stale: set[str] = set()  # chats to read

    def hear(self, channel: str, data: str) -> bool | None:
        """The doorbell's look at a message first (Doorbells.watch's ``hear``)."""
        chat_id = self.channels.get(channel)
        if chat_id is None:
            return False  # the user channel: ring
        heard = self._feeds.decode(chat_id, data)
        if isinstance(heard, Batch):
            self.inbox.setdefault(chat_id, []).append(heard)
        elif heard is None:
            self.stale.add(chat_id)  # only its id: read it
        elif heard == self.user:
            self.revoke(chat_id)  # left: nothing heard from here on is the user's without a read
            self.stale.add(chat_id)
        else:
            return None  # another member left
        return True

    def revoke(self, chat_id: str) -> None:
        self.direct.discard(chat_id)
        self.epochs[chat_id] = self.epochs.get(chat_id, 0) + 1
        self.inbox.pop(chat_id, None)


def _contiguous(chat_id: str, heard: list[Batch], cursor: int) -> tuple[list[Batch], bool]:
    """The batches to send of what a stream heard in one chat: the run that starts
    right after its cursor (one heard Batch as it is, several merged up to
    BATCH_BYTES); and whether anything past a gap is left (to be read)."""
    run: list[Message] = []
    expect = cursor + 1
    for batch in heard:
        m = batch.messages[0]
        if m.message_id < expect:
            continue  # delivered already (a read returned it)
        if m.message_id != expect:
            return _split(chat_id, run, heard), True
        run.append(m)
        expect += 1
    return _split(chat_id, run, heard), False


def _split(chat_id: str, run: list[Message], heard: list[Batch]) -> list[Batch]:
    if len(run) == 1:
        return [next(b for b in heard if b.messages[0] is run[0])]  # the Batch shared by all local streams
    out: list[Batch] = []
    size = 0
    for m in run:
        if not out or size + len(m.body) > BATCH_BYTES:
            out.append(Batch(chat_id, []))
            size = 0
        out[-1].messages.append(m)
        size += len(m.body)
    return out


def _batches(view: ChatView, cursor: int) -> list[Batch]:
    out: list[Batch] = []
    size = 0
    for m in view.messages:
        if m.message_id <= cursor:
            continue
        if not out or size + len(m.body) > BATCH_BYTES:
            out.append(Batch(view.chat_id, []))
            size = 0
        out[-1].messages.append(m)
        size += len(m.body)
    return out


@dataclass
class _Pending:
    waiters: list[tuple[str, int, asyncio.Future[ChatView | None]]] = field(default_factory=list)


class _SharedReads:
    """Reads of one chat asked for in the same event-loop turn go out as one script."""

    def __init__(self, chats: Chats) -> None:
        self._chats = chats
        self._pending: dict[str, _Pending] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def read(self, chat_id: str, user: str, after: int) -> asyncio.Future[ChatView | None]:
        loop = asyncio.get_running_loop()
        pending = self._pending.get(chat_id)
        if pending is None:
            pending = self._pending[chat_id] = _Pending()
            loop.call_soon(self._send, chat_id)  # after every stream woken this turn has asked
        fut: asyncio.Future[ChatView | None] = loop.create_future()
        pending.waiters.append((user, after, fut))
        return fut

    def _send(self, chat_id: str) -> None:
        task = asyncio.get_running_loop().create_task(self._read(chat_id, self._pending.pop(chat_id).waiters))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _read(self, chat_id: str, waiters: list[tuple[str, int, asyncio.Future[ChatView | None]]]) -> None:
        users = list(dict.fromkeys(user for user, _, _ in waiters))
        lowest = min(after for _, after, _ in waiters)
        try:
            views = dict(zip(users, await self._chats.read_for(chat_id, users, lowest)))
        except Exception as exc:
            for _, _, fut in waiters:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for user, after, fut in waiters:
            if not fut.done():
                view = views[user]
                fut.set_result(None if view is None else ChatView(
                    view.chat_id, view.seen, view.last_id, view.first_id,
                    [m for m in view.messages if m.message_id > after]))


class _SeenWriter:
    """Auto acks: the seen positions noted within ``delay`` (at least the rest of the
    event-loop turn) are written with one script per chat, retried while Redis is
    unreachable (for up to a minute). A chat's local Subscribe streams confirm one
    message at slightly different moments (each when gRPC has written it), so their
    writer waits a moment to gather them into one write; FetchPending's does not (a
    fetch right after finds its messages seen)."""

    def __init__(self, chats: Chats, delay: float) -> None:
        self._chats = chats
        self._delay = delay
        self._due: dict[str, dict[str, int]] = {}
        self._flushing: asyncio.Task[None] | None = None

    def note(self, chat_id: str, user: str, seen: int) -> None:
        users = self._due.setdefault(chat_id, {})
        users[user] = max(seen, users.get(user, -1))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(self._delay)  # let the other streams' notes join in
        loop = asyncio.get_running_loop()
        give_up_at, delay = loop.time() + 60, 0.05
        while self._due:
            due, self._due = self._due, {}
            results = await asyncio.gather(*(self._chats.write_seen(c, seen) for c, seen in due.items()),
                                           return_exceptions=True)
            for (chat_id, seen), result in zip(due.items(), results):
                if isinstance(result, Unavailable) and loop.time() < give_up_at:
                    for user, upto in seen.items():  # again, after a pause
                        users = self._due.setdefault(chat_id, {})
                        users[user] = max(upto, users.get(user, -1))
                elif isinstance(result, BaseException):
                    log.warning("could not write seen positions in chat %s: %s", chat_id, result)
            if any(isinstance(r, Unavailable) for r in results):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)

    async def drain(self, timeout: float) -> None:
        if self._flushing is not None and not self._flushing.done():
            await asyncio.wait({self._flushing}, timeout=timeout)

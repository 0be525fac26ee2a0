"""Chat streams: FetchPending and Subscribe, on top of primitives/chat.py.

A stream keeps a cursor per chat: the last message it delivered. It sends a chat's
new messages as one Batch (split at BATCH_BYTES), and a Batch counts as delivered
when the stream asks for the next item (gRPC has written it), so one in flight when
the stream is cut is sent again: at least once, never lost. In auto-ack mode every
delivery is also written back as the member's seen position.

A server process does the per-chat work once for all of its local streams:

- reads: streams that want the same chat in one event-loop turn share one script
  call (all their users' seen ids and the messages after the lowest cursor), so a
  message to a chat with ten local subscribers costs one read, not ten;
- seen positions: auto acks noted in one turn are written with one script per chat.

Live delivery: a subscriber waits on broadcast doorbells for its user channel and
each of its chats' channels, re-reads just the chats that rang, and re-reads all of
them whenever it (re)subscribes, so a message sent through any replica, even one
published while the subscriber was switching channels, arrives at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Collection
from dataclasses import dataclass, field

from ..errors import Unavailable
from ..keys import KeySpace
from ..wakeups.doorbells import Doorbells
from .chat import CAUGHT_UP, Batch, Chats, ChatView, Event, Gap

log = logging.getLogger(__name__)

BATCH_BYTES = 1024 * 1024  # a Batch's bodies stay well under the gRPC message limit
LIVE_WAIT = 30.0  # a subscriber's doorbell wait, re-armed until the stream ends

Delivered = Callable[[str, int], None]


class Feeds:
    def __init__(self, chats: Chats, keyspace: KeySpace, doorbells: Doorbells) -> None:
        self._chats = chats
        self._keys = keyspace
        self._bells = doorbells
        self._reads = _SharedReads(chats)
        self._seen = _SeenWriter(chats)

    def _delivered(self, user: str, auto_ack: bool) -> Delivered:
        if not auto_ack:
            return lambda chat_id, upto: None
        return lambda chat_id, upto: self._seen.note(chat_id, user, upto)

    async def fetch_pending(self, user: str) -> AsyncIterator[Event]:
        """Every unseen message across the user's chats, marked seen as delivered."""
        async for event in self._drain(user, await self._chats.chats_of(user), {}, self._delivered(user, True)):
            yield event

    async def subscribe(self, user: str, auto_ack: bool) -> AsyncIterator[Event]:
        """The pending messages, CAUGHT_UP, then live ones until the caller stops."""
        cursors: dict[str, int] = {}
        delivered = self._delivered(user, auto_ack)
        user_channel = self._keys.user(user).channel
        chats = await self._chats.chats_of(user)
        async for event in self._drain(user, chats, cursors, delivered):
            yield event
        yield CAUGHT_UP
        while True:
            channels = {self._keys.chat(c).channel: c for c in chats}
            async with self._bells.watch([user_channel, *channels]) as watch:
                watch.arm()
                dirty: Collection[str] = chats  # all: whatever came before these doorbells listened
                while True:
                    async for event in self._drain(user, dirty, cursors, delivered):
                        yield event
                    await watch.wait(LIVE_WAIT)
                    rung = watch.arm()
                    if user_channel in rung:
                        break  # joined or left a chat: listen again, to the new set
                    dirty = [channels[ch] for ch in rung if ch in channels]
            known, chats = set(chats), await self._chats.chats_of(user)
            for gone in known - set(chats):
                cursors.pop(gone, None)

    async def _drain(self, user: str, chats: Collection[str], cursors: dict[str, int],
                     delivered: Delivered) -> AsyncIterator[Event]:
        """Everything after the cursors in these chats, chat by chat, reading again
        while a chat has more; moves a cursor once its event has been taken."""
        todo = list(chats)
        while todo:
            views = await asyncio.gather(*(self._reads.read(c, user, cursors.get(c, -1)) for c in todo))
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
                cursors.setdefault(view.chat_id, cursor)
                if start < cursor < view.last_id:  # the read's count or bytes ran out before the end
                    more.append(view.chat_id)
            todo = more

    async def drain(self, timeout: float) -> None:
        """Waits (up to timeout) for seen positions still being written; at shutdown."""
        await self._seen.drain(timeout)


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
    """Auto acks: the seen positions noted in one event-loop turn are written with one
    script per chat, retried while Redis is unreachable (for up to a minute)."""

    def __init__(self, chats: Chats) -> None:
        self._chats = chats
        self._due: dict[str, dict[str, int]] = {}
        self._flushing: asyncio.Task[None] | None = None

    def note(self, chat_id: str, user: str, seen: int) -> None:
        users = self._due.setdefault(chat_id, {})
        users[user] = max(seen, users.get(user, -1))
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(0)  # let the rest of this turn's notes join in
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

"""Group chat for the Python client: the book's pull messaging, with live delivery.

    chat_id = client.chat.create("joe", ["jeff", "jenny"], "Hi all")
    client.chat.send(chat_id, "jeff", "Hey Joe")

    for msg in client.chat.fetch_pending("jenny"):     # everything unseen, marked seen
        print(msg.chat_id, msg.sender, msg.body)

    with client.chat.subscribe("jenny") as feed:       # pending first, then live
        for msg in feed:
            print(msg.body)

A one-to-one mailbox is a chat of two. Message ids increase within a chat. With
``ack_mode="explicit"`` a subscription marks nothing seen until ``ack()``, so a
client that crashes gets its unacknowledged messages again. A ``Gap`` says messages
were dropped by the chat's retention before this member saw them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import grpc

from ._convert import when
from .chat.v1 import chat_pb2 as pb
from .errors import from_rpc_error


@dataclass(frozen=True)
class ChatMessage:
    chat_id: str
    message_id: int
    sender: str
    body: str
    sent_at: datetime


@dataclass(frozen=True)
class Gap:
    """Messages of chat_id this member had not seen were dropped; the next is first_available_id."""

    chat_id: str
    first_available_id: int


@dataclass(frozen=True)
class ChatSummary:
    chat_id: str
    unread: int
    last_message_id: int
    seen_id: int


_ACK_MODES = {"auto": pb.ACK_MODE_AUTO, "explicit": pb.ACK_MODE_EXPLICIT}
# Calls a repeat cannot change (acks only move forward): retried on UNAVAILABLE
# (concord._retry). SendMessage and CreateChat are not: a repeat could send twice.
_SAFE = frozenset({"Ack", "ListChats", "GetHistory"})


def _message(m: pb.ChatMessage) -> ChatMessage:
    return ChatMessage(m.chat_id, m.message_id, m.sender, m.body, when(m.sent_at))


def _items(resp: Any) -> list[ChatMessage | Gap]:
    """A stream response's messages (consecutive, of one chat) or its gap."""
    items: list[ChatMessage | Gap] = [_message(m) for m in resp.messages]
    if resp.HasField("gap"):
        items.append(Gap(resp.gap.chat_id, resp.gap.first_available_id))
    return items


def _history_request(chat_id: str, before: int | None, after: int | None, limit: int) -> pb.GetHistoryRequest:
    return pb.GetHistoryRequest(chat_id=chat_id, before_id=before or 0, after_id=after or 0, limit=limit)


def _subscribe_request(recipient: str, ack_mode: str) -> pb.SubscribeRequest:
    if ack_mode not in _ACK_MODES:
        raise ValueError("ack_mode must be 'auto' or 'explicit'")
    return pb.SubscribeRequest(recipient=recipient, ack_mode=_ACK_MODES[ack_mode])


def _summaries(resp: pb.ListChatsResponse) -> list[ChatSummary]:
    return [ChatSummary(c.chat_id, c.unread, c.last_message_id, c.seen_id) for c in resp.chats]


class Subscription:
    """Iterate for ChatMessage and Gap items; ``caught_up`` turns true once the
    pending messages are through and live ones follow. close() ends it."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._caught_up = threading.Event()

    @property
    def caught_up(self) -> bool:
        return self._caught_up.is_set()

    def wait_caught_up(self, timeout: float | None = None) -> bool:
        return self._caught_up.wait(timeout)

    def __iter__(self) -> Iterator[ChatMessage | Gap]:
        try:
            for resp in self._call:
                yield from _items(resp)
                if resp.caught_up:
                    self._caught_up.set()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(exc) from None

    def close(self) -> None:
        self._call.cancel()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Chat:
    """``client.chat`` on a synchronous Client."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._rpc = client._service("chat")

    def _call(self, method: str, request: Any) -> Any:
        call = self._rpc.call_safe if method in _SAFE else self._rpc.call
        return call(method, request)

    def create(self, sender: str, recipients: Sequence[str], message: str, *, chat_id: str = "") -> str:
        """A chat of sender + recipients, opened by the sender's message; returns its id."""
        return self._call("CreateChat", pb.CreateChatRequest(sender=sender, recipients=list(recipients),
                                                              message=message, chat_id=chat_id)).chat_id

    def send(self, chat_id: str, sender: str, body: str) -> int:
        """Appends a message; returns its id. PermissionDenied (NOT_A_MEMBER) for non-members."""
        return self._call("SendMessage", pb.SendMessageRequest(chat_id=chat_id, sender=sender, body=body)).message_id

    def fetch_pending(self, recipient: str) -> Iterator[ChatMessage | Gap]:
        """Every unseen message across the recipient's chats, marked seen as received."""
        call = self._rpc.open("FetchPending")(pb.FetchPendingRequest(recipient=recipient), timeout=self.client.timeout)
        try:
            for resp in call:
                yield from _items(resp)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def subscribe(self, recipient: str, *, ack_mode: str = "auto") -> Subscription:
        """Pending messages, then live ones, until close()."""
        return Subscription(self._rpc.open("Subscribe")(_subscribe_request(recipient, ack_mode)))

    def ack(self, recipient: str, chat_id: str, up_to_id: int) -> None:
        self._call("Ack", pb.AckRequest(recipient=recipient, chat_id=chat_id, up_to_id=up_to_id))

    def join(self, chat_id: str, user: str) -> int:
        """Joins at the latest message; returns that message's id."""
        return self._call("JoinChat", pb.JoinChatRequest(chat_id=chat_id, user=user)).seen_id

    def leave(self, chat_id: str, user: str) -> bool:
        """Leaves; True when the chat was deleted because nobody is left."""
        return self._call("LeaveChat", pb.LeaveChatRequest(chat_id=chat_id, user=user)).chat_deleted

    def list_chats(self, user: str) -> list[ChatSummary]:
        return _summaries(self._call("ListChats", pb.ListChatsRequest(user=user)))

    def history(self, chat_id: str, *, before: int | None = None, after: int | None = None,
                limit: int = 100) -> list[ChatMessage]:
        """Kept messages: newest first below ``before``, else oldest first above ``after``."""
        resp = self._call("GetHistory", _history_request(chat_id, before, after, limit))
        return [_message(m) for m in resp.messages]


class AsyncSubscription:
    """``async for`` ChatMessage and Gap items; see Subscription."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._caught_up = asyncio.Event()

    @property
    def caught_up(self) -> bool:
        return self._caught_up.is_set()

    async def wait_caught_up(self) -> None:
        await self._caught_up.wait()

    async def __aiter__(self) -> AsyncIterator[ChatMessage | Gap]:
        try:
            async for resp in self._call:
                for item in _items(resp):
                    yield item
                if resp.caught_up:
                    self._caught_up.set()
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise from_rpc_error(exc) from None

    def close(self) -> None:
        self._call.cancel()

    async def __aenter__(self) -> AsyncSubscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncChat:
    """``client.chat`` on an AsyncClient: Chat's methods, awaited."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._rpc = client._service("chat")

    async def _call(self, method: str, request: Any) -> Any:
        call = self._rpc.call_safe if method in _SAFE else self._rpc.call
        return await call(method, request)

    async def create(self, sender: str, recipients: Sequence[str], message: str, *, chat_id: str = "") -> str:
        return (await self._call("CreateChat", pb.CreateChatRequest(
            sender=sender, recipients=list(recipients), message=message, chat_id=chat_id))).chat_id

    async def send(self, chat_id: str, sender: str, body: str) -> int:
        return (await self._call("SendMessage", pb.SendMessageRequest(chat_id=chat_id, sender=sender,
                                                                       body=body))).message_id

    async def fetch_pending(self, recipient: str) -> AsyncIterator[ChatMessage | Gap]:
        call = self._rpc.open("FetchPending")(pb.FetchPendingRequest(recipient=recipient), timeout=self.client.timeout)
        try:
            async for resp in call:
                for item in _items(resp):
                    yield item
        except grpc.RpcError as exc:
            raise from_rpc_error(exc) from None

    def subscribe(self, recipient: str, *, ack_mode: str = "auto") -> AsyncSubscription:
        return AsyncSubscription(self._rpc.open("Subscribe")(_subscribe_request(recipient, ack_mode)))

    async def ack(self, recipient: str, chat_id: str, up_to_id: int) -> None:
        await self._call("Ack", pb.AckRequest(recipient=recipient, chat_id=chat_id, up_to_id=up_to_id))

    async def join(self, chat_id: str, user: str) -> int:
        return (await self._call("JoinChat", pb.JoinChatRequest(chat_id=chat_id, user=user))).seen_id

    async def leave(self, chat_id: str, user: str) -> bool:
        return (await self._call("LeaveChat", pb.LeaveChatRequest(chat_id=chat_id, user=user))).chat_deleted

    async def list_chats(self, user: str) -> list[ChatSummary]:
        return _summaries(await self._call("ListChats", pb.ListChatsRequest(user=user)))

    async def history(self, chat_id: str, *, before: int | None = None, after: int | None = None,
                      limit: int = 100) -> list[ChatMessage]:
        resp = await self._call("GetHistory", _history_request(chat_id, before, after, limit))
        return [_message(m) for m in resp.messages]

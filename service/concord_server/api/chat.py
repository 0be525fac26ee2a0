"""concord.chat.v1.ChatService: validates requests, calls primitives.chat, maps errors."""

from __future__ import annotations

from collections.abc import AsyncIterator

from concord.chat.v1 import chat_pb2 as pb
from concord.chat.v1 import chat_pb2_grpc

from ..config import Settings
from ..errors import ChatFull, InvalidArgument
from ..primitives.chat import Batch, Chats, Event, Gap, Message
from ..primitives.chat_feeds import Feeds
from . import validation as v
from .convert import name_page, timestamp
from .status import rpc

DEFAULT_HISTORY = 100
MAX_HISTORY = 1000


def message(m: Message) -> pb.ChatMessage:
    return pb.ChatMessage(chat_id=m.chat_id, message_id=m.message_id, sender=m.sender, body=m.body,
                          sent_at=timestamp(m.sent_ms))


# Responses by Batch: a message heard whole from pub/sub is one Batch object that every
# local subscriber of its chat sends (Batch.shared), so its response is built once per
# server, not once per stream. Keyed by id(batch) with the batch held (so the id is
# not reused while cached); the oldest go first. Its bodies are small (chat.CARRY_BYTES).
_SHARED: dict[tuple[int, type], tuple[Batch, object]] = {}
_SHARED_MAX = 256


def event(e: Event, kind: type[pb.FetchPendingResponse] | type[pb.SubscribeResponse]):
    if isinstance(e, Batch):
        key = (id(e), kind)
        hit = _SHARED.get(key)
        if hit is not None and hit[0] is e:
            return hit[1]
        response = kind(messages=[message(m) for m in e.messages])
        if e.shared:
            if len(_SHARED) >= _SHARED_MAX:
                del _SHARED[next(iter(_SHARED))]
            _SHARED[key] = (e, response)
        return response
    if isinstance(e, Gap):
        return kind(gap=pb.Gap(chat_id=e.chat_id, first_available_id=e.first_available_id))
    return pb.SubscribeResponse(caught_up=True)


class ChatServicer(chat_pb2_grpc.ChatServiceServicer):
    def __init__(self, chats: Chats, feeds: Feeds, settings: Settings) -> None:
        self._chats = chats
        self._feeds = feeds
        self._max_body = settings.chat_max_message_size
        self._max_members = settings.chat_max_members

    def _body(self, body: str, field: str) -> str:
        if len(body) * 4 > self._max_body and len(body.encode("utf-8", "surrogatepass")) > self._max_body:
            raise InvalidArgument(f"{field} is longer than {self._max_body} bytes", field=field)
        return body

    @rpc
    async def ListAllChats(self, request: pb.ListAllChatsRequest, context) -> pb.ListAllChatsResponse:
        return await name_page(self._chats.names, request, pb.ListAllChatsResponse)

    @rpc
    async def CreateChat(self, request: pb.CreateChatRequest, context) -> pb.CreateChatResponse:
        sender = v.name(request.sender, "sender")
        recipients = [v.name(r, "recipients") for r in request.recipients]
        if not recipients:
            raise InvalidArgument("recipients must name at least one other member", field="recipients")
        if len({sender, *recipients}) > self._max_members:
            raise ChatFull(f"a chat has at most {self._max_members} members", field="recipients")
        body = self._body(request.message, "message")
        chat_id = v.name(request.chat_id, "chat_id") if request.chat_id else None
        cid, mid = await self._chats.create(sender, recipients, body, chat_id)
        return pb.CreateChatResponse(chat_id=cid, message_id=mid)

    @rpc
    async def SendMessage(self, request: pb.SendMessageRequest, context) -> pb.SendMessageResponse:
        chat_id, sender = v.name(request.chat_id, "chat_id"), v.name(request.sender, "sender")
        mid, sent = await self._chats.send(chat_id, sender, self._body(request.body, "body"))
        return pb.SendMessageResponse(message_id=mid, sent_at=timestamp(sent))

    @rpc
    async def FetchPending(self, request: pb.FetchPendingRequest, context) -> AsyncIterator[pb.FetchPendingResponse]:
        async for e in self._feeds.fetch_pending(v.name(request.recipient, "recipient")):
            yield event(e, pb.FetchPendingResponse)

    @rpc
    async def Subscribe(self, request: pb.SubscribeRequest, context) -> AsyncIterator[pb.SubscribeResponse]:
        recipient = v.name(request.recipient, "recipient")
        if request.ack_mode not in (pb.ACK_MODE_UNSPECIFIED, pb.ACK_MODE_AUTO, pb.ACK_MODE_EXPLICIT):
            raise InvalidArgument("ack_mode must be ACK_MODE_AUTO or ACK_MODE_EXPLICIT", field="ack_mode")
        async for e in self._feeds.subscribe(recipient, auto_ack=request.ack_mode != pb.ACK_MODE_EXPLICIT):
            yield event(e, pb.SubscribeResponse)

    @rpc
    async def Ack(self, request: pb.AckRequest, context) -> pb.AckResponse:
        await self._chats.ack(v.name(request.recipient, "recipient"), v.name(request.chat_id, "chat_id"),
                              request.up_to_id)
        return pb.AckResponse()

    @rpc
    async def JoinChat(self, request: pb.JoinChatRequest, context) -> pb.JoinChatResponse:
        chat_id, user = v.name(request.chat_id, "chat_id"), v.name(request.user, "user")
        return pb.JoinChatResponse(seen_id=await self._chats.join(chat_id, user))

    @rpc
    async def LeaveChat(self, request: pb.LeaveChatRequest, context) -> pb.LeaveChatResponse:
        deleted = await self._chats.leave(v.name(request.chat_id, "chat_id"), v.name(request.user, "user"))
        return pb.LeaveChatResponse(chat_deleted=deleted)

    @rpc
    async def ListChats(self, request: pb.ListChatsRequest, context) -> pb.ListChatsResponse:
        user = v.name(request.user, "user")
        views = await self._chats.views(user, await self._chats.chats_of(user), count=0)
        return pb.ListChatsResponse(chats=[
            pb.ChatSummary(chat_id=c.chat_id, unread=c.unread, last_message_id=c.last_id, seen_id=c.seen)
            for c in views])

    @rpc
    async def GetHistory(self, request: pb.GetHistoryRequest, context) -> pb.GetHistoryResponse:
        chat_id = v.name(request.chat_id, "chat_id")
        if request.before_id and request.after_id:
            raise InvalidArgument("set before_id or after_id, not both", field="before_id")
        limit = v.count(request.limit or DEFAULT_HISTORY, "limit", minimum=1, maximum=MAX_HISTORY)
        messages = await self._chats.history(chat_id, request.before_id, request.after_id, limit)
        return pb.GetHistoryResponse(messages=[message(m) for m in messages])

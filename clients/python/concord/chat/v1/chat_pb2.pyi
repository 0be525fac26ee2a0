import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AckMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACK_MODE_UNSPECIFIED: _ClassVar[AckMode]
    ACK_MODE_AUTO: _ClassVar[AckMode]
    ACK_MODE_EXPLICIT: _ClassVar[AckMode]
ACK_MODE_UNSPECIFIED: AckMode
ACK_MODE_AUTO: AckMode
ACK_MODE_EXPLICIT: AckMode

class CreateChatRequest(_message.Message):
    __slots__ = ("sender", "recipients", "message", "chat_id")
    SENDER_FIELD_NUMBER: _ClassVar[int]
    RECIPIENTS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    sender: str
    recipients: _containers.RepeatedScalarFieldContainer[str]
    message: str
    chat_id: str
    def __init__(self, sender: _Optional[str] = ..., recipients: _Optional[_Iterable[str]] = ..., message: _Optional[str] = ..., chat_id: _Optional[str] = ...) -> None: ...

class CreateChatResponse(_message.Message):
    __slots__ = ("chat_id", "message_id")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    message_id: int
    def __init__(self, chat_id: _Optional[str] = ..., message_id: _Optional[int] = ...) -> None: ...

class SendMessageRequest(_message.Message):
    __slots__ = ("chat_id", "sender", "body")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    sender: str
    body: str
    def __init__(self, chat_id: _Optional[str] = ..., sender: _Optional[str] = ..., body: _Optional[str] = ...) -> None: ...

class SendMessageResponse(_message.Message):
    __slots__ = ("message_id", "sent_at")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    message_id: int
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, message_id: _Optional[int] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ChatMessage(_message.Message):
    __slots__ = ("chat_id", "message_id", "sender", "body", "sent_at")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    message_id: int
    sender: str
    body: str
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, chat_id: _Optional[str] = ..., message_id: _Optional[int] = ..., sender: _Optional[str] = ..., body: _Optional[str] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Gap(_message.Message):
    __slots__ = ("chat_id", "first_available_id")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_AVAILABLE_ID_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    first_available_id: int
    def __init__(self, chat_id: _Optional[str] = ..., first_available_id: _Optional[int] = ...) -> None: ...

class FetchPendingRequest(_message.Message):
    __slots__ = ("recipient",)
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    recipient: str
    def __init__(self, recipient: _Optional[str] = ...) -> None: ...

class FetchPendingResponse(_message.Message):
    __slots__ = ("messages", "gap")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    gap: Gap
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ("recipient", "ack_mode")
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    ACK_MODE_FIELD_NUMBER: _ClassVar[int]
    recipient: str
    ack_mode: AckMode
    def __init__(self, recipient: _Optional[str] = ..., ack_mode: _Optional[_Union[AckMode, str]] = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ("messages", "gap", "caught_up")
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    gap: Gap
    caught_up: bool
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ..., gap: _Optional[_Union[Gap, _Mapping]] = ..., caught_up: _Optional[bool] = ...) -> None: ...

class AckRequest(_message.Message):
    __slots__ = ("recipient", "chat_id", "up_to_id")
    RECIPIENT_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    UP_TO_ID_FIELD_NUMBER: _ClassVar[int]
    recipient: str
    chat_id: str
    up_to_id: int
    def __init__(self, recipient: _Optional[str] = ..., chat_id: _Optional[str] = ..., up_to_id: _Optional[int] = ...) -> None: ...

class AckResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JoinChatRequest(_message.Message):
    __slots__ = ("chat_id", "user")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    user: str
    def __init__(self, chat_id: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class JoinChatResponse(_message.Message):
    __slots__ = ("seen_id",)
    SEEN_ID_FIELD_NUMBER: _ClassVar[int]
    seen_id: int
    def __init__(self, seen_id: _Optional[int] = ...) -> None: ...

class LeaveChatRequest(_message.Message):
    __slots__ = ("chat_id", "user")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    user: str
    def __init__(self, chat_id: _Optional[str] = ..., user: _Optional[str] = ...) -> None: ...

class LeaveChatResponse(_message.Message):
    __slots__ = ("chat_deleted",)
    CHAT_DELETED_FIELD_NUMBER: _ClassVar[int]
    chat_deleted: bool
    def __init__(self, chat_deleted: _Optional[bool] = ...) -> None: ...

class ListChatsRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: str
    def __init__(self, user: _Optional[str] = ...) -> None: ...

class ChatSummary(_message.Message):
    __slots__ = ("chat_id", "unread", "last_message_id", "seen_id")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    UNREAD_FIELD_NUMBER: _ClassVar[int]
    LAST_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SEEN_ID_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    unread: int
    last_message_id: int
    seen_id: int
    def __init__(self, chat_id: _Optional[str] = ..., unread: _Optional[int] = ..., last_message_id: _Optional[int] = ..., seen_id: _Optional[int] = ...) -> None: ...

class ListChatsResponse(_message.Message):
    __slots__ = ("chats",)
    CHATS_FIELD_NUMBER: _ClassVar[int]
    chats: _containers.RepeatedCompositeFieldContainer[ChatSummary]
    def __init__(self, chats: _Optional[_Iterable[_Union[ChatSummary, _Mapping]]] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("chat_id", "before_id", "after_id", "limit")
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    BEFORE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    chat_id: str
    before_id: int
    after_id: int
    limit: int
    def __init__(self, chat_id: _Optional[str] = ..., before_id: _Optional[int] = ..., after_id: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("messages",)
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[ChatMessage]
    def __init__(self, messages: _Optional[_Iterable[_Union[ChatMessage, _Mapping]]] = ...) -> None: ...

class ListAllChatsRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListAllChatsResponse(_message.Message):
    __slots__ = ("names", "next_page_token")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, names: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

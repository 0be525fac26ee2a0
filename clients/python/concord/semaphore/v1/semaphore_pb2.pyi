import datetime

from concord.error.v1 import error_pb2 as _error_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HoldEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    HOLD_EVENT_UNSPECIFIED: _ClassVar[HoldEvent]
    HOLD_EVENT_ACQUIRED: _ClassVar[HoldEvent]
    HOLD_EVENT_REFRESHED: _ClassVar[HoldEvent]
    HOLD_EVENT_LOST: _ClassVar[HoldEvent]
HOLD_EVENT_UNSPECIFIED: HoldEvent
HOLD_EVENT_ACQUIRED: HoldEvent
HOLD_EVENT_REFRESHED: HoldEvent
HOLD_EVENT_LOST: HoldEvent

class SessionRequest(_message.Message):
    __slots__ = ("id", "acquire", "release", "refresh", "cancel")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    id: int
    acquire: AcquireRequest
    release: ReleaseRequest
    refresh: RefreshRequest
    cancel: int
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ..., refresh: _Optional[_Union[RefreshRequest, _Mapping]] = ..., cancel: _Optional[int] = ...) -> None: ...

class SessionResponse(_message.Message):
    __slots__ = ("id", "acquire", "release", "refresh", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    REFRESH_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    acquire: AcquireResponse
    release: ReleaseResponse
    refresh: RefreshResponse
    error: _error_pb2.Error
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., refresh: _Optional[_Union[RefreshResponse, _Mapping]] = ..., error: _Optional[_Union[_error_pb2.Error, _Mapping]] = ...) -> None: ...

class SetLimitRequest(_message.Message):
    __slots__ = ("name", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class SetLimitResponse(_message.Message):
    __slots__ = ("previous_limit",)
    PREVIOUS_LIMIT_FIELD_NUMBER: _ClassVar[int]
    previous_limit: int
    def __init__(self, previous_limit: _Optional[int] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ("name", "limit", "permits", "ttl", "wait_timeout", "owner")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    permits: int
    ttl: _duration_pb2.Duration
    wait_timeout: _duration_pb2.Duration
    owner: str
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ..., permits: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ("acquired", "permit_id", "expires_at")
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    PERMIT_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    permit_id: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, acquired: _Optional[bool] = ..., permit_id: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("name", "permit_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMIT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    permit_id: str
    def __init__(self, name: _Optional[str] = ..., permit_id: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RefreshRequest(_message.Message):
    __slots__ = ("name", "permit_id", "ttl")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMIT_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    name: str
    permit_id: str
    ttl: _duration_pb2.Duration
    def __init__(self, name: _Optional[str] = ..., permit_id: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RefreshResponse(_message.Message):
    __slots__ = ("expires_at",)
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class Holder(_message.Message):
    __slots__ = ("permit_id", "owner", "permits", "ttl_remaining")
    PERMIT_ID_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    TTL_REMAINING_FIELD_NUMBER: _ClassVar[int]
    permit_id: str
    owner: str
    permits: int
    ttl_remaining: _duration_pb2.Duration
    def __init__(self, permit_id: _Optional[str] = ..., owner: _Optional[str] = ..., permits: _Optional[int] = ..., ttl_remaining: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("limit", "held", "holders", "waiters")
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    limit: int
    held: int
    holders: _containers.RepeatedCompositeFieldContainer[Holder]
    waiters: int
    def __init__(self, limit: _Optional[int] = ..., held: _Optional[int] = ..., holders: _Optional[_Iterable[_Union[Holder, _Mapping]]] = ..., waiters: _Optional[int] = ...) -> None: ...

class HoldRequest(_message.Message):
    __slots__ = ("name", "limit", "permits", "ttl", "wait_timeout", "owner")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    permits: int
    ttl: _duration_pb2.Duration
    wait_timeout: _duration_pb2.Duration
    owner: str
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ..., permits: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ...) -> None: ...

class HoldResponse(_message.Message):
    __slots__ = ("event", "permit_id", "expires_at")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    PERMIT_ID_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    event: HoldEvent
    permit_id: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, event: _Optional[_Union[HoldEvent, str]] = ..., permit_id: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListSemaphoresRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListSemaphoresResponse(_message.Message):
    __slots__ = ("names", "next_page_token")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, names: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

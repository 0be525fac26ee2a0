import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LeadEvent(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LEAD_EVENT_UNSPECIFIED: _ClassVar[LeadEvent]
    LEAD_EVENT_ELECTED: _ClassVar[LeadEvent]
    LEAD_EVENT_REFRESHED: _ClassVar[LeadEvent]
    LEAD_EVENT_LOST: _ClassVar[LeadEvent]
LEAD_EVENT_UNSPECIFIED: LeadEvent
LEAD_EVENT_ELECTED: LeadEvent
LEAD_EVENT_REFRESHED: LeadEvent
LEAD_EVENT_LOST: LeadEvent

class CampaignRequest(_message.Message):
    __slots__ = ("election", "candidate", "value", "ttl", "wait_timeout")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    election: str
    candidate: str
    value: bytes
    ttl: _duration_pb2.Duration
    wait_timeout: _duration_pb2.Duration
    def __init__(self, election: _Optional[str] = ..., candidate: _Optional[str] = ..., value: _Optional[bytes] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("elected", "term", "expires_at")
    ELECTED_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    elected: bool
    term: int
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, elected: _Optional[bool] = ..., term: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeadRequest(_message.Message):
    __slots__ = ("election", "candidate", "value", "ttl", "wait_timeout")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    election: str
    candidate: str
    value: bytes
    ttl: _duration_pb2.Duration
    wait_timeout: _duration_pb2.Duration
    def __init__(self, election: _Optional[str] = ..., candidate: _Optional[str] = ..., value: _Optional[bytes] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class LeadResponse(_message.Message):
    __slots__ = ("event", "term", "expires_at")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    event: LeadEvent
    term: int
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, event: _Optional[_Union[LeadEvent, str]] = ..., term: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("election",)
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    election: str
    def __init__(self, election: _Optional[str] = ...) -> None: ...

class Leadership(_message.Message):
    __slots__ = ("candidate", "value", "term", "expires_at")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    candidate: str
    value: bytes
    term: int
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, candidate: _Optional[str] = ..., value: _Optional[bytes] = ..., term: _Optional[int] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("leader", "candidates")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    leader: Leadership
    candidates: int
    def __init__(self, leader: _Optional[_Union[Leadership, _Mapping]] = ..., candidates: _Optional[int] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("election", "after")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    election: str
    after: int
    def __init__(self, election: _Optional[str] = ..., after: _Optional[int] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("leader", "position", "gap")
    LEADER_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    GAP_FIELD_NUMBER: _ClassVar[int]
    leader: Leadership
    position: int
    gap: bool
    def __init__(self, leader: _Optional[_Union[Leadership, _Mapping]] = ..., position: _Optional[int] = ..., gap: _Optional[bool] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ("election", "term", "value")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    election: str
    term: int
    value: bytes
    def __init__(self, election: _Optional[str] = ..., term: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RefreshRequest(_message.Message):
    __slots__ = ("election", "term", "ttl")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    election: str
    term: int
    ttl: _duration_pb2.Duration
    def __init__(self, election: _Optional[str] = ..., term: _Optional[int] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class RefreshResponse(_message.Message):
    __slots__ = ("expires_at",)
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("election", "term")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    election: str
    term: int
    def __init__(self, election: _Optional[str] = ..., term: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListElectionsRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ElectionSummary(_message.Message):
    __slots__ = ("election", "leader", "value_truncated", "candidates")
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    VALUE_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    election: str
    leader: Leadership
    value_truncated: bool
    candidates: int
    def __init__(self, election: _Optional[str] = ..., leader: _Optional[_Union[Leadership, _Mapping]] = ..., value_truncated: _Optional[bool] = ..., candidates: _Optional[int] = ...) -> None: ...

class ListElectionsResponse(_message.Message):
    __slots__ = ("elections", "next_page_token")
    ELECTIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    elections: _containers.RepeatedCompositeFieldContainer[ElectionSummary]
    next_page_token: str
    def __init__(self, elections: _Optional[_Iterable[_Union[ElectionSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

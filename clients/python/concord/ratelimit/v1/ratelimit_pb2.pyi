import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Algorithm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ALGORITHM_UNSPECIFIED: _ClassVar[Algorithm]
    ALGORITHM_GCRA: _ClassVar[Algorithm]
    ALGORITHM_TOKEN_BUCKET: _ClassVar[Algorithm]
    ALGORITHM_SLIDING_LOG: _ClassVar[Algorithm]
    ALGORITHM_SLIDING_WINDOW: _ClassVar[Algorithm]
    ALGORITHM_FIXED_WINDOW: _ClassVar[Algorithm]
    ALGORITHM_CONCURRENCY: _ClassVar[Algorithm]
ALGORITHM_UNSPECIFIED: Algorithm
ALGORITHM_GCRA: Algorithm
ALGORITHM_TOKEN_BUCKET: Algorithm
ALGORITHM_SLIDING_LOG: Algorithm
ALGORITHM_SLIDING_WINDOW: Algorithm
ALGORITHM_FIXED_WINDOW: Algorithm
ALGORITHM_CONCURRENCY: Algorithm

class Limit(_message.Message):
    __slots__ = ("algorithm", "rate", "period", "burst", "drain_over_limit")
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    DRAIN_OVER_LIMIT_FIELD_NUMBER: _ClassVar[int]
    algorithm: Algorithm
    rate: int
    period: _duration_pb2.Duration
    burst: int
    drain_over_limit: bool
    def __init__(self, algorithm: _Optional[_Union[Algorithm, str]] = ..., rate: _Optional[int] = ..., period: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., burst: _Optional[int] = ..., drain_over_limit: _Optional[bool] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("key", "limit", "hits")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: Limit
    hits: int
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ..., hits: _Optional[int] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("allowed", "remaining", "limit", "burst", "reset_after", "retry_after", "permit")
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    RESET_AFTER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    remaining: int
    limit: int
    burst: int
    reset_after: _duration_pb2.Duration
    retry_after: _duration_pb2.Duration
    permit: str
    def __init__(self, allowed: _Optional[bool] = ..., remaining: _Optional[int] = ..., limit: _Optional[int] = ..., burst: _Optional[int] = ..., reset_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., permit: _Optional[str] = ...) -> None: ...

class WaitRequest(_message.Message):
    __slots__ = ("key", "limit", "hits", "wait_timeout")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: Limit
    hits: int
    wait_timeout: _duration_pb2.Duration
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ..., hits: _Optional[int] = ..., wait_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class WaitResponse(_message.Message):
    __slots__ = ("allowed", "remaining", "limit", "burst", "reset_after", "retry_after", "permit")
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    RESET_AFTER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    remaining: int
    limit: int
    burst: int
    reset_after: _duration_pb2.Duration
    retry_after: _duration_pb2.Duration
    permit: str
    def __init__(self, allowed: _Optional[bool] = ..., remaining: _Optional[int] = ..., limit: _Optional[int] = ..., burst: _Optional[int] = ..., reset_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., retry_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., permit: _Optional[str] = ...) -> None: ...

class CheckManyRequest(_message.Message):
    __slots__ = ("checks", "all_or_none")
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    ALL_OR_NONE_FIELD_NUMBER: _ClassVar[int]
    checks: _containers.RepeatedCompositeFieldContainer[CheckRequest]
    all_or_none: bool
    def __init__(self, checks: _Optional[_Iterable[_Union[CheckRequest, _Mapping]]] = ..., all_or_none: _Optional[bool] = ...) -> None: ...

class CheckManyResponse(_message.Message):
    __slots__ = ("results", "allowed")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CheckResponse]
    allowed: bool
    def __init__(self, results: _Optional[_Iterable[_Union[CheckResponse, _Mapping]]] = ..., allowed: _Optional[bool] = ...) -> None: ...

class SetLimitRequest(_message.Message):
    __slots__ = ("key", "limit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: Limit
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ...) -> None: ...

class SetLimitResponse(_message.Message):
    __slots__ = ("previous",)
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    previous: Limit
    def __init__(self, previous: _Optional[_Union[Limit, _Mapping]] = ...) -> None: ...

class GetLimitRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class GetLimitResponse(_message.Message):
    __slots__ = ("limit",)
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    limit: Limit
    def __init__(self, limit: _Optional[_Union[Limit, _Mapping]] = ...) -> None: ...

class ResetRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class ResetResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("key", "permit")
    KEY_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    key: str
    permit: str
    def __init__(self, key: _Optional[str] = ..., permit: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: bool
    def __init__(self, released: _Optional[bool] = ...) -> None: ...

class DeleteLimitRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class DeleteLimitResponse(_message.Message):
    __slots__ = ("previous",)
    PREVIOUS_FIELD_NUMBER: _ClassVar[int]
    previous: Limit
    def __init__(self, previous: _Optional[_Union[Limit, _Mapping]] = ...) -> None: ...

class ListLimitsRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class LimitSummary(_message.Message):
    __slots__ = ("key", "limit", "remaining", "reset_after", "waiters")
    KEY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    RESET_AFTER_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    key: str
    limit: Limit
    remaining: int
    reset_after: _duration_pb2.Duration
    waiters: int
    def __init__(self, key: _Optional[str] = ..., limit: _Optional[_Union[Limit, _Mapping]] = ..., remaining: _Optional[int] = ..., reset_after: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., waiters: _Optional[int] = ...) -> None: ...

class ListLimitsResponse(_message.Message):
    __slots__ = ("limits", "next_page_token")
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[LimitSummary]
    next_page_token: str
    def __init__(self, limits: _Optional[_Iterable[_Union[LimitSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

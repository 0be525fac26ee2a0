from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SuggestOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUGGEST_ORDER_UNSPECIFIED: _ClassVar[SuggestOrder]
    SUGGEST_ORDER_NAME: _ClassVar[SuggestOrder]
    SUGGEST_ORDER_SCORE: _ClassVar[SuggestOrder]
SUGGEST_ORDER_UNSPECIFIED: SuggestOrder
SUGGEST_ORDER_NAME: SuggestOrder
SUGGEST_ORDER_SCORE: SuggestOrder

class AddRecentRequest(_message.Message):
    __slots__ = ("user", "contact")
    USER_FIELD_NUMBER: _ClassVar[int]
    CONTACT_FIELD_NUMBER: _ClassVar[int]
    user: str
    contact: str
    def __init__(self, user: _Optional[str] = ..., contact: _Optional[str] = ...) -> None: ...

class AddRecentResponse(_message.Message):
    __slots__ = ("size",)
    SIZE_FIELD_NUMBER: _ClassVar[int]
    size: int
    def __init__(self, size: _Optional[int] = ...) -> None: ...

class RemoveRecentRequest(_message.Message):
    __slots__ = ("user", "contact")
    USER_FIELD_NUMBER: _ClassVar[int]
    CONTACT_FIELD_NUMBER: _ClassVar[int]
    user: str
    contact: str
    def __init__(self, user: _Optional[str] = ..., contact: _Optional[str] = ...) -> None: ...

class RemoveRecentResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: _Optional[bool] = ...) -> None: ...

class SuggestRecentRequest(_message.Message):
    __slots__ = ("user", "prefix", "limit", "include_infix")
    USER_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_INFIX_FIELD_NUMBER: _ClassVar[int]
    user: str
    prefix: str
    limit: int
    include_infix: bool
    def __init__(self, user: _Optional[str] = ..., prefix: _Optional[str] = ..., limit: _Optional[int] = ..., include_infix: _Optional[bool] = ...) -> None: ...

class SuggestRecentResponse(_message.Message):
    __slots__ = ("contacts",)
    CONTACTS_FIELD_NUMBER: _ClassVar[int]
    contacts: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, contacts: _Optional[_Iterable[str]] = ...) -> None: ...

class NameEntry(_message.Message):
    __slots__ = ("name", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    score: float
    def __init__(self, name: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class AddNamesRequest(_message.Message):
    __slots__ = ("index", "names")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    index: str
    names: _containers.RepeatedCompositeFieldContainer[NameEntry]
    def __init__(self, index: _Optional[str] = ..., names: _Optional[_Iterable[_Union[NameEntry, _Mapping]]] = ...) -> None: ...

class AddNamesResponse(_message.Message):
    __slots__ = ("added",)
    ADDED_FIELD_NUMBER: _ClassVar[int]
    added: int
    def __init__(self, added: _Optional[int] = ...) -> None: ...

class RemoveNamesRequest(_message.Message):
    __slots__ = ("index", "names")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    index: str
    names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, index: _Optional[str] = ..., names: _Optional[_Iterable[str]] = ...) -> None: ...

class RemoveNamesResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class IncrementScoreRequest(_message.Message):
    __slots__ = ("index", "name", "delta")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    index: str
    name: str
    delta: float
    def __init__(self, index: _Optional[str] = ..., name: _Optional[str] = ..., delta: _Optional[float] = ...) -> None: ...

class IncrementScoreResponse(_message.Message):
    __slots__ = ("score",)
    SCORE_FIELD_NUMBER: _ClassVar[int]
    score: float
    def __init__(self, score: _Optional[float] = ...) -> None: ...

class SuggestRequest(_message.Message):
    __slots__ = ("index", "prefix", "limit", "order")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    index: str
    prefix: str
    limit: int
    order: SuggestOrder
    def __init__(self, index: _Optional[str] = ..., prefix: _Optional[str] = ..., limit: _Optional[int] = ..., order: _Optional[_Union[SuggestOrder, str]] = ...) -> None: ...

class Suggestion(_message.Message):
    __slots__ = ("name", "score")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    name: str
    score: float
    def __init__(self, name: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

class SuggestResponse(_message.Message):
    __slots__ = ("suggestions", "truncated")
    SUGGESTIONS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    suggestions: _containers.RepeatedCompositeFieldContainer[Suggestion]
    truncated: bool
    def __init__(self, suggestions: _Optional[_Iterable[_Union[Suggestion, _Mapping]]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class CountRequest(_message.Message):
    __slots__ = ("index", "prefix")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    index: str
    prefix: str
    def __init__(self, index: _Optional[str] = ..., prefix: _Optional[str] = ...) -> None: ...

class CountResponse(_message.Message):
    __slots__ = ("count",)
    COUNT_FIELD_NUMBER: _ClassVar[int]
    count: int
    def __init__(self, count: _Optional[int] = ...) -> None: ...

class ListIndexesRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class IndexSummary(_message.Message):
    __slots__ = ("index", "size")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    index: str
    size: int
    def __init__(self, index: _Optional[str] = ..., size: _Optional[int] = ...) -> None: ...

class ListIndexesResponse(_message.Message):
    __slots__ = ("indexes", "next_page_token")
    INDEXES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    indexes: _containers.RepeatedCompositeFieldContainer[IndexSummary]
    next_page_token: str
    def __init__(self, indexes: _Optional[_Iterable[_Union[IndexSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FileState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FILE_STATE_UNSPECIFIED: _ClassVar[FileState]
    FILE_STATE_UPLOADING: _ClassVar[FileState]
    FILE_STATE_COMPLETE: _ClassVar[FileState]
FILE_STATE_UNSPECIFIED: FileState
FILE_STATE_UPLOADING: FileState
FILE_STATE_COMPLETE: FileState

class UploadHeader(_message.Message):
    __slots__ = ("group", "sender", "name")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    group: str
    sender: str
    name: str
    def __init__(self, group: _Optional[str] = ..., sender: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class UploadRequest(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: UploadHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[UploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class UploadResponse(_message.Message):
    __slots__ = ("file_id", "size", "gzip", "message_id")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    GZIP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    size: int
    gzip: bool
    message_id: int
    def __init__(self, file_id: _Optional[str] = ..., size: _Optional[int] = ..., gzip: _Optional[bool] = ..., message_id: _Optional[int] = ...) -> None: ...

class DownloadRequest(_message.Message):
    __slots__ = ("file_id", "from_offset", "lines", "worker")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    from_offset: int
    lines: bool
    worker: str
    def __init__(self, file_id: _Optional[str] = ..., from_offset: _Optional[int] = ..., lines: _Optional[bool] = ..., worker: _Optional[str] = ...) -> None: ...

class DownloadResponse(_message.Message):
    __slots__ = ("data", "offset", "lines", "line_ends")
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    LINE_ENDS_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    offset: int
    lines: _containers.RepeatedScalarFieldContainer[bytes]
    line_ends: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, data: _Optional[bytes] = ..., offset: _Optional[int] = ..., lines: _Optional[_Iterable[bytes]] = ..., line_ends: _Optional[_Iterable[int]] = ...) -> None: ...

class MarkDoneRequest(_message.Message):
    __slots__ = ("file_id", "worker")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    worker: str
    def __init__(self, file_id: _Optional[str] = ..., worker: _Optional[str] = ...) -> None: ...

class MarkDoneResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: bool
    def __init__(self, deleted: _Optional[bool] = ...) -> None: ...

class FileInfo(_message.Message):
    __slots__ = ("file_id", "name", "size", "state", "gzip", "pending", "created_at", "downloads")
    FILE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GZIP_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DOWNLOADS_FIELD_NUMBER: _ClassVar[int]
    file_id: str
    name: str
    size: int
    state: FileState
    gzip: bool
    pending: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    downloads: _containers.RepeatedCompositeFieldContainer[DownloadProgress]
    def __init__(self, file_id: _Optional[str] = ..., name: _Optional[str] = ..., size: _Optional[int] = ..., state: _Optional[_Union[FileState, str]] = ..., gzip: _Optional[bool] = ..., pending: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., downloads: _Optional[_Iterable[_Union[DownloadProgress, _Mapping]]] = ...) -> None: ...

class DownloadProgress(_message.Message):
    __slots__ = ("worker", "offset", "lines", "updated_at")
    WORKER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LINES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    worker: str
    offset: int
    lines: bool
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, worker: _Optional[str] = ..., offset: _Optional[int] = ..., lines: _Optional[bool] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListFilesRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class ListFilesResponse(_message.Message):
    __slots__ = ("files", "held_bytes", "bound_bytes")
    FILES_FIELD_NUMBER: _ClassVar[int]
    HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    BOUND_BYTES_FIELD_NUMBER: _ClassVar[int]
    files: _containers.RepeatedCompositeFieldContainer[FileInfo]
    held_bytes: int
    bound_bytes: int
    def __init__(self, files: _Optional[_Iterable[_Union[FileInfo, _Mapping]]] = ..., held_bytes: _Optional[int] = ..., bound_bytes: _Optional[int] = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ("group", "sender")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    SENDER_FIELD_NUMBER: _ClassVar[int]
    group: str
    sender: str
    def __init__(self, group: _Optional[str] = ..., sender: _Optional[str] = ...) -> None: ...

class FinishResponse(_message.Message):
    __slots__ = ("message_id",)
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: int
    def __init__(self, message_id: _Optional[int] = ...) -> None: ...

class ListFileGroupsRequest(_message.Message):
    __slots__ = ("page_token", "page_size")
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    page_token: str
    page_size: int
    def __init__(self, page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class FileGroupSummary(_message.Message):
    __slots__ = ("group", "files", "held_bytes", "bound_bytes")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    BOUND_BYTES_FIELD_NUMBER: _ClassVar[int]
    group: str
    files: int
    held_bytes: int
    bound_bytes: int
    def __init__(self, group: _Optional[str] = ..., files: _Optional[int] = ..., held_bytes: _Optional[int] = ..., bound_bytes: _Optional[int] = ...) -> None: ...

class ListFileGroupsResponse(_message.Message):
    __slots__ = ("groups", "next_page_token")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[FileGroupSummary]
    next_page_token: str
    def __init__(self, groups: _Optional[_Iterable[_Union[FileGroupSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

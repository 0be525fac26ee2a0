from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CODE_UNSPECIFIED: _ClassVar[Code]
    CODE_CANCELLED: _ClassVar[Code]
    CODE_UNKNOWN: _ClassVar[Code]
    CODE_INVALID_ARGUMENT: _ClassVar[Code]
    CODE_DEADLINE_EXCEEDED: _ClassVar[Code]
    CODE_NOT_FOUND: _ClassVar[Code]
    CODE_ALREADY_EXISTS: _ClassVar[Code]
    CODE_PERMISSION_DENIED: _ClassVar[Code]
    CODE_RESOURCE_EXHAUSTED: _ClassVar[Code]
    CODE_FAILED_PRECONDITION: _ClassVar[Code]
    CODE_ABORTED: _ClassVar[Code]
    CODE_OUT_OF_RANGE: _ClassVar[Code]
    CODE_UNIMPLEMENTED: _ClassVar[Code]
    CODE_INTERNAL: _ClassVar[Code]
    CODE_UNAVAILABLE: _ClassVar[Code]
    CODE_DATA_LOSS: _ClassVar[Code]
    CODE_UNAUTHENTICATED: _ClassVar[Code]

class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REASON_UNSPECIFIED: _ClassVar[Reason]
    REASON_INTERNAL: _ClassVar[Reason]
    REASON_INVALID_ARGUMENT: _ClassVar[Reason]
    REASON_NOT_FOUND: _ClassVar[Reason]
    REASON_FAILED_PRECONDITION: _ClassVar[Reason]
    REASON_ALREADY_EXISTS: _ClassVar[Reason]
    REASON_PERMISSION_DENIED: _ClassVar[Reason]
    REASON_RESOURCE_EXHAUSTED: _ClassVar[Reason]
    REASON_UNAUTHENTICATED: _ClassVar[Reason]
    REASON_REDIS_UNAVAILABLE: _ClassVar[Reason]
    REASON_DEADLINE_EXCEEDED: _ClassVar[Reason]
    REASON_LOCK_NOT_HELD: _ClassVar[Reason]
    REASON_LOCK_WAIT_TIMEOUT: _ClassVar[Reason]
    REASON_PERMIT_NOT_HELD: _ClassVar[Reason]
    REASON_PERMITS_EXCEED_LIMIT: _ClassVar[Reason]
    REASON_SEMAPHORE_WAIT_TIMEOUT: _ClassVar[Reason]
    REASON_TASK_LEASE_NOT_HELD: _ClassVar[Reason]
    REASON_TASK_NOT_FOUND: _ClassVar[Reason]
    REASON_TASK_LEASED: _ClassVar[Reason]
    REASON_TASK_FINISHED: _ClassVar[Reason]
    REASON_SCHEDULE_NOT_FOUND: _ClassVar[Reason]
    REASON_SCHEDULE_EXISTS: _ClassVar[Reason]
    REASON_NOT_LEADER: _ClassVar[Reason]
    REASON_ELECTION_WAIT_TIMEOUT: _ClassVar[Reason]
    REASON_SEMAPHORE_LIMIT_MISMATCH: _ClassVar[Reason]
    REASON_DEADLOCK: _ClassVar[Reason]
    REASON_CHAT_NOT_FOUND: _ClassVar[Reason]
    REASON_CHAT_EXISTS: _ClassVar[Reason]
    REASON_NOT_A_MEMBER: _ClassVar[Reason]
    REASON_CHAT_FULL: _ClassVar[Reason]
    REASON_NAME_NOT_FOUND: _ClassVar[Reason]
    REASON_FILE_NOT_FOUND: _ClassVar[Reason]
    REASON_FILE_NOT_COMPLETE: _ClassVar[Reason]
    REASON_NOT_A_WORKER: _ClassVar[Reason]
    REASON_CORRUPT_FILE: _ClassVar[Reason]
    REASON_OFFSET_OUT_OF_RANGE: _ClassVar[Reason]
    REASON_LINE_TOO_LONG: _ClassVar[Reason]
    REASON_TOO_MANY_STREAMS: _ClassVar[Reason]
    REASON_TOO_MANY_BLOCKED_CALLS: _ClassVar[Reason]
    REASON_RATE_LIMITED: _ClassVar[Reason]
    REASON_REQUEST_TOO_LARGE: _ClassVar[Reason]
    REASON_STORAGE_FULL: _ClassVar[Reason]
    REASON_STORAGE_QUOTA_EXCEEDED: _ClassVar[Reason]
    REASON_REPLICATION_TIMEOUT: _ClassVar[Reason]
    REASON_RATE_LIMIT_MISMATCH: _ClassVar[Reason]
    REASON_RATE_LIMIT_NOT_FOUND: _ClassVar[Reason]
CODE_UNSPECIFIED: Code
CODE_CANCELLED: Code
CODE_UNKNOWN: Code
CODE_INVALID_ARGUMENT: Code
CODE_DEADLINE_EXCEEDED: Code
CODE_NOT_FOUND: Code
CODE_ALREADY_EXISTS: Code
CODE_PERMISSION_DENIED: Code
CODE_RESOURCE_EXHAUSTED: Code
CODE_FAILED_PRECONDITION: Code
CODE_ABORTED: Code
CODE_OUT_OF_RANGE: Code
CODE_UNIMPLEMENTED: Code
CODE_INTERNAL: Code
CODE_UNAVAILABLE: Code
CODE_DATA_LOSS: Code
CODE_UNAUTHENTICATED: Code
REASON_UNSPECIFIED: Reason
REASON_INTERNAL: Reason
REASON_INVALID_ARGUMENT: Reason
REASON_NOT_FOUND: Reason
REASON_FAILED_PRECONDITION: Reason
REASON_ALREADY_EXISTS: Reason
REASON_PERMISSION_DENIED: Reason
REASON_RESOURCE_EXHAUSTED: Reason
REASON_UNAUTHENTICATED: Reason
REASON_REDIS_UNAVAILABLE: Reason
REASON_DEADLINE_EXCEEDED: Reason
REASON_LOCK_NOT_HELD: Reason
REASON_LOCK_WAIT_TIMEOUT: Reason
REASON_PERMIT_NOT_HELD: Reason
REASON_PERMITS_EXCEED_LIMIT: Reason
REASON_SEMAPHORE_WAIT_TIMEOUT: Reason
REASON_TASK_LEASE_NOT_HELD: Reason
REASON_TASK_NOT_FOUND: Reason
REASON_TASK_LEASED: Reason
REASON_TASK_FINISHED: Reason
REASON_SCHEDULE_NOT_FOUND: Reason
REASON_SCHEDULE_EXISTS: Reason
REASON_NOT_LEADER: Reason
REASON_ELECTION_WAIT_TIMEOUT: Reason
REASON_SEMAPHORE_LIMIT_MISMATCH: Reason
REASON_DEADLOCK: Reason
REASON_CHAT_NOT_FOUND: Reason
REASON_CHAT_EXISTS: Reason
REASON_NOT_A_MEMBER: Reason
REASON_CHAT_FULL: Reason
REASON_NAME_NOT_FOUND: Reason
REASON_FILE_NOT_FOUND: Reason
REASON_FILE_NOT_COMPLETE: Reason
REASON_NOT_A_WORKER: Reason
REASON_CORRUPT_FILE: Reason
REASON_OFFSET_OUT_OF_RANGE: Reason
REASON_LINE_TOO_LONG: Reason
REASON_TOO_MANY_STREAMS: Reason
REASON_TOO_MANY_BLOCKED_CALLS: Reason
REASON_RATE_LIMITED: Reason
REASON_REQUEST_TOO_LARGE: Reason
REASON_STORAGE_FULL: Reason
REASON_STORAGE_QUOTA_EXCEEDED: Reason
REASON_REPLICATION_TIMEOUT: Reason
REASON_RATE_LIMIT_MISMATCH: Reason
REASON_RATE_LIMIT_NOT_FOUND: Reason
STATUS_FIELD_NUMBER: _ClassVar[int]
status: _descriptor.FieldDescriptor

class Error(_message.Message):
    __slots__ = ("code", "reason", "message", "metadata")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    code: Code
    reason: str
    message: str
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, code: _Optional[_Union[Code, str]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

"""Domain errors raised by primitives and validation.

They carry no gRPC types: each error names its status code as a plain string and
api/status.py turns it into a grpc.StatusCode plus a google.rpc.ErrorInfo whose
reason is ``reason``. Reasons and their codes are declared once, in
protos/concord/error/v1/error.proto (docs/errors.md): a class names its reason from
the generated enum and takes its code from that table, and a class whose reason's
code is not its category's (its base class's) fails at import. Subclass a category
to add a specific reason, after adding the reason to error.proto.
"""

from __future__ import annotations

from typing import Any

from concord.error.v1 import error_pb2 as _table
from concord.reasons import CODE_NAMES, reason_name
from concord.error.v1.error_pb2 import (
    REASON_ALREADY_EXISTS,
    REASON_CHAT_EXISTS,
    REASON_CHAT_FULL,
    REASON_CHAT_NOT_FOUND,
    REASON_CORRUPT_FILE,
    REASON_DEADLINE_EXCEEDED,
    REASON_DEADLOCK,
    REASON_ELECTION_WAIT_TIMEOUT,
    REASON_FAILED_PRECONDITION,
    REASON_FILE_NOT_COMPLETE,
    REASON_FILE_NOT_FOUND,
    REASON_INTERNAL,
    REASON_INVALID_ARGUMENT,
    REASON_LINE_TOO_LONG,
    REASON_LOCK_NOT_HELD,
    REASON_LOCK_WAIT_TIMEOUT,
    REASON_NAME_NOT_FOUND,
    REASON_NOT_A_MEMBER,
    REASON_NOT_A_WORKER,
    REASON_NOT_FOUND,
    REASON_NOT_LEADER,
    REASON_OFFSET_OUT_OF_RANGE,
    REASON_PERMISSION_DENIED,
    REASON_PERMIT_NOT_HELD,
    REASON_PERMITS_EXCEED_LIMIT,
    REASON_REDIS_UNAVAILABLE,
    REASON_RESOURCE_EXHAUSTED,
    REASON_SCHEDULE_EXISTS,
    REASON_SCHEDULE_NOT_FOUND,
    REASON_SEMAPHORE_LIMIT_MISMATCH,
    REASON_SEMAPHORE_WAIT_TIMEOUT,
    REASON_STORAGE_FULL,
    REASON_STORAGE_QUOTA_EXCEEDED,
    REASON_RATE_LIMIT_MISMATCH,
    REASON_RATE_LIMIT_NOT_FOUND,
    REASON_REPLICATION_TIMEOUT,
    REASON_TASK_LEASE_NOT_HELD,
    REASON_TASK_LEASED,
    REASON_TASK_FINISHED,
    REASON_TASK_NOT_FOUND,
    REASON_UNAUTHENTICATED,
)


STATUS: dict[str, str] = CODE_NAMES
"""Every reason of error.proto -> the name of its gRPC status code."""


class ConcordError(Exception):
    reason = reason_name(REASON_INTERNAL)
    code = STATUS[reason]

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "reason" not in cls.__dict__:
            return
        code = STATUS.get(cls.reason)
        if code is None:
            raise TypeError(f"{cls.__name__}: reason {cls.reason} is not in protos/concord/error/v1/error.proto")
        category = cls.__mro__[1]
        if category is not ConcordError and code != category.code:
            raise TypeError(f"{cls.__name__}: error.proto gives {cls.reason} the code {code}, "
                            f"but {category.__name__} is {category.code}")
        cls.code = code


class InvalidArgument(ConcordError):
    reason = reason_name(REASON_INVALID_ARGUMENT)


class NotFound(ConcordError):
    reason = reason_name(REASON_NOT_FOUND)


class FailedPrecondition(ConcordError):
    reason = reason_name(REASON_FAILED_PRECONDITION)


class AlreadyExists(ConcordError):
    reason = reason_name(REASON_ALREADY_EXISTS)


class PermissionDenied(ConcordError):
    reason = reason_name(REASON_PERMISSION_DENIED)


class ResourceExhausted(ConcordError):
    reason = reason_name(REASON_RESOURCE_EXHAUSTED)


class StorageFull(ResourceExhausted):
    """Redis refused a write: out of memory under its maxmemory (noeviction), so
    nothing was evicted and nothing changed (store/client.py: unavailable_on_redis_errors)."""

    reason = reason_name(REASON_STORAGE_FULL)


class StorageQuotaExceeded(ResourceExhausted):
    """The tenant's stored bytes reached its storage quota (quotas.py)."""

    reason = reason_name(REASON_STORAGE_QUOTA_EXCEEDED)


class Unauthenticated(ConcordError):
    """No bearer token, or one the server does not know (edge/auth.py)."""

    reason = reason_name(REASON_UNAUTHENTICATED)


class LimitReached(ResourceExhausted):
    """A per-tenant or per-connection limit (edge/limits.py): ``reason`` is one of
    error.proto's RESOURCE_EXHAUSTED reasons (REASON_RATE_LIMITED...); ``retry_delay``
    (seconds) goes to the client as a google.rpc.RetryInfo, None when retrying cannot help."""

    def __init__(self, message: str, reason: _table.Reason, retry_delay: float | None, **metadata: str) -> None:
        super().__init__(message, **metadata)
        self.reason = reason_name(reason)
        if STATUS[self.reason] != self.code:
            raise ValueError(f"{self.reason} is not a {self.code} reason in error.proto")
        self.retry_delay = retry_delay


class Unavailable(ConcordError):
    """Redis could not be reached or is loading; the call may be retried."""

    reason = reason_name(REASON_REDIS_UNAVAILABLE)


class ReplicationTimeout(Unavailable):
    """--redis-replica-acks: fewer replicas than asked confirmed the change in time
    (store/replica_acks.py); it was made on the primary and may not survive a failover.
    ``reply`` is the script's reply when it came before the confirmation failed (its
    caller may have to give back what the script took: primitives/queue.py)."""

    reason = reason_name(REASON_REPLICATION_TIMEOUT)

    def __init__(self, message: str, reply: Any = None, **metadata: str) -> None:
        super().__init__(message, **metadata)
        self.reply = reply


class DeadlineExceeded(ConcordError):
    reason = reason_name(REASON_DEADLINE_EXCEEDED)


class LockNotHeld(FailedPrecondition):
    reason = reason_name(REASON_LOCK_NOT_HELD)


class LockWaitTimeout(DeadlineExceeded):
    reason = reason_name(REASON_LOCK_WAIT_TIMEOUT)


class PermitNotHeld(FailedPrecondition):
    reason = reason_name(REASON_PERMIT_NOT_HELD)


class PermitsExceedLimit(FailedPrecondition):
    """The limit in force was lowered below what a queued request asks for."""

    reason = reason_name(REASON_PERMITS_EXCEED_LIMIT)


class SemaphoreWaitTimeout(DeadlineExceeded):
    reason = reason_name(REASON_SEMAPHORE_WAIT_TIMEOUT)


class SemaphoreLimitMismatch(FailedPrecondition):
    """An Acquire's limit is not the stored one, which only SetLimit changes."""

    reason = reason_name(REASON_SEMAPHORE_LIMIT_MISMATCH)


class RateLimitMismatch(FailedPrecondition):
    """A call's rate limit is not the one SetLimit stored for the key."""

    reason = reason_name(REASON_RATE_LIMIT_MISMATCH)


class RateLimitNotFound(NotFound):
    """The call gave no rate limit and none is stored for the key."""

    reason = reason_name(REASON_RATE_LIMIT_NOT_FOUND)


class NotLeader(FailedPrecondition):
    """The term is no longer the election's leader's."""

    reason = reason_name(REASON_NOT_LEADER)


class ElectionWaitTimeout(DeadlineExceeded):
    reason = reason_name(REASON_ELECTION_WAIT_TIMEOUT)


class Deadlock(ConcordError):
    """This wait closed a cycle of lock holders each waiting for the next; the
    metadata's ``cycle`` names it."""

    reason = reason_name(REASON_DEADLOCK)


class TaskLeaseNotHeld(FailedPrecondition):
    """The lease expired, or the task was acked, nacked or released already."""

    reason = reason_name(REASON_TASK_LEASE_NOT_HELD)


class TaskNotFound(NotFound):
    reason = reason_name(REASON_TASK_NOT_FOUND)


class TaskLeased(FailedPrecondition):
    """Cancel of a task a worker holds: it is settled by its worker first."""

    reason = reason_name(REASON_TASK_LEASED)


class TaskFinished(FailedPrecondition):
    """Cancel of a task that finished already (succeeded, or cancelled before)."""

    reason = reason_name(REASON_TASK_FINISHED)


class ScheduleNotFound(NotFound):
    reason = reason_name(REASON_SCHEDULE_NOT_FOUND)


class ScheduleExists(AlreadyExists):
    reason = reason_name(REASON_SCHEDULE_EXISTS)


class ChatNotFound(NotFound):
    reason = reason_name(REASON_CHAT_NOT_FOUND)


class ChatExists(AlreadyExists):
    reason = reason_name(REASON_CHAT_EXISTS)


class NotAMember(PermissionDenied):
    """Sending to, acking in or leaving a chat one is not a member of."""

    reason = reason_name(REASON_NOT_A_MEMBER)


class ChatFull(ResourceExhausted):
    reason = reason_name(REASON_CHAT_FULL)


class NameNotFound(NotFound):
    reason = reason_name(REASON_NAME_NOT_FOUND)


class FileNotFound(NotFound):
    reason = reason_name(REASON_FILE_NOT_FOUND)


class FileNotComplete(FailedPrecondition):
    """MarkDone before the upload finished and was announced."""

    reason = reason_name(REASON_FILE_NOT_COMPLETE)


class NotAWorker(FailedPrecondition):
    """MarkDone by someone the file was not announced to."""

    reason = reason_name(REASON_NOT_A_WORKER)


class CorruptFile(FailedPrecondition):
    """A gzip file whose data does not decompress."""

    reason = reason_name(REASON_CORRUPT_FILE)


class OffsetOutOfRange(InvalidArgument):
    reason = reason_name(REASON_OFFSET_OUT_OF_RANGE)


class LineTooLong(FailedPrecondition):
    reason = reason_name(REASON_LINE_TOO_LONG)

"""Domain errors raised by primitives and validation.

They carry no gRPC types: each category names its status code as a plain string and
api/status.py turns it into a grpc.StatusCode plus a google.rpc.ErrorInfo whose
reason is ``reason``. Subclass a category to add a specific reason.
"""

from __future__ import annotations


class ConcordError(Exception):
    code = "INTERNAL"
    reason = "INTERNAL"

    def __init__(self, message: str, **metadata: str) -> None:
        super().__init__(message)
        self.message = message
        self.metadata = metadata


class InvalidArgument(ConcordError):
    code = "INVALID_ARGUMENT"
    reason = "INVALID_ARGUMENT"


class NotFound(ConcordError):
    code = "NOT_FOUND"
    reason = "NOT_FOUND"


class FailedPrecondition(ConcordError):
    code = "FAILED_PRECONDITION"
    reason = "FAILED_PRECONDITION"


class AlreadyExists(ConcordError):
    code = "ALREADY_EXISTS"
    reason = "ALREADY_EXISTS"


class PermissionDenied(ConcordError):
    code = "PERMISSION_DENIED"
    reason = "PERMISSION_DENIED"


class ResourceExhausted(ConcordError):
    code = "RESOURCE_EXHAUSTED"
    reason = "RESOURCE_EXHAUSTED"


class Unauthenticated(ConcordError):
    """No bearer token, or one the server does not know (auth.py)."""

    code = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"


class LimitReached(ResourceExhausted):
    """A per-tenant or per-connection limit (limits.py); ``retry_delay`` (seconds) goes
    to the client as a google.rpc.RetryInfo, None when retrying cannot help."""

    def __init__(self, message: str, reason: str, retry_delay: float | None, **metadata: str) -> None:
        super().__init__(message, **metadata)
        self.reason = reason
        self.retry_delay = retry_delay


class Unavailable(ConcordError):
    """Redis could not be reached or is loading; the call may be retried."""

    code = "UNAVAILABLE"
    reason = "REDIS_UNAVAILABLE"


class DeadlineExceeded(ConcordError):
    code = "DEADLINE_EXCEEDED"
    reason = "DEADLINE_EXCEEDED"


class LockNotHeld(FailedPrecondition):
    reason = "LOCK_NOT_HELD"


class LockWaitTimeout(DeadlineExceeded):
    reason = "LOCK_WAIT_TIMEOUT"


class PermitNotHeld(FailedPrecondition):
    reason = "PERMIT_NOT_HELD"


class PermitsExceedLimit(FailedPrecondition):
    """The limit in force was lowered below what a queued request asks for."""

    reason = "PERMITS_EXCEED_LIMIT"


class SemaphoreWaitTimeout(DeadlineExceeded):
    reason = "SEMAPHORE_WAIT_TIMEOUT"


class TaskLeaseNotHeld(FailedPrecondition):
    """The lease expired, or the task was acked, nacked or released already."""

    reason = "TASK_LEASE_NOT_HELD"


class TaskNotFound(NotFound):
    reason = "TASK_NOT_FOUND"


class TaskLeased(FailedPrecondition):
    """Cancel of a task a worker holds: it is settled by its worker first."""

    reason = "TASK_LEASED"


class ChatNotFound(NotFound):
    reason = "CHAT_NOT_FOUND"


class ChatExists(AlreadyExists):
    reason = "CHAT_EXISTS"


class NotAMember(PermissionDenied):
    """Sending to, acking in or leaving a chat one is not a member of."""

    reason = "NOT_A_MEMBER"


class ChatFull(ResourceExhausted):
    reason = "CHAT_FULL"


class NameNotFound(NotFound):
    reason = "NAME_NOT_FOUND"


class FileNotFound(NotFound):
    reason = "FILE_NOT_FOUND"


class FileNotComplete(FailedPrecondition):
    """MarkDone before the upload finished and was announced."""

    reason = "FILE_NOT_COMPLETE"


class NotAWorker(FailedPrecondition):
    """MarkDone by someone the file was not announced to."""

    reason = "NOT_A_WORKER"


class CorruptFile(FailedPrecondition):
    """A gzip file whose data does not decompress."""

    reason = "CORRUPT_FILE"


class OffsetOutOfRange(InvalidArgument):
    reason = "OFFSET_OUT_OF_RANGE"


class LineTooLong(FailedPrecondition):
    reason = "LINE_TOO_LONG"

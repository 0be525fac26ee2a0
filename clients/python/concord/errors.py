"""Typed exceptions for Concord's status codes.

Every error the server sends carries a ``google.rpc.ErrorInfo`` whose ``reason``
names it precisely (``LOCK_NOT_HELD``); the exception class follows the reason when
one is defined here, else the status code.
"""

from __future__ import annotations

import grpc
from google.rpc import error_details_pb2, status_pb2

_DETAILS_KEY = "grpc-status-details-bin"  # where grpcio-status puts google.rpc.Status


class ConcordError(Exception):
    """Base of every error raised by the client library."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, *, reason: str = "", metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason
        self.metadata = metadata or {}


class InvalidArgument(ConcordError):
    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(ConcordError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(ConcordError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class AlreadyExists(ConcordError):
    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(ConcordError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(ConcordError):
    """The server or its Redis cannot answer now; the call is safe to retry."""

    code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceeded(ConcordError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class Cancelled(ConcordError):
    code = grpc.StatusCode.CANCELLED


class Unauthenticated(ConcordError):
    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(ConcordError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Internal(ConcordError):
    code = grpc.StatusCode.INTERNAL


class LockNotHeld(FailedPrecondition):
    """The lease no longer holds the lock: it expired, or was released."""


class LockLost(LockNotHeld):
    """The lock was lost while the ``with`` block ran: its work was not protected."""


class LockTimeout(DeadlineExceeded):
    """The lock was not free within the wait timeout."""


class PermitNotHeld(FailedPrecondition):
    """The permit is no longer held: it expired, or was released."""


class PermitLost(PermitNotHeld):
    """The permit was lost while the ``with`` block ran: its work was not protected."""


class PermitsExceedLimit(FailedPrecondition):
    """The semaphore's limit was lowered below the permits this request asked for."""


class SemaphoreTimeout(DeadlineExceeded):
    """The permits were not free within the wait timeout."""


class TaskLeaseNotHeld(FailedPrecondition):
    """The task's lease expired (it went back to the queue), or it was settled already."""


class TaskNotFound(NotFound):
    """The queue has no task with that id."""


class TaskLeased(FailedPrecondition):
    """The task is leased to a worker, so it cannot be cancelled now."""


class ChatNotFound(NotFound):
    """No chat has that id (never created, or its last member left)."""


class ChatExists(AlreadyExists):
    """CreateChat with a chat_id that is taken."""


class NotAMember(PermissionDenied):
    """Sending to, acking in or leaving a chat the user is not a member of."""


class ChatFull(ResourceExhausted):
    """The chat has the server's most members already."""


class NameNotFound(NotFound):
    """The name index does not hold that name."""


class FileNotFound(NotFound):
    """No such file: never uploaded, undone, or finished by every worker."""


class FileNotComplete(FailedPrecondition):
    """MarkDone on a file still being uploaded."""


class NotAWorker(FailedPrecondition):
    """MarkDone by someone the file was not announced to."""


class CorruptFile(FailedPrecondition):
    """A gzip file whose data does not decompress."""


class LineTooLong(FailedPrecondition):
    """A line longer than the server sends in one message."""


_BY_REASON: dict[str, type[ConcordError]] = {
    "LOCK_NOT_HELD": LockNotHeld,
    "LOCK_WAIT_TIMEOUT": LockTimeout,
    "PERMIT_NOT_HELD": PermitNotHeld,
    "PERMITS_EXCEED_LIMIT": PermitsExceedLimit,
    "SEMAPHORE_WAIT_TIMEOUT": SemaphoreTimeout,
    "TASK_LEASE_NOT_HELD": TaskLeaseNotHeld,
    "TASK_NOT_FOUND": TaskNotFound,
    "TASK_LEASED": TaskLeased,
    "CHAT_NOT_FOUND": ChatNotFound,
    "CHAT_EXISTS": ChatExists,
    "NOT_A_MEMBER": NotAMember,
    "CHAT_FULL": ChatFull,
    "NAME_NOT_FOUND": NameNotFound,
    "FILE_NOT_FOUND": FileNotFound,
    "FILE_NOT_COMPLETE": FileNotComplete,
    "NOT_A_WORKER": NotAWorker,
    "CORRUPT_FILE": CorruptFile,
    "LINE_TOO_LONG": LineTooLong,
}
_BY_CODE: dict[grpc.StatusCode, type[ConcordError]] = {
    cls.code: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, ResourceExhausted, Unavailable,
                DeadlineExceeded, Cancelled, Unauthenticated, PermissionDenied, Internal)
}


def from_reason(reason: str, message: str) -> ConcordError:
    """The typed exception for an error reported in a message (a Consume stream's
    Settled) rather than as a call's status."""
    return _BY_REASON.get(reason, ConcordError)(message or reason, reason=reason)


def from_rpc_error(error: grpc.RpcError) -> ConcordError:
    """The typed exception for a failed call (sync or asyncio), with its ErrorInfo."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = error.details() if hasattr(error, "details") else str(error)
    reason, metadata = "", {}
    for key, value in (error.trailing_metadata() or ()) if hasattr(error, "trailing_metadata") else ():
        if key != _DETAILS_KEY:
            continue
        for detail in status_pb2.Status.FromString(value).details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info):
                reason, metadata = info.reason, dict(info.metadata)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code, ConcordError)
    exc = cls(message or code.name, reason=reason, metadata=metadata)
    if cls is ConcordError:
        exc.code = code
    return exc

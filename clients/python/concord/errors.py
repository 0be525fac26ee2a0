"""Typed exceptions for Concord's status codes.

Every error the server sends carries a ``google.rpc.ErrorInfo`` whose ``reason``
names it precisely (``LOCK_NOT_HELD``); the exception class follows the reason when
one is defined here, else the status code. Reasons and their status codes are
declared once, in protos/concord/error/v1/error.proto (docs/errors.md): a class here
names its reason from the generated enum (concord.error.v1) and takes its code from
that table; a class whose reason's code is not its base class's fails at import.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from .reasons import CODE_NAMES, reason_name
from .error.v1.error_pb2 import (
    REASON_CHAT_EXISTS,
    REASON_CHAT_FULL,
    REASON_CHAT_NOT_FOUND,
    REASON_CORRUPT_FILE,
    REASON_DEADLOCK,
    REASON_ELECTION_WAIT_TIMEOUT,
    REASON_FILE_NOT_COMPLETE,
    REASON_FILE_NOT_FOUND,
    REASON_LINE_TOO_LONG,
    REASON_LOCK_NOT_HELD,
    REASON_LOCK_WAIT_TIMEOUT,
    REASON_NAME_NOT_FOUND,
    REASON_NOT_A_MEMBER,
    REASON_NOT_A_WORKER,
    REASON_NOT_LEADER,
    REASON_OFFSET_OUT_OF_RANGE,
    REASON_PERMIT_NOT_HELD,
    REASON_PERMITS_EXCEED_LIMIT,
    REASON_RATE_LIMIT_MISMATCH,
    REASON_RATE_LIMIT_NOT_FOUND,
    REASON_SCHEDULE_EXISTS,
    REASON_SCHEDULE_NOT_FOUND,
    REASON_SEMAPHORE_LIMIT_MISMATCH,
    REASON_SEMAPHORE_WAIT_TIMEOUT,
    REASON_TASK_LEASE_NOT_HELD,
    REASON_TASK_LEASED,
    REASON_TASK_FINISHED,
    REASON_TASK_NOT_FOUND,
)

_DETAILS_KEY = "grpc-status-details-bin"  # where grpcio-status puts google.rpc.Status


STATUS: dict[str, grpc.StatusCode] = {reason: grpc.StatusCode[code] for reason, code in CODE_NAMES.items()}
"""Every reason the server may send -> its status code (error.proto, docs/errors.md)."""


class ConcordError(Exception):
    """Base of every error raised by the client library."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    reason: str = ""
    """The ErrorInfo reason ("LOCK_NOT_HELD"); a class's own where it has one."""

    def __init__(self, message: str, *, reason: str = "", metadata: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.reason = reason or type(self).reason
        self.metadata = metadata or {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "reason" not in cls.__dict__:
            return
        code = STATUS.get(cls.reason)
        if code is None:
            raise TypeError(f"{cls.__name__}: reason {cls.reason} is not in protos/concord/error/v1/error.proto")
        if code != cls.code:
            raise TypeError(f"{cls.__name__}: error.proto gives {cls.reason} the code {code.name}, "
                            f"not its base class's {cls.code.name}")


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


class Aborted(ConcordError):
    code = grpc.StatusCode.ABORTED


class LockNotHeld(FailedPrecondition):
    """The lease no longer holds the lock: it expired, or was released."""

    reason = reason_name(REASON_LOCK_NOT_HELD)


class LockLost(LockNotHeld):
    """The lock was lost while the ``with`` block ran: its work was not protected."""


class LockTimeout(DeadlineExceeded):
    """The lock was not free within the wait timeout."""

    reason = reason_name(REASON_LOCK_WAIT_TIMEOUT)


class PermitNotHeld(FailedPrecondition):
    """The permit is no longer held: it expired, or was released."""

    reason = reason_name(REASON_PERMIT_NOT_HELD)


class PermitLost(PermitNotHeld):
    """The permit was lost while the ``with`` block ran: its work was not protected."""


class PermitsExceedLimit(FailedPrecondition):
    """The semaphore's limit was lowered below the permits this request asked for."""

    reason = reason_name(REASON_PERMITS_EXCEED_LIMIT)


class SemaphoreTimeout(DeadlineExceeded):
    """The permits were not free within the wait timeout."""

    reason = reason_name(REASON_SEMAPHORE_WAIT_TIMEOUT)


class SemaphoreLimitMismatch(FailedPrecondition):
    """The limit asked for is not the semaphore's, which only set_limit changes."""

    reason = reason_name(REASON_SEMAPHORE_LIMIT_MISMATCH)


class RateLimitMismatch(FailedPrecondition):
    """The limit asked for is not the one set_limit stored for the key."""

    reason = reason_name(REASON_RATE_LIMIT_MISMATCH)


class RateLimitNotFound(NotFound):
    """No limit was given and none is stored for the key."""

    reason = reason_name(REASON_RATE_LIMIT_NOT_FOUND)


class NotLeader(FailedPrecondition):
    """The term is no longer the election's leader's."""

    reason = reason_name(REASON_NOT_LEADER)


class LeadershipLost(NotLeader):
    """Leadership was lost while the ``with`` block ran."""


class ElectionTimeout(DeadlineExceeded):
    """Leadership was not won within the wait timeout."""

    reason = reason_name(REASON_ELECTION_WAIT_TIMEOUT)


class Deadlock(Aborted):
    """This wait closed a cycle of lock holders each waiting for the next, and was
    failed to break it; ``metadata["cycle"]`` names the cycle. Release what you
    hold, then retry."""

    reason = reason_name(REASON_DEADLOCK)


class TaskLeaseNotHeld(FailedPrecondition):
    """The task's lease expired (it went back to the queue), or it was settled already."""

    reason = reason_name(REASON_TASK_LEASE_NOT_HELD)


class TaskNotFound(NotFound):
    """The queue has no task with that id."""

    reason = reason_name(REASON_TASK_NOT_FOUND)


class TaskLeased(FailedPrecondition):
    """The task is leased to a worker, so it cannot be cancelled now."""

    reason = reason_name(REASON_TASK_LEASED)


class TaskFinished(FailedPrecondition):
    """Cancel of a task that finished already (succeeded, or cancelled before)."""

    reason = reason_name(REASON_TASK_FINISHED)


class ScheduleNotFound(NotFound):
    """The queue has no schedule of that name."""

    reason = reason_name(REASON_SCHEDULE_NOT_FOUND)


class ScheduleExists(AlreadyExists):
    """The queue has a schedule of that name already (update_schedule changes it)."""

    reason = reason_name(REASON_SCHEDULE_EXISTS)


class ChatNotFound(NotFound):
    """No chat has that id (never created, or its last member left)."""

    reason = reason_name(REASON_CHAT_NOT_FOUND)


class ChatExists(AlreadyExists):
    """CreateChat with a chat_id that is taken."""

    reason = reason_name(REASON_CHAT_EXISTS)


class NotAMember(PermissionDenied):
    """Sending to, acking in or leaving a chat the user is not a member of."""

    reason = reason_name(REASON_NOT_A_MEMBER)


class ChatFull(ResourceExhausted):
    """The chat has the server's most members already."""

    reason = reason_name(REASON_CHAT_FULL)


class NameNotFound(NotFound):
    """The name index does not hold that name."""

    reason = reason_name(REASON_NAME_NOT_FOUND)


class FileNotFound(NotFound):
    """No such file: never uploaded, undone, or finished by every worker."""

    reason = reason_name(REASON_FILE_NOT_FOUND)


class FileNotComplete(FailedPrecondition):
    """MarkDone on a file still being uploaded."""

    reason = reason_name(REASON_FILE_NOT_COMPLETE)


class NotAWorker(FailedPrecondition):
    """MarkDone by someone the file was not announced to."""

    reason = reason_name(REASON_NOT_A_WORKER)


class CorruptFile(FailedPrecondition):
    """A gzip file whose data does not decompress."""

    reason = reason_name(REASON_CORRUPT_FILE)


class OffsetOutOfRange(InvalidArgument):
    """A download's offset is past the end of the file."""

    reason = reason_name(REASON_OFFSET_OUT_OF_RANGE)


class LineTooLong(FailedPrecondition):
    """A line longer than the server sends in one message."""

    reason = reason_name(REASON_LINE_TOO_LONG)


def _reason_classes(cls: type[ConcordError]) -> dict[str, type[ConcordError]]:
    found = {cls.reason: cls} if cls.reason and "reason" in cls.__dict__ else {}
    for sub in cls.__subclasses__():
        found.update(_reason_classes(sub))
    return found


_BY_REASON: dict[str, type[ConcordError]] = _reason_classes(ConcordError)
_BY_CODE: dict[grpc.StatusCode, type[ConcordError]] = {
    cls.code: cls
    for cls in (InvalidArgument, NotFound, AlreadyExists, FailedPrecondition, ResourceExhausted, Unavailable,
                DeadlineExceeded, Cancelled, Unauthenticated, PermissionDenied, Internal, Aborted)
}


def from_reason(reason: str, message: str, metadata: dict[str, str] | None = None) -> ConcordError:
    """The typed exception for an error reported in a message (a Consume stream's
    Settled, a lock Session's answer) rather than as a call's status."""
    code = STATUS.get(reason)
    cls = _BY_REASON.get(reason) or (_BY_CODE.get(code, ConcordError) if code else ConcordError)
    return cls(message or reason, reason=reason, metadata=metadata)


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

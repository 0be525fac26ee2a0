"""Domain errors -> gRPC status codes with a google.rpc.ErrorInfo (via grpcio-status).

``@rpc`` wraps every servicer method: a request that did not parse is
INVALID_ARGUMENT (see decoding.py), a ConcordError becomes its status code, a Redis
failure that escaped store/client.py's mapping becomes UNAVAILABLE (and is logged as
the bug it is), and anything else unexpected becomes INTERNAL with a generic message
(the traceback goes to the log, never to the client), so no call ends in UNKNOWN.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Any

import grpc
from concord.error.v1 import error_pb2
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from ..errors import ConcordError, InvalidArgument, Unavailable
from ..store import call_deadline
from ..store.client import UNAVAILABLE_ERRORS
from .decoding import Undecodable

log = logging.getLogger(__name__)

DOMAIN = "concord"


def to_status(err: ConcordError) -> grpc.Status:
    code = getattr(grpc.StatusCode, err.code)
    detail = any_pb2.Any()
    detail.Pack(error_details_pb2.ErrorInfo(reason=err.reason, domain=DOMAIN, metadata=err.metadata))
    details = [detail]
    retry_delay = getattr(err, "retry_delay", None)  # limits: when trying again may succeed
    if retry_delay is not None:
        retry = any_pb2.Any()
        retry_info = error_details_pb2.RetryInfo()
        retry_info.retry_delay.FromMilliseconds(max(1, round(retry_delay * 1000)))
        retry.Pack(retry_info)
        details.append(retry)
    return rpc_status.to_status(status_pb2.Status(code=code.value[0], message=err.message, details=details))


def to_error_message(err: ConcordError) -> error_pb2.Error:
    """A ConcordError as a stream message carries it, where one stream answers many
    requests (LockService.Session): the code, reason and message to_status would give."""
    return error_pb2.Error(code=getattr(error_pb2, f"CODE_{err.code}"), reason=err.reason, message=err.message,
                           metadata=err.metadata)


def as_concord_error(exc: Exception, method: str) -> ConcordError:
    """What a client is told of an exception: a ConcordError as it is, anything else
    INTERNAL with a generic message (the traceback goes to the log)."""
    if isinstance(exc, ConcordError):
        return exc
    if isinstance(exc, UNAVAILABLE_ERRORS):
        # A Redis failure that skipped store/client.py's mapping: still UNAVAILABLE to
        # the client (it is retryable), but logged as the bug it is.
        log.error("BUG: a Redis failure reached %s unmapped", method, exc_info=exc)
        return Unavailable(f"Redis is unavailable: {exc}")
    log.exception("unexpected error in %s", method)
    return ConcordError("internal error; see the server log")


async def _abort(context: grpc.aio.ServicerContext, exc: Exception, method: str) -> None:
    if _cancelled(context) and not isinstance(exc, ConcordError):
        # The client cancelled (or went away) first: what failed after that, such as a
        # write to the gone stream, is the cancellation's echo, not a server fault.
        # No ERROR and no traceback: a client cancelling is normal.
        log.debug("%s failed after its client cancelled: %r", method, exc)
        exc = ConcordError("the call was cancelled by the client")
    await context.abort_with_status(to_status(as_concord_error(exc, method)))


def _being_cancelled() -> bool:
    """Whether this task was asked to stop (the call cancelled, the server stopping)."""
    task = asyncio.current_task()
    return task is None or task.cancelling() > 0


def _time_remaining(context: grpc.aio.ServicerContext) -> float | None:
    try:
        return context.time_remaining()
    except Exception:  # a context that cannot tell (tests' stand-ins)
        return None


def _cancelled(context: grpc.aio.ServicerContext) -> bool:
    try:
        return bool(context.cancelled())
    except Exception:  # a context that cannot tell (tests' stand-ins)
        return False


def check_decoded(request: Any) -> None:
    """INVALID_ARGUMENT for a request message that did not parse (decoding.py)."""
    if type(request) is Undecodable:
        raise InvalidArgument(f"request could not be parsed: {request.reason}")


_in_progress = 0


def calls_in_progress() -> int:
    """Calls of this process's services now running (blocked and streaming included)."""
    return _in_progress


class _Call:
    """One call of a servicer method: counted while it runs, and whatever it raises
    ends it with a status (AbortError: the status is already set)."""

    __slots__ = ("_context", "_name")

    def __init__(self, context: grpc.aio.ServicerContext, name: str) -> None:
        self._context, self._name = context, name

    async def __aenter__(self) -> None:
        global _in_progress
        _in_progress += 1

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        global _in_progress
        _in_progress -= 1
        if isinstance(exc, Exception) and not isinstance(exc, grpc.aio.AbortError):
            await _abort(self._context, exc, self._name)  # raises AbortError
        if isinstance(exc, asyncio.CancelledError) and not _cancelled(self._context) and not _being_cancelled():
            # A cancellation nobody asked of this call (a future it shared was cancelled
            # by another caller): gRPC would send it no status and its client would wait
            # to its deadline. It is answered UNAVAILABLE (outcome unknown, as for any).
            log.warning("%s ended by a stray cancellation; answered UNAVAILABLE", self._name)
            await _abort(self._context, Unavailable("the call was interrupted; retry"), self._name)


def rpc(method: Callable[..., Any]) -> Callable[..., Any]:
    """Maps a servicer method's exceptions to statuses; works for unary and streaming."""
    name = method.__qualname__
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            async with _Call(context, name):
                check_decoded(request)
                async for item in method(self, request, context):
                    yield item

        return stream

    @functools.wraps(method)
    async def unary(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        async with _Call(context, name):
            check_decoded(request)
            call_deadline.bound(_time_remaining(context))  # its Redis waits end by then (UNAVAILABLE)
            return await method(self, request, context)

    return unary

"""Runs a check around every call of a method handler (auth.py, limits.py).

A server interceptor cannot end a call with a rich status itself, and what it
decides (the tenant) must be in force in the call's own task; so interceptors here
wrap the handler's behaviour instead: the guard opens (and may raise a ConcordError,
sent with its ErrorInfo like any other), stays open for the whole call, stream
included, and can wrap the request stream. A call refused from its headers alone
gets ``refused``, which answers before any request message is read.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, Protocol

import grpc

from ..api.status import to_status
from ..errors import ConcordError
from . import handlers


class Guard(Protocol):
    def open(self, context: grpc.aio.ServicerContext, request: Any | None) -> contextlib.AbstractContextManager[Any]:
        """Checks the call (request: the message of a unary request, else None); held open until it ends."""

    def requests(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The request stream the handler reads (checked as it goes)."""

    # Optional: ``async def check(self) -> None``, awaited before open (a check that
    # asks Redis: limits.py's shared tenant rate); raises a ConcordError to refuse.


def _headers_first(guard: Guard) -> bool:
    """Whether a streaming call sends its response headers as soon as the guard lets
    it in. Then nothing but messages and the status is left to send, so another task
    can end the call with a status while a message is in flight (revocation.py):
    gRPC refuses a second batch that would send the headers too."""
    return bool(getattr(guard, "headers_first", False))


class _Guarded:
    """One call inside its guard (a refusal becomes the call's status)."""

    __slots__ = ("_guard", "_arg", "_context", "_streaming_in", "_streaming_out", "_stack")

    def __init__(self, guard: Guard, arg: Any, context: grpc.aio.ServicerContext, streaming_in: bool,
                 streaming_out: bool) -> None:
        self._guard, self._arg, self._context, self._streaming_in = guard, arg, context, streaming_in
        self._streaming_out = streaming_out

    async def __aenter__(self) -> Any:
        stack = contextlib.ExitStack()
        try:
            check = getattr(self._guard, "check", None)
            if check is not None:
                await check()
            stack.enter_context(self._guard.open(self._context, None if self._streaming_in else self._arg))
        except ConcordError as exc:
            await self._context.abort_with_status(to_status(exc))
            raise  # unreachable: abort raises
        if self._streaming_out and _headers_first(self._guard):
            try:
                await self._context.send_initial_metadata(())
            except BaseException:
                stack.close()
                raise
        self._stack = stack
        return self._guard.requests(self._arg) if self._streaming_in else self._arg

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return self._stack.__exit__(exc_type, exc, tb)


def refused(handler: grpc.RpcMethodHandler, refusal: ConcordError) -> grpc.RpcMethodHandler:
    """A handler that ends the call with ``refusal`` from its headers alone: it takes
    a request stream, so gRPC does not wait for (nor hold memory for) a request
    message first, which a unary handler would."""

    async def refuse(requests: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort_with_status(to_status(refusal))

    make = grpc.stream_stream_rpc_method_handler if handler.response_streaming else grpc.stream_unary_rpc_method_handler
    return make(refuse, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)


def wrap(handler: grpc.RpcMethodHandler | None, guard: Guard) -> grpc.RpcMethodHandler | None:
    if handler is None:
        return None
    streaming_in, streaming_out = handler.request_streaming, handler.response_streaming
    return handlers.wrap(handler, lambda arg, context: _Guarded(guard, arg, context, streaming_in, streaming_out))

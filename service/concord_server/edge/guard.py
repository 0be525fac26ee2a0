"""Runs a check around every call of a method handler (auth.py, limits.py).

A server interceptor cannot end a call with a rich status itself, and what it
decides (the tenant) must be in force in the call's own task; so interceptors here
wrap the handler's behaviour instead: the guard opens (and may raise a ConcordError,
sent with its ErrorInfo like any other), stays open for the whole call, stream
included, and can wrap the request stream.
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


class _Guarded:
    """One call inside its guard (a refusal becomes the call's status)."""

    __slots__ = ("_guard", "_arg", "_context", "_streaming_in", "_stack")

    def __init__(self, guard: Guard, arg: Any, context: grpc.aio.ServicerContext, streaming_in: bool) -> None:
        self._guard, self._arg, self._context, self._streaming_in = guard, arg, context, streaming_in

    async def __aenter__(self) -> Any:
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._guard.open(self._context, None if self._streaming_in else self._arg))
        except ConcordError as exc:
            await self._context.abort_with_status(to_status(exc))
            raise  # unreachable: abort raises
        self._stack = stack
        return self._guard.requests(self._arg) if self._streaming_in else self._arg

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return self._stack.__exit__(exc_type, exc, tb)


def wrap(handler: grpc.RpcMethodHandler | None, guard: Guard) -> grpc.RpcMethodHandler | None:
    if handler is None:
        return None
    streaming_in = handler.request_streaming
    return handlers.wrap(handler, lambda arg, context: _Guarded(guard, arg, context, streaming_in))

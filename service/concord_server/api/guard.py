"""Runs a check around every call of a method handler (auth.py, limits.py).

A server interceptor cannot end a call with a rich status itself, and what it
decides (the tenant) must be in force in the call's own task; so interceptors here
wrap the handler's behaviour instead: the guard opens (and may raise a ConcordError,
sent with its ErrorInfo like any other), stays open for the whole call, stream
included, and can wrap the request stream.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncIterator
from typing import Any, Protocol

import grpc

from ..errors import ConcordError
from .status import to_status

OPEN_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def is_open_method(method: str) -> bool:
    """Health and reflection: Docker and grpcurl use them before anything else."""
    return method.startswith(OPEN_SERVICES)


class Guard(Protocol):
    def open(self, context: grpc.aio.ServicerContext, request: Any | None) -> contextlib.AbstractContextManager[Any]:
        """Checks the call (request: the message of a unary request, else None); held open until it ends."""

    def requests(self, requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
        """The request stream the handler reads (checked as it goes)."""


async def _open(guard: Guard, context: grpc.aio.ServicerContext, request: Any) -> contextlib.ExitStack:
    """The guard, entered (a refusal becomes the call's status)."""
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(guard.open(context, request))
        return stack
    except ConcordError as exc:
        await context.abort_with_status(to_status(exc))
        raise  # unreachable: abort raises


def wrap(handler: grpc.RpcMethodHandler | None, guard: Guard) -> grpc.RpcMethodHandler | None:
    if handler is None:
        return None
    kind = ("stream" if handler.request_streaming else "unary") + "_" + (
        "stream" if handler.response_streaming else "unary")
    inner = getattr(handler, kind)
    streaming_in = handler.request_streaming

    def request_of(arg: Any) -> Any:
        return guard.requests(arg) if streaming_in else arg

    if inspect.isasyncgenfunction(inner):
        async def behaviour_gen(arg: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            with await _open(guard, context, None if streaming_in else arg):
                async for response in inner(request_of(arg), context):
                    yield response

        return handler._replace(**{kind: behaviour_gen})

    async def behaviour(arg: Any, context: grpc.aio.ServicerContext) -> Any:
        with await _open(guard, context, None if streaming_in else arg):
            return await inner(request_of(arg), context)

    return handler._replace(**{kind: behaviour})

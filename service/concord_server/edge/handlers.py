"""Wrapping a method handler: the one place that switches on a handler's kind.

A grpc.aio server interceptor gets a ``grpc.RpcMethodHandler`` whose behaviour sits
in one of four slots (unary_unary, unary_stream, stream_unary, stream_stream) and
may be a coroutine function, an async generator function or (health, reflection) a
plain function. ``wrap`` puts every call of it inside an ``Around``; every edge
interceptor (guard.py's checks, rpc_metrics.py, tracing.py) wraps through it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any, Protocol

import grpc


class Around(Protocol):
    """One call's surroundings: entered as the call starts, left as it ends however
    it ends (``__aexit__`` sees the exception, cancellation and a closed stream
    included)."""

    async def __aenter__(self) -> Any:
        """The argument the handler is given: the request, or the request stream."""

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None: ...


def kind(handler: grpc.RpcMethodHandler) -> str:
    """The slot that holds the handler's behaviour: unary_unary, unary_stream, stream_unary, stream_stream."""
    return ("stream" if handler.request_streaming else "unary") + "_" + (
        "stream" if handler.response_streaming else "unary")


def wrap(handler: grpc.RpcMethodHandler | None,
         around: Callable[[Any, grpc.aio.ServicerContext], Around]) -> grpc.RpcMethodHandler | None:
    """The handler with each call run inside ``around(request or request stream, context)``."""
    if handler is None:
        return None
    slot = kind(handler)
    inner = getattr(handler, slot)

    if handler.response_streaming and not inspect.iscoroutinefunction(inner):
        async def streaming(arg: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with around(arg, context) as arg:
                result = inner(arg, context)
                if hasattr(result, "__aiter__"):
                    async for item in result:
                        yield item
                else:  # an awaitable that writes with context.write()
                    await result

        return handler._replace(**{slot: streaming})

    async def behaviour(arg: Any, context: grpc.aio.ServicerContext) -> Any:
        async with around(arg, context) as arg:
            result = inner(arg, context)  # a plain function too (e.g. Health.List)
            return await result if inspect.isawaitable(result) else result

    return handler._replace(**{slot: behaviour})


def final_code(context: grpc.aio.ServicerContext, exc: BaseException | None) -> str:
    """The status a call ended with, as gRPC will send it."""
    if isinstance(exc, asyncio.CancelledError):
        remaining = context.time_remaining()
        return "DEADLINE_EXCEEDED" if remaining is not None and remaining <= 0 else "CANCELLED"
    code = context.code()
    if code is None or code == 0:
        # Not set: a clean end is OK; an exception the servicer let through is UNKNOWN.
        return "OK" if exc is None else "UNKNOWN"
    if isinstance(code, grpc.StatusCode):
        return code.name
    for c in grpc.StatusCode:  # an int from the C core
        if c.value[0] == code:
            return c.name
    return str(code)


class _Observed:
    __slots__ = ("_arg", "_context", "_begin", "_end", "_request", "_started")

    def __init__(self, arg: Any, context: grpc.aio.ServicerContext, begin: Callable[[], Any],
                 end: Callable[[Any, str, Any], None], request_streaming: bool) -> None:
        self._arg, self._context, self._begin, self._end = arg, context, begin, end
        self._request = None if request_streaming else arg

    async def __aenter__(self) -> Any:
        self._started = self._begin()
        return self._arg

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._end(self._started, final_code(self._context, exc), self._request)


def observe(handler: grpc.RpcMethodHandler | None, begin: Callable[[], Any],
            end: Callable[[Any, str, Any], None]) -> grpc.RpcMethodHandler | None:
    """The handler, with begin() called as a call starts and end(begin's result,
    final status code name, the request or None for client streams) as it ends,
    whatever its kind and however it ends."""
    if handler is None:
        return None
    streaming_in = handler.request_streaming
    return wrap(handler, lambda arg, context: _Observed(arg, context, begin, end, streaming_in))

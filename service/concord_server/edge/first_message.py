"""A unary call's request message must arrive within --first-message-timeout.

grpc.aio awaits a unary call's request message before it runs the method handler,
with no time limit: a client that sends the headers and never the message holds a
task and its call state for as long as the connection lives (50,000 such calls held
700 MB). This interceptor, the outermost, gives every unary-request handler the
request-stream kind instead, so gRPC hands over the call at once; it then reads the
one message itself within the timeout and runs the handler it wraps (the rest of the
interceptors and the servicer, unchanged) with it. A call whose message is late ends
DEADLINE_EXCEEDED; one that half-closes without a message, INVALID_ARGUMENT.

Client-streaming methods (lock Session, Consume, Upload) keep their kind: a Session
may rightly stay quiet until its client needs a lock; they are bounded as streams
(limits.py, and the connection's stream limit in app.server_options).
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import grpc

from ..api.status import to_status
from ..errors import DeadlineExceeded, InvalidArgument


class FirstMessageInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, timeout: float) -> None:
        self.sweeper = Sweeper(timeout)

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None or handler.request_streaming:
            return handler
        return with_first_message_timeout(handler, self.sweeper)


class _Waiting:
    __slots__ = ("deadline", "task", "done", "expired")

    def __init__(self, deadline: float, task: asyncio.Task[Any]) -> None:
        self.deadline, self.task, self.done, self.expired = deadline, task, False, False


class Sweeper:
    """Ends the calls still waiting for their first message past the timeout.

    One task for all of them, woken every quarter timeout, instead of a timer per
    call: a timer set and cancelled on every call cost a quarter of the throughput
    of a small unary call. Every call waits the same time, so the calls are in
    deadline order in a deque; a call ends within 1.25 timeouts of its headers.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._waiting: deque[_Waiting] = deque()
        self._task: asyncio.Task[None] | None = None

    def watch(self) -> _Waiting:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        waiting = _Waiting(loop.time() + self.timeout, task)
        self._waiting.append(waiting)
        if self._task is None:
            self._task = loop.create_task(self._sweep())
        return waiting

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._waiting:
                await asyncio.sleep(self.timeout / 4)
                now = loop.time()
                while self._waiting and (self._waiting[0].done or self._waiting[0].deadline <= now):
                    waiting = self._waiting.popleft()
                    if not waiting.done:
                        waiting.expired = True
                        waiting.task.cancel()
        finally:
            self._task = None


async def _first(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext, sweeper: Sweeper) -> Any:
    waiting = sweeper.watch()
    try:
        async for request in requests:
            waiting.done, waiting.task = True, None  # the sweeper must not keep a finished call's task
            return request
        waiting.done = True
        refusal: Exception = InvalidArgument("the call ended without its request message")
    except asyncio.CancelledError:
        waiting.done = True
        if not waiting.expired:
            raise
        waiting.task.uncancel()
        refusal = DeadlineExceeded(f"no request message within {sweeper.timeout:g}s of the call's headers")
    await context.abort_with_status(to_status(refusal))


def with_first_message_timeout(handler: grpc.RpcMethodHandler, sweeper: Sweeper) -> grpc.RpcMethodHandler:
    """The unary-request handler as a request-stream one that reads its message in the sweeper's timeout."""
    if handler.response_streaming:
        inner = handler.unary_stream

        async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            request = await _first(requests, context, sweeper)
            result = inner(request, context)
            if hasattr(result, "__aiter__"):
                async for item in result:
                    yield item
            elif inspect.isawaitable(result):  # writes with context.write()
                await result
            else:  # a plain generator (a sync servicer)
                for item in result:
                    yield item

        return grpc.stream_stream_rpc_method_handler(stream, request_deserializer=handler.request_deserializer,
                                                     response_serializer=handler.response_serializer)
    inner_unary = handler.unary_unary

    async def unary(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        request = await _first(requests, context, sweeper)
        result = inner_unary(request, context)
        return await result if inspect.isawaitable(result) else result

    return grpc.stream_unary_rpc_method_handler(unary, request_deserializer=handler.request_deserializer,
                                                response_serializer=handler.response_serializer)

"""Undecodable requests to servicers without ``@rpc`` (health, reflection) get
INVALID_ARGUMENT with its ErrorInfo, as Concord's own methods do (api/decoding.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any

import grpc

from ..api.decoding import Undecodable
from ..api.status import to_status
from ..errors import InvalidArgument
from .handlers import wrap


async def _abort(context: grpc.aio.ServicerContext, request: Undecodable) -> None:
    await context.abort_with_status(to_status(InvalidArgument(f"request could not be parsed: {request.reason}")))


async def _checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
    async for request in requests:
        if type(request) is Undecodable:
            await _abort(context, request)
        yield request


class _Rejecting:
    __slots__ = ("_arg", "_context", "_streaming")

    def __init__(self, arg: Any, context: grpc.aio.ServicerContext, streaming: bool) -> None:
        self._arg, self._context, self._streaming = arg, context, streaming

    async def __aenter__(self) -> Any:
        if self._streaming:  # each request as the servicer reads it
            return _checked(self._arg, self._context)
        if type(self._arg) is Undecodable:
            await _abort(self._context, self._arg)
        return self._arg

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


def reject(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """The handler, made to reject an Undecodable request itself."""
    streaming = handler.request_streaming
    wrapped = wrap(handler, lambda arg, context: _Rejecting(arg, context, streaming))
    assert wrapped is not None
    return wrapped

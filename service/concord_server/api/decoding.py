"""Requests that do not parse (e.g. a string field that is not UTF-8) get
INVALID_ARGUMENT, not gRPC's UNKNOWN.

gRPC calls a method's request deserializer before any servicer code runs and turns
its exceptions into UNKNOWN. ``add_servicer`` registers a servicer with
deserializers that return an ``Undecodable`` marker instead; ``@rpc`` (status.py)
rejects it as InvalidArgument. Servicers that are not Concord's own (health,
reflection) are registered with ``reject_undecodable=True``: each handler is wrapped
to do the same before (or, for a request stream, as) the servicer sees the marker.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError


class Undecodable:
    def __init__(self, reason: str) -> None:
        self.reason = reason


def _tolerant(deserializer: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except DecodeError as exc:
            return Undecodable(str(exc))

    return decode


class _Capture:
    """Stands in for the server while generated code registers its handlers."""

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        self.service, self.handlers = service, handlers


async def _reject(context: grpc.aio.ServicerContext, request: Undecodable) -> None:
    """Ends the call with INVALID_ARGUMENT and its ErrorInfo, as ``@rpc`` does."""
    from ..errors import InvalidArgument
    from .status import to_status  # status.py imports this module

    await context.abort_with_status(to_status(InvalidArgument(f"request could not be parsed: {request.reason}")))


def _rejecting(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """The handler, made to reject an Undecodable request itself (for servicers without ``@rpc``)."""
    kind = ("stream" if handler.request_streaming else "unary") + "_" + (
        "stream" if handler.response_streaming else "unary")
    inner = getattr(handler, kind)

    async def checked(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async for request in requests:
            if type(request) is Undecodable:
                await _reject(context, request)
            yield request

    async def arg_of(arg: Any, context: grpc.aio.ServicerContext) -> Any:
        if handler.request_streaming:
            return checked(arg, context)
        if type(arg) is Undecodable:
            await _reject(context, arg)
        return arg

    if inspect.isasyncgenfunction(inner):
        async def behaviour_gen(arg: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async for response in inner(await arg_of(arg, context), context):
                yield response

        return handler._replace(**{kind: behaviour_gen})

    async def behaviour(arg: Any, context: grpc.aio.ServicerContext) -> Any:
        result = inner(await arg_of(arg, context), context)  # a plain function too (e.g. Health.List)
        return await result if inspect.isawaitable(result) else result

    return handler._replace(**{kind: behaviour})


def add_servicer(server: grpc.aio.Server, add_to_server: Callable[[Any, Any], None], servicer: Any, *,
                 reject_undecodable: bool = False) -> None:
    """Like the generated ``add_XServicer_to_server``, with tolerant deserializers.
    ``reject_undecodable``: the servicer's methods are not wrapped in ``@rpc`` (health,
    reflection), so each handler rejects an undecodable request itself."""
    capture = _Capture()
    add_to_server(servicer, capture)
    handlers = {
        name: h._replace(request_deserializer=_tolerant(h.request_deserializer))
        for name, h in capture.handlers.items()
    }
    if reject_undecodable:
        handlers = {name: _rejecting(h) for name, h in handlers.items()}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(capture.service, handlers),))
    server.add_registered_method_handlers(capture.service, handlers)

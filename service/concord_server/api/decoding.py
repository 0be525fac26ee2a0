"""Requests that do not parse (e.g. a string field that is not UTF-8) get
INVALID_ARGUMENT, not gRPC's UNKNOWN.

gRPC calls a method's request deserializer before any servicer code runs and turns
its exceptions into UNKNOWN. ``add_servicer`` registers a servicer with
deserializers that return an ``Undecodable`` marker instead; ``@rpc`` (status.py)
rejects it as InvalidArgument. Servicers that are not Concord's own (health,
reflection) have no ``@rpc``: app.py registers them with edge/undecodable.reject
wrapped around each handler, which does the same.
"""

from __future__ import annotations

from collections.abc import Callable
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


def add_servicer(server: grpc.aio.Server, add_to_server: Callable[[Any, Any], None], servicer: Any, *,
                 wrap: Callable[[grpc.RpcMethodHandler], grpc.RpcMethodHandler] | None = None) -> None:
    """Like the generated ``add_XServicer_to_server``, with tolerant deserializers;
    ``wrap`` is applied to each handler (edge/undecodable.reject, for servicers
    whose methods are not under ``@rpc``)."""
    capture = _Capture()
    add_to_server(servicer, capture)
    handlers = {
        name: h._replace(request_deserializer=_tolerant(h.request_deserializer))
        for name, h in capture.handlers.items()
    }
    if wrap is not None:
        handlers = {name: wrap(h) for name, h in handlers.items()}
    # Generic handlers only, not also registered ones: grpc.aio's serving loop keeps a
    # pending future per registered method and hands each incoming call through an
    # asyncio.wait over all of them (100-odd here), about 9% of a small call's server
    # CPU. With none registered it waits on one; the method is found by a dict lookup.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(capture.service, handlers),))

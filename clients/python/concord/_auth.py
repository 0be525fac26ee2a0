"""TLS and bearer-token plumbing for Client and AsyncClient.

The token travels as ``authorization: Bearer <token>`` metadata that an
interceptor adds to every call, over TLS and over plaintext alike (a server on
localhost or behind a TLS-terminating proxy). Not as gRPC call credentials: gRPC
refuses those on plaintext, and closing a channel whose call credentials are a
Python metadata plugin can deadlock in grpc core (the plugin's destroy callback
wants the GIL that Channel.close holds; grpc/grpc#42247), which hung a test run.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path
from typing import Any, Union

import grpc

Pem = Union[bytes, str, "os.PathLike[str]"]  # PEM bytes, or the path of a PEM file


def read_pem(value: Pem | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return Path(value).read_bytes()


def tls_credentials(root_certificates: Pem | None, client_cert: Pem | None,
                    client_key: Pem | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(read_pem(root_certificates), read_pem(client_key), read_pem(client_cert))


def _with_token(metadata: Any, token: str) -> list[tuple[str, str]]:
    return [*(metadata or ()), ("authorization", f"Bearer {token}")]


class _Details(collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials",
                                                    "wait_for_ready", "compression")), grpc.ClientCallDetails):
    pass


class SyncToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._token = token

    def _details(self, d: Any) -> _Details:
        return _Details(d.method, d.timeout, _with_token(d.metadata, self._token), d.credentials,
                        getattr(d, "wait_for_ready", None), getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


def _aio_details(d: Any, token: str) -> grpc.aio.ClientCallDetails:
    return grpc.aio.ClientCallDetails(d.method, d.timeout, grpc.aio.Metadata(*_with_token(d.metadata, token)),
                                      d.credentials, d.wait_for_ready)


class _AioToken:
    """grpc.aio registers an interceptor for the first call type it implements only,
    so each type gets a class of its own, all sharing this one method."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def _intercept(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(_aio_details(details, self._token), request)


class _AioUnaryUnary(_AioToken, grpc.aio.UnaryUnaryClientInterceptor):
    intercept_unary_unary = _AioToken._intercept


class _AioUnaryStream(_AioToken, grpc.aio.UnaryStreamClientInterceptor):
    intercept_unary_stream = _AioToken._intercept


class _AioStreamUnary(_AioToken, grpc.aio.StreamUnaryClientInterceptor):
    intercept_stream_unary = _AioToken._intercept


class _AioStreamStream(_AioToken, grpc.aio.StreamStreamClientInterceptor):
    intercept_stream_stream = _AioToken._intercept


def aio_token_interceptors(token: str) -> list[grpc.aio.ClientInterceptor]:
    return [cls(token) for cls in (_AioUnaryUnary, _AioUnaryStream, _AioStreamUnary, _AioStreamStream)]

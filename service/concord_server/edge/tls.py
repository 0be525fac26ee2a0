"""The listening port: TLS (--tls-cert/--tls-key), mutual TLS (--tls-client-ca), or plaintext."""

from __future__ import annotations

from pathlib import Path

import grpc

from ..config import Settings


def server_credentials(settings: Settings) -> grpc.ServerCredentials | None:
    if not settings.tls_cert or not settings.tls_key:
        return None
    pair = (Path(settings.tls_key).read_bytes(), Path(settings.tls_cert).read_bytes())
    client_ca = Path(settings.tls_client_ca).read_bytes() if settings.tls_client_ca else None
    # With a client CA every client must present a certificate that CA signed.
    return grpc.ssl_server_credentials([pair], root_certificates=client_ca, require_client_auth=client_ca is not None)


def add_port(server: grpc.aio.Server, settings: Settings) -> int:
    credentials = server_credentials(settings)
    if credentials is None:
        return server.add_insecure_port(settings.listen)
    return server.add_secure_port(settings.listen, credentials)

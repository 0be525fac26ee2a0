"""``python -m concord_server.healthcheck [host:port]``: exit 0 if the server reports
SERVING over grpc.health.v1, else 1. The Docker HEALTHCHECK runs it, so the container
turns unhealthy while the server cannot reach Redis (it reports NOT_SERVING then,
see store/health.py) and healthy again once it can.

It reads the server's own environment, so it follows the server's settings: with
CONCORD_TLS_CERT set it connects over TLS, trusting CONCORD_HEALTHCHECK_CA (a PEM
file; default: the system's CAs), presenting CONCORD_HEALTHCHECK_CERT/_KEY when the
server wants client certificates (CONCORD_TLS_CLIENT_CA), and checking the name in
CONCORD_HEALTHCHECK_SERVER_NAME (default: the host it connects to). With
CONCORD_AUTH_HEALTH on it sends CONCORD_HEALTHCHECK_TOKEN as its bearer token.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _read(path: str | None) -> bytes | None:
    return Path(path).read_bytes() if path else None


def channel(target: str, env: Mapping[str, str]) -> grpc.Channel:
    if not env.get("CONCORD_TLS_CERT"):
        return grpc.insecure_channel(target)
    creds = grpc.ssl_channel_credentials(_read(env.get("CONCORD_HEALTHCHECK_CA")),
                                         _read(env.get("CONCORD_HEALTHCHECK_KEY")),
                                         _read(env.get("CONCORD_HEALTHCHECK_CERT")))
    name = env.get("CONCORD_HEALTHCHECK_SERVER_NAME")
    return grpc.secure_channel(target, creds, options=[("grpc.ssl_target_name_override", name)] if name else [])


def main(argv: list[str], env: Mapping[str, str] = os.environ) -> int:
    target = argv[0] if argv else env.get("CONCORD_LISTEN", "127.0.0.1:50051")
    host, _, port = target.rpartition(":")
    if host in ("0.0.0.0", "[::]", ""):
        target = f"127.0.0.1:{port}"
    token = env.get("CONCORD_HEALTHCHECK_TOKEN")
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    try:
        with channel(target, env) as ch:
            status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3,
                                                          metadata=metadata).status
    except (grpc.RpcError, OSError) as exc:
        print(f"unhealthy: {exc.code().name if isinstance(exc, grpc.RpcError) else exc}", file=sys.stderr)
        return 1
    if status != health_pb2.HealthCheckResponse.SERVING:  # e.g. NOT_SERVING while Redis is unreachable
        print(f"unhealthy: {health_pb2.HealthCheckResponse.ServingStatus.Name(status)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""``python -m concord_server.healthcheck [host:port]``: exit 0 if the server reports
SERVING over grpc.health.v1, else 1. The Docker HEALTHCHECK runs it."""

from __future__ import annotations

import os
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main(argv: list[str]) -> int:
    target = argv[0] if argv else os.environ.get("CONCORD_LISTEN", "127.0.0.1:50051")
    host, _, port = target.rpartition(":")
    if host in ("0.0.0.0", "[::]", ""):
        target = f"127.0.0.1:{port}"
    try:
        with grpc.insecure_channel(target) as ch:
            status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(), timeout=3).status
    except grpc.RpcError as exc:
        print(f"unhealthy: {exc.code().name}", file=sys.stderr)
        return 1
    return 0 if status == health_pb2.HealthCheckResponse.SERVING else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

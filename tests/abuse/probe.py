"""The victim tenant's latency probe, run as a process of its own so the attacker's
work in the test process (its threads, its GIL) cannot show up as victim latency.

    python tests/abuse/probe.py TARGET TOKEN OUT [INTERVAL_S]

Every INTERVAL_S (default 0.05) it calls LockService.Describe on a lock of its own,
with a 10 s deadline, on one channel kept open, and appends one line to OUT:
``<time.monotonic()> <latency seconds> <status code name>``. CLOCK_MONOTONIC is
system-wide on Linux, so the test compares these times with its own phase marks.
It runs until killed (SIGTERM).
"""

from __future__ import annotations

import sys
import time

import grpc

from concord.lock.v1 import lock_pb2, lock_pb2_grpc


def main(target: str, token: str, out: str, interval: float) -> None:
    metadata = (("authorization", f"Bearer {token}"),)
    request = lock_pb2.DescribeRequest(name="victim-probe")
    with grpc.insecure_channel(target) as channel, open(out, "a", buffering=1) as sink:
        stub = lock_pb2_grpc.LockServiceStub(channel)
        next_at = time.monotonic()
        while True:
            start = time.monotonic()
            try:
                stub.Describe(request, metadata=metadata, timeout=10)
                code = "OK"
            except grpc.RpcError as exc:
                code = exc.code().name
            sink.write(f"{start:.6f} {time.monotonic() - start:.6f} {code}\n")
            next_at = max(next_at + interval, time.monotonic())  # no catch-up burst after a slow call
            time.sleep(max(0.0, next_at - time.monotonic()))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 0.05)

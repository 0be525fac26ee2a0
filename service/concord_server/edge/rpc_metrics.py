"""The RPC metrics: a grpc.aio server interceptor (``--metrics-listen``, metrics.py
serves them).

Every call, unary or streaming, is counted when it ends, with its final status
code, and timed. Calls that may block (Lock/Semaphore Acquire, Dequeue) and streams
can last minutes, so there is one duration histogram whose buckets run from 0.5 ms
to an hour, and a ``type`` label (unary, blocking, server_stream, client_stream,
bidi_stream) so a latency panel can leave the waits out with ``type="unary"``.
Queue calls that end OK note their queue names in ``RecentQueues``, whose depths
metrics.py reads at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..metrics import RecentQueues
from .handlers import observe
from .methods import BLOCKING_METHODS

QUEUE_SERVICE = "/concord.queue.v1.QueueService/"

RPC_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
               300.0, 900.0, 3600.0)


def _split(method: str) -> tuple[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return service, name


def _kind(method: str, handler: grpc.RpcMethodHandler) -> str:
    if handler.request_streaming and handler.response_streaming:
        return "bidi_stream"
    if handler.request_streaming:
        return "client_stream"
    if handler.response_streaming:
        return "server_stream"
    return "blocking" if method in BLOCKING_METHODS else "unary"


class RpcMetrics(grpc.aio.ServerInterceptor):
    def __init__(self, registry: CollectorRegistry, recent_queues: RecentQueues) -> None:
        labels = ("service", "method", "type")
        self.handled = Counter("concord_rpc_handled", "RPCs completed, by final status code",
                               (*labels, "code"), registry=registry)
        self.duration = Histogram("concord_rpc_duration_seconds",
                                  "RPC duration from start to final status (streams: their whole life; "
                                  "blocking: includes the wait)", (*labels, "code"),
                                  buckets=RPC_BUCKETS, registry=registry)
        self.in_flight = Gauge("concord_rpc_in_flight", "RPCs started and not yet completed", labels,
                               registry=registry)
        self.streams = Gauge("concord_streams_open", "streaming RPCs open now", ("service", "method"),
                             registry=registry)
        self._queues = recent_queues

    async def intercept_service(self, continuation: Callable[[grpc.HandlerCallDetails], Any],
                                details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        handler = await continuation(details)
        if handler is None:
            return None
        method = details.method
        service, name = _split(method)
        kind = _kind(method, handler)
        labels = (service, name, kind)
        queue_call = method.startswith(QUEUE_SERVICE)

        def begin() -> float:
            self.in_flight.labels(*labels).inc()
            if kind.endswith("stream"):
                self.streams.labels(service, name).inc()
            return time.perf_counter()

        def end(started: float, code: str, request: Any) -> None:
            self.handled.labels(*labels, code).inc()
            self.duration.labels(*labels, code).observe(time.perf_counter() - started)
            self.in_flight.labels(*labels).dec()
            if kind.endswith("stream"):
                self.streams.labels(service, name).dec()
            if queue_call and code == "OK" and request is not None:
                self._queues.seen(_queue_names(request))

        return observe(handler, begin, end)


def _queue_names(request: Any) -> list[str]:
    names = getattr(request, "queues", None)
    if names is not None and not isinstance(names, str):
        return list(names)
    name = getattr(request, "queue", None)
    return [name] if isinstance(name, str) and name else []

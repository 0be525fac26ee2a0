"""--tracing: one OpenTelemetry server span per gRPC call, when the packages are installed."""

from __future__ import annotations

import dataclasses

import grpc
import pytest

trace = pytest.importorskip("opentelemetry.trace")
pytest.importorskip("opentelemetry.instrumentation.grpc")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from concord.lock.v1 import lock_pb2, lock_pb2_grpc  # noqa: E402
from concord_server import app, config  # noqa: E402
from support import async_wait_until  # noqa: E402

EXPORTER = InMemorySpanExporter()


_installed: list[bool] = []


@pytest.fixture(scope="module", autouse=True)
def provider():
    """The process's tracer provider can be set once: this module's, exporting to memory
    (the module runs once per backend, so install only the first time)."""
    current = trace.get_tracer_provider()
    if _installed:
        return
    _installed.append(True)
    if isinstance(current, trace.ProxyTracerProvider):
        p = TracerProvider()
        p.add_span_processor(SimpleSpanProcessor(EXPORTER))
        trace.set_tracer_provider(p)
    elif not isinstance(current, TracerProvider):
        pytest.skip("another tracer provider is installed in this process")
    else:
        current.add_span_processor(SimpleSpanProcessor(EXPORTER))


async def test_calls_become_server_spans(redis_server, name):
    settings = dataclasses.replace(config.load([]), listen="127.0.0.1:0", redis_url=redis_server.url, tracing=True)
    server = await app.start(settings)
    try:
        EXPORTER.clear()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{server.port}") as ch:
            stub = lock_pb2_grpc.LockServiceStub(ch)
            got = await stub.Describe(lock_pb2.DescribeRequest(name=name))
            assert not got.held
            with pytest.raises(grpc.RpcError) as bad:
                await stub.Describe(lock_pb2.DescribeRequest(name=""))
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        def spans():
            return [s for s in EXPORTER.get_finished_spans() if s.name == "/concord.lock.v1.LockService/Describe"]

        async def both_ended() -> bool:
            return len(spans()) == 2

        await async_wait_until(both_ended, message="two Describe spans")
        codes = sorted(s.attributes.get("rpc.grpc.status_code") for s in spans())
        assert codes == [grpc.StatusCode.OK.value[0], grpc.StatusCode.INVALID_ARGUMENT.value[0]]
        assert all(s.kind == trace.SpanKind.SERVER for s in spans())
        failed = [s for s in spans() if s.attributes.get("rpc.grpc.status_code") != 0]
        assert failed[0].status.status_code == trace.StatusCode.ERROR
    finally:
        await server.stop()


def test_off_by_default():
    assert config.load([]).tracing is False
    from concord_server.edge import tracing
    assert tracing.interceptors(config.load([])) == []

"""OpenTelemetry tracing of gRPC calls (``--tracing``): one server span per call.

Optional: the packages come with the ``[tracing]`` extra, and nothing here is
imported unless ``--tracing`` is on. The instrumentation's own server interceptor
is added to this server only (``GrpcAioInstrumentorServer`` would patch
``grpc.aio.server`` for the whole process instead), so it also carries incoming
``traceparent`` metadata into the span's context.

Configuration is OpenTelemetry's own: if the process already has a tracer provider
(run under ``opentelemetry-instrument``, or set by an embedding program), it is
used as is. Otherwise one is built from the standard variables: OTEL_SERVICE_NAME
and OTEL_RESOURCE_ATTRIBUTES (resource), OTEL_TRACES_SAMPLER(_ARG) (sampling, read
by the SDK), and OTEL_TRACES_EXPORTER: a comma-separated list of exporters
registered under the ``opentelemetry_traces_exporter`` entry point (``otlp`` needs
opentelemetry-exporter-otlp, ``console`` ships with the SDK, ``none`` exports
nothing; default ``otlp``), each behind a batching span processor.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import entry_points
from typing import Any

log = logging.getLogger(__name__)


def interceptors(settings: Any) -> list[Any]:
    """The server interceptors tracing needs: none unless settings.tracing is on."""
    if not getattr(settings, "tracing", False):
        return []
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.grpc import aio_server_interceptor
    except ImportError as exc:
        raise SystemExit(f"--tracing needs OpenTelemetry: pip install 'concord-server[tracing]' ({exc})") from exc
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # nobody configured one: build it from OTEL_*
        provider = _provider_from_env()
        trace.set_tracer_provider(provider)
    return [aio_server_interceptor(tracer_provider=provider), _span_status_interceptor_class()()]


def _span_status_interceptor_class() -> type:
    import grpc
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    from .handlers import observe

    class SpanStatus(grpc.aio.ServerInterceptor):
        """Puts the call's final status on its span. The instrumentation sees
        ``context.abort()`` but not ``abort_with_status()``, which every servicer
        uses (it carries the ErrorInfo), so without this a failed call's span says OK."""

        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            handler = await continuation(details)
            if handler is None:
                return None

            def end(span: Any, code: str, _request: Any) -> None:
                value = grpc.StatusCode[code].value[0] if code in grpc.StatusCode.__members__ else 2
                span.set_attribute("rpc.grpc.status_code", value)
                if code != "OK":
                    span.set_status(Status(StatusCode.ERROR, code))

            return observe(handler, trace.get_current_span, end)

    return SpanStatus


def _provider_from_env() -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "concord-server"})
    provider = TracerProvider(resource=resource)  # the sampler comes from OTEL_TRACES_SAMPLER
    registered = {ep.name: ep for ep in entry_points(group="opentelemetry_traces_exporter")}
    for name in filter(None, (n.strip() for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(","))):
        if name == "none":
            continue
        if name not in registered:
            log.warning("tracing: no span exporter %r is installed (have: %s); its spans are dropped",
                        name, ", ".join(sorted(registered)) or "none")
            continue
        provider.add_span_processor(BatchSpanProcessor(registered[name].load()()))
    return provider

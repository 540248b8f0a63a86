"""Optional OpenTelemetry tracing (the `tracing` extra): a server span per TodoService rpc.

The span continues the caller's trace (W3C ``traceparent`` metadata), store operations are its
child spans (``metrics.InstrumentedStore``), its status is the rpc's status code, and the trace id
appears in log lines. Export is OTLP, configured by the standard ``OTEL_*`` environment variables
(``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``…), read by the
SDK itself. Only imported when tracing is on, so the server runs without the extra.
"""

from __future__ import annotations

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer


def provider_from_environment() -> TracerProvider:
    """A provider exporting by OTLP as ``OTEL_*`` says; ``service.name`` is sessiontodo unless set there."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "sessiontodo"}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def server_interceptor(provider: TracerProvider, service_name: str) -> grpc.aio.ServerInterceptor:
    """Spans for ``service_name`` only: health checks and reflection would drown the traces (and health's
    Watch is not the async generator the instrumentation expects of a streaming rpc)."""
    only_ours = filters.service_name(service_name)
    return aio_server_interceptor(tracer_provider=provider, filter_=only_ours)  # type: ignore[no-untyped-call]


def store_tracer(provider: TracerProvider) -> Tracer:
    return provider.get_tracer("sessiontodo_server.store")


def record_status(code: grpc.StatusCode) -> None:
    """Put the rpc's final status code on the current server span (the instrumentation sees
    ``abort`` but not ``abort_with_status``, which carries our error details)."""
    span = trace.get_current_span()
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))

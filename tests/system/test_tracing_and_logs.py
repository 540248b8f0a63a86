"""OpenTelemetry spans (in-memory exporter), JSON log lines, and the trace id in them."""

from __future__ import annotations

import json
import logging
import subprocess
from collections.abc import AsyncIterator, Iterator

import grpc
import pytest
from opentelemetry import trace
from opentelemetry.propagate import inject
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer, start_server
from sessiontodo_server.observability.logs import REQUEST_LOGGER, JsonFormatter, RpcContextFilter
from sessiontodo_server.observability.tracing import provider_from_environment
from tests.support import ServerProcess, make_settings


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@pytest.fixture
async def traced(provider: TracerProvider) -> AsyncIterator[RunningServer]:
    running = await start_server(make_settings(log_requests=True), tracer_provider=provider)
    yield running
    await running.stop()


@pytest.fixture
def json_records() -> Iterator[list[dict[str, object]]]:
    """Every log line of the test as the JSON formatter writes it, parsed back."""
    lines: list[dict[str, object]] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(json.loads(self.format(record)))

    handler = Collect()
    handler.addFilter(RpcContextFilter())
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.addHandler(handler)
    previous = root.level
    root.setLevel(logging.INFO)
    yield lines
    root.removeHandler(handler)
    root.setLevel(previous)


async def test_each_rpc_is_a_server_span_with_store_operations_as_children(
    traced: RunningServer, exporter: InMemorySpanExporter
) -> None:
    async with grpc.aio.insecure_channel(traced.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=[pb.Todo(content="a")]))
    spans = exporter.get_finished_spans()
    [replace] = [span for span in spans if span.name == "/sessiontodo.v1.TodoService/ReplaceTodos"]
    assert replace.kind is trace.SpanKind.SERVER
    assert replace.attributes is not None
    assert replace.attributes["rpc.grpc.status_code"] == 0
    children = [span.name for span in spans if span.parent and span.parent.span_id == replace.context.span_id]
    assert children == ["store.write"]  # one store call: the write applies itself, nothing is read first


async def test_the_server_span_continues_the_callers_trace(
    traced: RunningServer, exporter: InMemorySpanExporter, provider: TracerProvider
) -> None:
    tracer = provider.get_tracer("test client")
    with tracer.start_as_current_span("caller") as caller:
        carrier: dict[str, str] = {}
        inject(carrier)  # W3C traceparent, as any instrumented client sends it
        async with grpc.aio.insecure_channel(traced.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="s"), metadata=tuple(carrier.items()))
    [server_span] = [span for span in exporter.get_finished_spans() if span.name.endswith("/CreateSession")]
    assert server_span.context.trace_id == caller.get_span_context().trace_id
    assert server_span.parent is not None
    assert server_span.parent.span_id == caller.get_span_context().span_id


async def test_a_failed_rpc_span_has_an_error_status_and_its_code(
    traced: RunningServer, exporter: InMemorySpanExporter
) -> None:
    async with grpc.aio.insecure_channel(traced.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetTodos(pb.GetTodosRequest(session_id="missing"))
    [span] = [span for span in exporter.get_finished_spans() if span.name.endswith("/GetTodos")]
    assert span.attributes is not None
    assert span.attributes["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert span.status.status_code is trace.StatusCode.ERROR


async def test_health_checks_are_not_traced(traced: RunningServer, exporter: InMemorySpanExporter) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(traced.address) as channel:
        await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
    assert [span.name for span in exporter.get_finished_spans() if span.kind is trace.SpanKind.SERVER] == []


async def test_a_request_line_carries_method_session_code_latency_and_trace_id(
    traced: RunningServer, exporter: InMemorySpanExporter, json_records: list[dict[str, object]]
) -> None:
    async with grpc.aio.insecure_channel(traced.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetTodos(pb.GetTodosRequest(session_id="missing"))
    [line] = [line for line in json_records if line["logger"] == REQUEST_LOGGER]
    [span] = [span for span in exporter.get_finished_spans() if span.name.endswith("/GetTodos")]
    assert line["method"] == "/sessiontodo.v1.TodoService/GetTodos"
    assert line["session_id"] == "missing"
    assert line["code"] == "NotFound"
    assert isinstance(line["latency_ms"], float)
    assert line["latency_ms"] >= 0
    assert line["trace_id"] == format(span.context.trace_id, "032x")
    assert {"time", "level", "message"} <= line.keys()


async def test_lines_logged_inside_an_rpc_carry_its_session_and_method(
    traced: RunningServer, json_records: list[dict[str, object]]
) -> None:
    async with grpc.aio.insecure_channel(traced.address) as channel:
        await pb_grpc.TodoServiceStub(channel).CreateSession(pb.CreateSessionRequest(session_id="ses_1"))
    [created] = [line for line in json_records if line["message"].startswith("session ses_1 created")]  # type: ignore[attr-defined]
    assert created["session_id"] == "ses_1"
    assert created["method"] == "/sessiontodo.v1.TodoService/CreateSession"


@pytest.mark.process
def test_the_server_process_writes_one_json_object_per_line_to_stderr() -> None:
    server = ServerProcess(
        "--store", "memory://", "--log-format", "json", "--log-requests", "true", stderr=subprocess.PIPE
    )
    with server:
        assert server.process is not None
        with grpc.insecure_channel(server.address) as channel:
            pb_grpc.TodoServiceStub(channel).CreateSession(pb.CreateSessionRequest(session_id="demo"))
        server.stop()
        assert server.process.stderr is not None
        lines = [json.loads(line) for line in server.process.stderr.read().decode().splitlines()]
    [request] = [line for line in lines if line["logger"] == REQUEST_LOGGER and "TodoService" in line["method"]]
    assert (request["method"], request["session_id"], request["code"]) == (
        "/sessiontodo.v1.TodoService/CreateSession",
        "demo",
        "OK",
    )
    assert any(line["message"].startswith("serving on") for line in lines)


def test_tracing_from_the_environment_names_the_service_sessiontodo_unless_otel_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    provider = provider_from_environment()
    assert provider.resource.attributes["service.name"] == "sessiontodo"
    provider.shutdown()
    monkeypatch.setenv("OTEL_SERVICE_NAME", "todo-east")
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
    provider = provider_from_environment()
    assert provider.resource.attributes["service.name"] == "todo-east"
    assert provider.resource.attributes["deployment.environment"] == "test"
    provider.shutdown()

"""Prometheus metrics on --metrics-port: go-grpc-prometheus's names, the service's gauges and counters."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

import grpc
import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import Aborted, NotFound, Todo, TodoClient
from sessiontodo_opencode.metrics import SidecarMetrics
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.mutations import ReplaceTodos
from sessiontodo_server.domain.store import Written
from sessiontodo_server.domain.values import Limits, SessionInfo, TodoDraft
from sessiontodo_server.observability import metrics as metrics_module
from sessiontodo_server.observability.metrics import InstrumentedStore, Metrics
from sessiontodo_server.stores.memory import MemoryStore
from tests.support import ROOT, eventually

SERVICE = "sessiontodo.v1.TodoService"


async def scrape(server: RunningServer) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the metrics endpoint, by name and labels."""
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")
    response.raise_for_status()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def rpc(method: str, grpc_type: str = "unary") -> dict[str, str]:
    return {"grpc_type": grpc_type, "grpc_service": SERVICE, "grpc_method": method}


async def test_metrics_are_off_by_default(server: RunningServer) -> None:
    assert server.metrics is None
    assert server.metrics_port is None


async def test_the_metrics_endpoint_listens_on_loopback_by_default(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    assert server.metrics_port
    async with httpx.AsyncClient() as http:
        response = await http.get(f"http://127.0.0.1:{server.metrics_port}/metrics")
    assert response.status_code == 200
    assert "grpc_server_handled_total" in response.text


async def test_every_method_and_code_is_zero_before_the_first_call(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    samples = await scrape(server)
    assert ("grpc_server_handled_total", frozenset({**rpc("AddTodo"), "grpc_code": "Aborted"}.items())) in samples
    assert ("grpc_server_started_total", frozenset(rpc("WatchTodos", "server_stream").items())) in samples
    assert value(samples, "grpc_server_started_total", **rpc("GetTodos")) == 0


async def test_unary_calls_are_counted_by_method_and_go_code_name(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        await client.get_todos("s")
        with pytest.raises(NotFound):
            await client.get_todos("missing")
        added = await client.add_todo("s", Todo(content="a"))
        with pytest.raises(Aborted):
            await client.add_todo("s", Todo(content="b"), expected_revision=added.revision - 1)
    samples = await scrape(server)
    assert value(samples, "grpc_server_started_total", **rpc("GetTodos")) == 2
    assert value(samples, "grpc_server_handled_total", **rpc("GetTodos"), grpc_code="OK") == 1
    assert value(samples, "grpc_server_handled_total", **rpc("GetTodos"), grpc_code="NotFound") == 1
    assert value(samples, "grpc_server_handled_total", **rpc("AddTodo"), grpc_code="Aborted") == 1
    assert value(samples, "grpc_server_handling_seconds_count", **rpc("GetTodos")) == 2
    assert value(samples, "grpc_server_msg_sent_total", **rpc("CreateSession")) == 1
    assert value(samples, "sessiontodo_write_conflicts_total", reason="expected_revision") == 1


async def test_a_cancelled_watch_is_counted_as_canceled_with_its_messages(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
        await asyncio.wait_for(call.read(), 5)
        await stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=pb.Todo(content="a")))
        await asyncio.wait_for(call.read(), 5)
        samples = await scrape(server)
        assert value(samples, "sessiontodo_watchers") == 1
        call.cancel()
    watch = rpc("WatchTodos", "server_stream")

    async def counted_as_canceled() -> bool:
        samples = await scrape(server)
        return value(samples, "grpc_server_handled_total", **watch, grpc_code="Canceled") == 1

    await eventually(counted_as_canceled)
    samples = await scrape(server)
    assert value(samples, "grpc_server_msg_sent_total", **watch) == 2
    assert value(samples, "sessiontodo_watchers") == 0


async def test_feed_streams_are_a_gauge_of_their_own(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        feed = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True))
        await asyncio.wait_for(feed.read(), 5)  # the end-of-snapshot bookmark: the feed is open
        samples = await scrape(server)
        assert (value(samples, "sessiontodo_feed_streams"), value(samples, "sessiontodo_watchers")) == (1, 0)
        feed.cancel()

    async def closed() -> bool:
        return value(await scrape(server), "sessiontodo_feed_streams") == 0

    await eventually(closed)


async def test_the_session_gauge_follows_the_store(start: Callable[..., Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_module, "SESSION_COUNT_INTERVAL", 0.05)
    server = await start(metrics_port=0)
    async with TodoClient.connect(server.address) as client:
        for session_id in ("a", "b", "c"):
            await client.create_session(session_id)
        await client.remove_session("b")

    async def two_sessions() -> bool:
        return value(await scrape(server), "sessiontodo_sessions") == 2

    await eventually(two_sessions)


async def test_memory_budget_use_is_exported_by_share(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0, memory_budget=64 << 20)
    before = value(await scrape(server), "sessiontodo_memory_held_bytes", share="lists")
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        await client.replace_todos("s", [Todo(content="x" * 4000) for _ in range(10)])
    samples = await scrape(server)
    assert value(samples, "sessiontodo_memory_budget_bytes", share="lists") == 32 << 20
    assert value(samples, "sessiontodo_memory_budget_bytes", share="buffers") == 16 << 20
    assert value(samples, "sessiontodo_memory_held_bytes", share="lists") >= before + 40_000
    assert value(samples, "sessiontodo_memory_held_bytes", share="history") >= 40_000


async def test_store_operations_are_timed_by_operation(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        await client.replace_todos("s", [Todo(content="a")])
    samples = await scrape(server)
    assert value(samples, "sessiontodo_store_seconds_count", operation="write") == 1
    assert value(samples, "sessiontodo_store_seconds_count", operation="create_session") == 1
    assert value(samples, "sessiontodo_store_errors_total", operation="write") == 0


class _BrokenDisk(MemoryStore):
    async def write(self, operation: Write, context: WriteContext) -> Written:
        raise OSError("disk full")


async def test_a_failing_store_operation_is_counted_as_a_store_error() -> None:
    metrics = Metrics()
    store = InstrumentedStore(_BrokenDisk(), metrics)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    with pytest.raises(OSError, match="disk full"):
        await store.write(Write("s", ReplaceTodos(())), WriteContext("", "", 0.0, Limits()))
    assert metrics.registry.get_sample_value("sessiontodo_store_errors_total", {"operation": "write"}) == 1
    assert metrics.registry.get_sample_value("sessiontodo_store_errors_total", {"operation": "create_session"}) == 0


async def test_a_lagging_watcher_reset_is_counted(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0, watch_buffer=1)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
        await asyncio.wait_for(call.read(), 5)
        # Writes made in one turn of the server's event loop overflow the watcher's buffer.
        for n in range(10):
            await server.book.add("s", TodoDraft(content=f"burst {n}"))
        reset = await asyncio.wait_for(call.read(), 5)
        call.cancel()
    assert reset.kind == pb.CHANGE_KIND_RESET
    samples = await scrape(server)
    assert value(samples, "sessiontodo_watch_resets_total", reason="lagged") >= 1


async def test_a_resume_beyond_history_is_counted_as_a_history_reset(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0, history_limit=1)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        for n in range(3):
            await client.add_todo("s", Todo(content=f"t{n}"))
        async for event in client.watch("s", after_revision=0):
            assert event.kind.value == "reset"
            break
    samples = await scrape(server)
    assert value(samples, "sessiontodo_watch_resets_total", reason="history") == 1


async def test_every_metric_the_grafana_dashboard_queries_is_exported(start: Callable[..., Any]) -> None:
    server = await start(metrics_port=0)
    sidecar = SidecarMetrics()
    sidecar.sse_clients.set(0)
    exported = {name for name, _ in await scrape(server)} | {
        sample.name for family in sidecar.registry.collect() for sample in family.samples
    }
    sidecar.requests.labels("GET", "/event", "200")
    sidecar.seconds.labels("GET", "/event")
    exported |= {sample.name for family in sidecar.registry.collect() for sample in family.samples}
    dashboard = json.loads((ROOT / "docs" / "grafana-dashboard.json").read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", ())]
    queried = {name for query in queries for name in re.findall(r"\b((?:grpc_server|sessiontodo|process)_\w+)", query)}
    assert len(queried) >= 10
    assert queried <= exported, queried - exported

"""The sidecar's Prometheus metrics (``--metrics``): requests by route template and status, SSE clients."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
from prometheus_client.parser import text_string_to_metric_families

from sessiontodo_opencode import RunningSidecar
from tests.peers.opencode.opencode_support import EventFeed
from tests.support import eventually


async def samples(http: httpx.AsyncClient) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = await http.get("/metrics")
    assert response.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def requests(method: str, route: str, status: str) -> tuple[str, frozenset[tuple[str, str]]]:
    return (
        "sessiontodo_opencode_http_requests_total",
        frozenset({"method": method, "route": route, "status": status}.items()),
    )


async def test_metrics_are_off_by_default(http: httpx.AsyncClient) -> None:
    assert (await http.get("/metrics")).status_code == 404


async def test_requests_are_counted_by_route_template_and_status(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]],
) -> None:
    sidecar = await launch_sidecar(metrics=True)
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as http:
        assert (await http.post("/session", json={"id": "ses_a"})).status_code == 200
        assert (
            await http.put("/session/ses_a/todo", json=[{"content": "x", "status": "pending", "priority": "high"}])
        ).status_code == 200
        assert (await http.get("/session/ses_a/todo")).status_code == 200
        assert (await http.get("/session/ses_missing/todo")).status_code == 404
        assert (await http.get("/no/such/route")).status_code == 404
        found = await samples(http)
    assert found[requests("GET", "/session/{session_id}/todo", "200")] == 1
    assert found[requests("GET", "/session/{session_id}/todo", "404")] == 1
    assert found[requests("PUT", "/session/{session_id}/todo", "200")] == 1
    assert found[requests("GET", "other", "404")] == 1
    latency = (
        "sessiontodo_opencode_http_request_seconds_count",
        frozenset({"method": "GET", "route": "/session/{session_id}/todo"}.items()),
    )
    assert found[latency] == 2


async def test_connected_event_clients_are_a_gauge(launch_sidecar: Callable[..., Awaitable[RunningSidecar]]) -> None:
    sidecar = await launch_sidecar(metrics=True)
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10) as http:
        gauge: tuple[str, frozenset[tuple[str, str]]] = ("sessiontodo_opencode_sse_clients", frozenset())
        response = await http.send(http.build_request("GET", "/event"), stream=True)
        feed = EventFeed(response)
        await feed.next_event()
        assert (await samples(http))[gauge] == 1
        await feed.aclose()

        async def none_connected() -> bool:
            return (await samples(http))[gauge] == 0

        await eventually(none_connected)
        assert (await samples(http))[requests("GET", "/event", "200")] == 1

"""Fixtures for the OpenCode gateway: a sidecar on a free port in front of a real server, and SSE feeds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from sessiontodo_client import TodoClient
from sessiontodo_opencode import RunningSidecar, Settings, start_sidecar
from sessiontodo_server.app import RunningServer
from tests.peers.opencode.opencode_support import EventFeed

TEST_HEARTBEAT = 0.3
"""Heartbeat interval of the test sidecars, so that heartbeats show up within a test."""


@pytest.fixture
async def launch_sidecar(server: RunningServer) -> AsyncIterator[Callable[..., Awaitable[RunningSidecar]]]:
    """Start sidecars for ``server`` with setting overrides; all are stopped after the test."""
    started: list[tuple[RunningSidecar, TodoClient]] = []

    async def _launch(address: str | None = None, **overrides: Any) -> RunningSidecar:
        values: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "heartbeat_interval": TEST_HEARTBEAT,
            "catch_up_window": 0.0,  # like upstream: no replay at all (tests of the window set one)
            "shutdown_grace": 1.0,
        }
        values.update(overrides)
        client = TodoClient.connect(address or server.address)
        running = await start_sidecar(Settings(**values), client)
        started.append((running, client))
        return running

    yield _launch
    for running, client in started:
        await running.stop()
        await client.close()


@pytest.fixture
async def sidecar(launch_sidecar: Callable[..., Awaitable[RunningSidecar]]) -> RunningSidecar:
    return await launch_sidecar()


@pytest.fixture
async def http(sidecar: RunningSidecar) -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=20)
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10.0, limits=limits) as http:
        yield http


@pytest.fixture
async def open_feed(http: httpx.AsyncClient) -> AsyncIterator[Callable[..., Awaitable[EventFeed]]]:
    """Open ``/event`` streams (query parameters as keywords) and read past ``server.connected``."""
    feeds: list[EventFeed] = []

    async def _open(**params: str) -> EventFeed:
        response = await http.send(http.build_request("GET", "/event", params=params), stream=True)
        assert response.status_code == 200, (response.status_code, await response.aread())
        feed = EventFeed(response)
        feeds.append(feed)
        connected = await feed.next_event()
        assert connected["type"] == "server.connected", connected
        return feed

    yield _open
    for feed in feeds:
        await feed.aclose()

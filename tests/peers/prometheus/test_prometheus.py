"""A real Prometheus server (Debian's ``prometheus``) scrapes a real server process, and the values
are read back through its HTTP query API, as a dashboard would."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sessiontodo_client import NotFound, Todo, TodoClient
from tests.support import ServerProcess, free_port, terminate

pytestmark = pytest.mark.process


def prometheus_binary() -> str:
    """``prometheus`` from PATH (``.ci/run`` installs Debian's package when it is missing)."""
    binary = shutil.which("prometheus")
    if binary is None:
        raise RuntimeError("prometheus is not installed: apt-get install prometheus (see .ci/run)")
    return binary


class Prometheus:
    """One Prometheus on a free loopback port, scraping ``target`` every half second."""

    def __init__(self, directory: Path, target: str) -> None:
        self.url = f"http://127.0.0.1:{free_port()}"
        config = directory / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 500ms\n  scrape_timeout: 400ms\n"
            f"scrape_configs:\n  - job_name: sessiontodo\n    static_configs:\n      - targets: ['{target}']\n"
        )
        self._argv = [
            prometheus_binary(),
            f"--config.file={config}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address={self.url.removeprefix('http://')}",
        ]
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Prometheus:
        self._process = subprocess.Popen(self._argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._process is not None
        terminate(self._process)

    async def query(self, expression: str) -> list[dict[str, object]]:
        """The instant vector of a PromQL expression (empty while the server is not ready)."""
        try:
            async with httpx.AsyncClient(timeout=5) as http:
                response = await http.get(f"{self.url}/api/v1/query", params={"query": expression})
        except httpx.TransportError:
            return []
        if response.status_code != 200:
            return []
        body = response.json()
        assert body["status"] == "success", body
        return body["data"]["result"]

    async def value_once(self, expression: str, expected: float, timeout: float = 60.0) -> float:
        """Poll until the expression's single value equals ``expected``; fail with the last one seen."""
        deadline = time.monotonic() + timeout
        last: float | None = None
        while time.monotonic() < deadline:
            result = await self.query(expression)
            if len(result) == 1:
                last = float(result[0]["value"][1])  # type: ignore[index]
                if last == expected:
                    return last
            await asyncio.sleep(0.2)
        raise AssertionError(f"{expression} = {last}, expected {expected}, after {timeout}s")


@pytest.fixture
def scraped_server(tmp_path: Path) -> Iterator[tuple[ServerProcess, Prometheus]]:
    metrics_port = free_port()
    with (
        ServerProcess("--store", "memory://", "--metrics-port", str(metrics_port)) as server,
        Prometheus(tmp_path, f"127.0.0.1:{metrics_port}") as prometheus,
    ):
        yield server, prometheus


async def test_prometheus_scrapes_the_rpc_counts_and_gauges(
    scraped_server: tuple[ServerProcess, Prometheus],
) -> None:
    server, prometheus = scraped_server
    await prometheus.value_once('up{job="sessiontodo"}', 1)
    async with TodoClient.connect(server.address) as client:
        for session_id in ("a", "b", "c"):
            await client.create_session(session_id)
        await client.replace_todos("a", [Todo(content="one"), Todo(content="two")])
        with pytest.raises(NotFound):
            await client.get_todos("missing")
        events = client.watch("a")
        await anext(events)
        rpc = 'grpc_service="sessiontodo.v1.TodoService"'
        await prometheus.value_once(f'grpc_server_handled_total{{{rpc},grpc_method="CreateSession",grpc_code="OK"}}', 3)
        await prometheus.value_once(
            f'grpc_server_handled_total{{{rpc},grpc_method="GetTodos",grpc_code="NotFound"}}', 1
        )
        await prometheus.value_once(f'grpc_server_started_total{{{rpc},grpc_method="WatchTodos"}}', 1)
        await prometheus.value_once("sessiontodo_watchers", 1)
        await prometheus.value_once("sessiontodo_sessions", 3)
        await prometheus.value_once('sessiontodo_store_seconds_count{operation="write"}', 1)
        await prometheus.value_once(f'sum(grpc_server_handling_seconds_count{{{rpc},grpc_method="ReplaceTodos"}})', 1)
        await events.aclose()
    await prometheus.value_once("sessiontodo_watchers", 0)
    await prometheus.value_once(f'grpc_server_handled_total{{{rpc},grpc_method="WatchTodos",grpc_code="Canceled"}}', 1)

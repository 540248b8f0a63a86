"""The runnable sidecar: ``python -m sessiontodo_opencode`` configured by flags and environment."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from sessiontodo_opencode import RunningSidecar
from sessiontodo_server.app import RunningServer
from tests.peers.opencode.opencode_support import EventFeed, create_once_serving, todos
from tests.support import ROOT, eventually, free_port

pytestmark = pytest.mark.process


async def test_the_sidecar_process_serves_opencode_routes_and_stops_cleanly_on_sigterm(server: RunningServer) -> None:
    port = free_port()
    env = {**os.environ, "SESSIONTODO_OPENCODE_HEARTBEAT_INTERVAL": "0.2"}
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiontodo_opencode",
        "--sessiontodo-address",
        server.address,
        "--port",
        str(port),
        cwd=ROOT,
        env=env,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as http:
            await create_once_serving(http, "ses_a", timeout=15.0)
            assert (await http.put("/session/ses_a/todo", json=todos("x"))).status_code == 200
            async with http.stream("GET", "/event", params={"sessionID": "ses_a"}) as response:
                feed = EventFeed(response)
                assert (await feed.next_event())["type"] == "server.connected"
                assert (await feed.next_update())["todos"][0]["content"] == "x"
                assert (await feed.next_event())["type"] == "server.heartbeat"  # the environment's interval

                process.send_signal(signal.SIGTERM)
                exit_code = await asyncio.wait_for(process.wait(), 15.0)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert exit_code == 0
    await eventually(lambda: server.book.watcher_count == 0)


async def test_the_sidecar_serves_on_an_ipv6_loopback_address_with_a_fixed_port(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]],
) -> None:
    with socket.create_server(("::1", 0), family=socket.AF_INET6) as probe:
        port = probe.getsockname()[1]
    sidecar = await launch_sidecar(host="[::1]", port=port)

    async with httpx.AsyncClient(base_url=f"http://[::1]:{port}") as http:
        response = await http.get("/session/ses_nobody/todo")

    assert (sidecar.port, response.status_code) == (port, 404)


async def test_with_sessiontodo_down_the_sidecar_says_at_once_what_it_waits_for_and_listens(tmp_path: Path) -> None:
    port, unreachable = free_port(), f"127.0.0.1:{free_port()}"
    log_path = tmp_path / "sidecar.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "sessiontodo_opencode", "--sessiontodo-address", unreachable),
            *("--port", str(port), "--ready-timeout", "120"),
            cwd=ROOT,
            stderr=log_file,
        )
    try:
        # Far below the 120 s it waits for sessiontodo: before, nothing was said (nor served) until then.
        await eventually(lambda: unreachable in log_path.read_text(), timeout=30)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as http:
            health = await http.get("/global/health")
    finally:
        process.kill()
        await process.wait()

    said = next(line for line in log_path.read_text().splitlines() if unreachable in line)
    assert f"listening on http://127.0.0.1:{port}" in said
    assert "waiting at most 120s" in said
    assert health.status_code == 200


async def test_a_request_made_before_sessiontodo_starts_waits_for_it_and_the_wait_is_said_once(
    start: Callable[..., Awaitable[RunningServer]], tmp_path: Path
) -> None:
    sessiontodo_port, port = free_port(), free_port()
    log_path = tmp_path / "sidecar.log"
    with log_path.open("wb") as log_file:
        process = await asyncio.create_subprocess_exec(
            *(sys.executable, "-m", "sessiontodo_opencode", "--port", str(port)),
            *("--sessiontodo-address", f"127.0.0.1:{sessiontodo_port}"),
            cwd=ROOT,
            stderr=log_file,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60.0) as http:
            await eventually(lambda: said(log_path, f"listening on http://127.0.0.1:{port}"), timeout=30)
            reading = asyncio.create_task(http.get("/session/ses_nobody/todo"))
            await eventually(lambda: said(log_path, "does not accept connections yet"), timeout=30)
            await start(port=sessiontodo_port)
            response = await reading
    finally:
        process.kill()
        await process.wait()

    assert response.status_code == 404  # sessiontodo answered: no such session (not 503, unreachable)
    assert log_path.read_text().count("does not accept connections yet") == 1


def said(log_path: Path, text: str) -> bool:
    return text in log_path.read_text()

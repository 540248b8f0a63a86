"""The real ``sessiontodo-mcp`` (its console script) over stdio or HTTP, driven by the MCP SDK's own client."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.session import RequestResponder

from tests.support import ROOT, eventually, free_port, terminate

MCP_COMMAND = Path(sys.executable).with_name("sessiontodo-mcp")
"""The console script ``pip install`` made, as an agent's MCP settings name it."""

CLIENT_NAME = "test-agent"

Message = RequestResponder[types.ServerRequest, types.ClientResult] | types.ServerNotification | Exception


class Updates:
    """The ``notifications/resources/updated`` a client received, in order."""

    def __init__(self) -> None:
        self._updates: asyncio.Queue[types.ResourceUpdatedNotificationParams] = asyncio.Queue()

    async def handle(self, message: Message) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            self._updates.put_nowait(message.root.params)

    async def next(self, timeout: float = 10.0) -> str:
        """The URI of the next update."""
        return str((await self.next_update(timeout)).uri)

    async def next_update(self, timeout: float = 10.0) -> types.ResourceUpdatedNotificationParams:
        return await asyncio.wait_for(self._updates.get(), timeout)

    def count(self) -> int:
        return self._updates.qsize()


@dataclass
class McpPeer:
    """One MCP session, from the client's side."""

    session: ClientSession
    updates: Updates

    async def call(self, tool: str, **arguments: Any) -> types.CallToolResult:
        return await self.session.call_tool(tool, arguments)

    async def session_id(self) -> str:
        """The sessiontodo session behind this MCP session, as ``todo_read`` names it."""
        result = await self.call("todo_read")
        assert result.structuredContent is not None, result
        return str(result.structuredContent["session_id"])


def error_text(result: types.CallToolResult) -> str:
    """The text of a tool error (failing the test when the call succeeded)."""
    assert result.isError, result
    content = result.content[0]
    assert isinstance(content, types.TextContent), content
    return content.text


def todo_contents(result: types.CallToolResult) -> list[str]:
    assert not result.isError, result
    assert result.structuredContent is not None, result
    return [todo["content"] for todo in result.structuredContent["todos"]]


@asynccontextmanager
async def _peer(read: Any, write: Any, client_name: str) -> AsyncIterator[McpPeer]:
    updates = Updates()
    client_info = types.Implementation(name=client_name, version="1.0")
    async with ClientSession(read, write, message_handler=updates.handle, client_info=client_info) as session:
        await session.initialize()
        yield McpPeer(session, updates)


@asynccontextmanager
async def stdio_peer(address: str, *flags: str, log: Path, client_name: str = CLIENT_NAME) -> AsyncIterator[McpPeer]:
    """``sessiontodo-mcp`` launched over stdio as agents launch it, its stderr appended to ``log``."""
    params = StdioServerParameters(
        command=str(MCP_COMMAND),
        args=["--sessiontodo-address", address, *flags],
        env={},
        cwd=ROOT,
    )
    with log.open("a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), _peer(read, write, client_name) as peer:
            yield peer


@asynccontextmanager
async def http_peer(
    url: str, *, headers: Mapping[str, str] | None = None, client_name: str = CLIENT_NAME
) -> AsyncIterator[McpPeer]:
    """One MCP session over streamable HTTP, sending ``headers`` with every request."""
    timeout = httpx.Timeout(30.0, read=300.0)
    async with (
        httpx.AsyncClient(headers=dict(headers or {}), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write, _session_id),
        _peer(read, write, client_name) as peer,
    ):
        yield peer


class HttpGateway:
    """``sessiontodo-mcp --transport http`` in its own process on a free loopback port, stderr in ``log``."""

    def __init__(self, address: str, *flags: str, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        args = ["--sessiontodo-address", address, "--transport", "http", "--port", str(self.port), *flags]
        self._command = [str(MCP_COMMAND), *args]
        self._log = log
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self) -> None:
        with self._log.open("ab") as log:
            self.process = subprocess.Popen(self._command, stderr=log, cwd=ROOT)

    async def start(self) -> HttpGateway:
        """Spawn the process and wait until it accepts connections."""
        self.spawn()

        async def accepting() -> bool:
            assert self.process is not None
            assert self.process.poll() is None, self._log.read_text()
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                return False
            writer.close()
            await writer.wait_closed()
            return True

        await eventually(accepting, timeout=30.0, interval=0.05)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            terminate(self.process)

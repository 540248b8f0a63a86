"""Fixtures for the ACP gateway: the test agent, and a real SDK editor talking to the proxy."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import acp
import pytest
from acp.schema import (
    AgentPlanUpdate,
    DeniedOutcome,
    RequestPermissionResponse,
    TextContentBlock,
)

from tests.support import ROOT, eventually

PLAN_AGENT = Path(__file__).with_name("plan_agent.py")


def proxy_command(*agent: str) -> list[str]:
    """The proxy, run from this checkout, in front of ``agent``."""
    return [sys.executable, "-m", "sessiontodo_acp", "--", *agent]


PLAN_AGENT_COMMAND = [sys.executable, str(PLAN_AGENT)]


class RecordingEditor:
    """An ACP client that records, per session and in arrival order, every plan it is shown."""

    def __init__(self) -> None:
        self.plans: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
        self.raw_plans: dict[str, list[dict[str, Any]]] = defaultdict(list)
        """Each plan update as JSON (entries and the plan's own ``_meta``)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentPlanUpdate):
            raw = update.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.raw_plans[session_id].append(raw)
            self.plans[session_id].append(raw["entries"])

    async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))

    def contents(self, session_id: str) -> list[list[str]]:
        """Each plan shown for the session, as its entries' contents."""
        return [[entry["content"] for entry in plan] for plan in self.plans[session_id]]


@dataclass
class ProxiedEditor:
    """An SDK client connection to a proxy process, and what it has been shown."""

    conn: Any
    editor: RecordingEditor
    process: asyncio.subprocess.Process
    log: list[str]
    """The proxy's stderr so far, line by line (also copied to this process's stderr)."""

    async def new_session(self) -> str:
        response = await self.conn.new_session(cwd=str(ROOT), mcp_servers=[])
        return str(response.session_id)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """A raw JSON-RPC request (for methods the Python SDK 0.12.1 client lacks, like ``session/delete``)."""
        return await asyncio.wait_for(self.conn._conn.send_request(method, params), 30)

    @property
    def raw_plans(self) -> dict[str, list[dict[str, Any]]]:
        return self.editor.raw_plans

    async def logged(self, text: str) -> None:
        """Wait until the proxy has logged a line containing ``text``."""
        await eventually(lambda: any(text in line for line in self.log), timeout=30.0)

    async def send_plans(self, session_id: str, *plans: list[dict[str, Any]]) -> None:
        """Have the test agent send these plans (entry JSON objects), in order, within one prompt."""
        text = TextContentBlock(type="text", text=json.dumps({"plans": list(plans)}))
        await asyncio.wait_for(self.conn.prompt(session_id=session_id, prompt=[text]), 30)


async def _collect(stream: asyncio.StreamReader, lines: list[str]) -> None:
    while line := await stream.readline():
        lines.append(line.decode(errors="replace"))
        sys.stderr.write(lines[-1])


@pytest.fixture
def open_editor() -> Callable[..., AbstractAsyncContextManager[ProxiedEditor]]:
    """Open an initialized SDK editor on ``sessiontodo-acp-proxy -- plan_agent.py`` for sessiontodo at ``address``."""

    @asynccontextmanager
    async def _open(address: str, **env: str) -> AsyncIterator[ProxiedEditor]:
        process = await asyncio.create_subprocess_exec(
            *proxy_command(*PLAN_AGENT_COMMAND),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "SESSIONTODO_ACP_ADDRESS": address, **env},
            limit=64 << 20,
        )
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        log: list[str] = []
        logging = asyncio.create_task(_collect(process.stderr, log))
        editor = RecordingEditor()
        conn = acp.connect_to_agent(cast(acp.Client, editor), process.stdin, process.stdout)
        try:
            await asyncio.wait_for(conn.initialize(protocol_version=acp.PROTOCOL_VERSION), 30)
            yield ProxiedEditor(conn, editor, process, log)
        finally:
            await conn.close()
            if not process.stdin.is_closing():
                process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), 15)
            except TimeoutError:
                process.kill()
                await process.wait()
                raise AssertionError("the proxy did not exit after the editor closed its input") from None
            finally:
                await asyncio.wait_for(logging, 15)
        assert process.returncode == 0, "the proxy exits with the agent's code, 0 after the editor left"

    return _open


async def run_proxy_raw(agent: list[str], data: bytes, timeout: float = 30, **env: str) -> tuple[int, bytes]:
    """Run the proxy in front of ``agent`` with ``data`` as the editor's whole input; its exit code and stdout."""
    process = await asyncio.create_subprocess_exec(
        *proxy_command(*agent),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "SESSIONTODO_ACP_ADDRESS": "127.0.0.1:1", **env},
    )
    try:
        stdout, _ = await asyncio.wait_for(process.communicate(data), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, stdout


@pytest.fixture
def raw_proxy() -> Callable[..., Any]:
    return run_proxy_raw

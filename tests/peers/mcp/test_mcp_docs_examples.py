"""docs/mcp.md's client examples as written, with both majors of the MCP SDK's client: the 1.x the
server is pinned to (the venv's) and the current 2.x (``make test`` installs it in its own folder,
``.venv/mcp-client-2``, put on PYTHONPATH here only)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from sessiontodo_client import TodoClient
from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import HttpGateway
from tests.support import ROOT
from tests.system.test_docs import blocks

pytestmark = pytest.mark.process

MCP_CLIENT_2 = Path(sys.executable).parent.parent / "mcp-client-2"
PYTHON_EXAMPLES = [block for block in blocks((ROOT / "docs" / "mcp.md").read_text()) if block.language == "python"]
HTTP_EXAMPLE, STDIO_EXAMPLE = ("\n".join(block.lines) for block in PYTHON_EXAMPLES[:2])


async def run_example(code: str, major: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``code`` with the venv's python and the SDK ``major`` asks for; returns status, stdout, stderr.
    (2.x goes first on ``sys.path``, not PYTHONPATH, which would reach the server the stdio example starts.)"""
    if major == "2.x":
        assert any(MCP_CLIENT_2.glob(".installed-2.*")), "run make test: it installs the MCP SDK 2.x client"
        code = f"import sys; sys.path.insert(0, {str(MCP_CLIENT_2)!r})\n{code}"
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-c", code),
        env={**os.environ, **env},
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("major", ["1.x", "2.x"])
async def test_the_http_example_runs_with_both_sdk_majors(http_gateway: HttpGateway, major: str) -> None:
    code = HTTP_EXAMPLE.replace("http://127.0.0.1:50060/mcp", http_gateway.url)
    status, out, err = await run_example(code, major, {})
    assert status == 0, err
    stored, failed = out.splitlines()
    assert "'revision': 1" in stored
    assert failed.startswith("True not found: todo 'no-such-todo' not found in ")


@pytest.mark.parametrize("major", ["1.x", "2.x"])
async def test_the_stdio_example_reaches_the_exported_sessiontodo_address(
    server: RunningServer, client: TodoClient, major: str
) -> None:
    venv_path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    env = {"SESSIONTODO_MCP_SESSIONTODO_ADDRESS": server.address, "PATH": venv_path}
    status, _, err = await run_example(STDIO_EXAMPLE, major, env)
    assert status == 0, err
    assert [todo.content for todo in (await client.get_todos("docs-mcp")).todos] == ["Plan over stdio"]

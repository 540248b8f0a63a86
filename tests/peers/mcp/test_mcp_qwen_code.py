"""A real agent on sessiontodo-mcp: Qwen Code 0.24.4, run headless (``-p``) and offline on the stub model.

Qwen Code launches ``sessiontodo-mcp`` over stdio from the ``mcpServers`` of its settings, as a user
would configure it; the stub model (tests/peers/opencode_real/stub_model.py) answers the prompt with a
call of the MCP tool as Qwen Code names it (``mcp__<server>__todo_write``). What is asserted is what
lands in sessiontodo.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiontodo_client import TodoClient
from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import MCP_COMMAND
from tests.peers.opencode_real.real_agents import QWEN_ENTRY, installed, qwen_environment
from tests.peers.opencode_real.stub_model import StubModel, todo_prompt
from tests.support import run_node

pytestmark = [pytest.mark.slow, pytest.mark.process]

SERVER_NAME = "sessiontodo"
SESSION_ID = "qwen-plan"

PLAN = [
    {"content": "Read the failing test", "status": "completed", "priority": "high"},
    {"content": "Fix the parser", "status": "in_progress", "priority": "high"},
    {"content": "Drop the old flag", "status": "cancelled", "priority": "low"},
]


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    with StubModel(tool=f"mcp__{SERVER_NAME}__todo_write") as model:
        yield model


def mcp_settings(sessiontodo_address: str) -> dict[str, object]:
    """Qwen Code's settings that give it sessiontodo-mcp, and its own todo tool off (its default)."""
    return {
        "mcpServers": {
            SERVER_NAME: {
                "command": str(MCP_COMMAND),
                "args": ["--session-id", SESSION_ID],
                "env": {"SESSIONTODO_MCP_SESSIONTODO_ADDRESS": sessiontodo_address},
                "alwaysLoadTools": True,  # offered to the model directly, not behind tool_search
                "trust": True,
            }
        },
        "tools": {"approvalMode": "yolo"},
    }


async def run_qwen_code(root: Path, model: StubModel, sessiontodo_address: str, prompt: str) -> None:
    """``qwen -p prompt``, offline, until it exits; fails the test if it failed."""
    env = qwen_environment(root, model, mcp_settings(sessiontodo_address))
    args = [installed(QWEN_ENTRY), "-p", prompt, "--auth-type", "openai", "--approval-mode", "yolo"]
    args += ["--model", "stub-model"]
    status, output = await run_node(args, env=env, cwd=root, timeout=240.0, stdin=asyncio.subprocess.DEVNULL)
    assert status == 0, output


@pytest.fixture
async def qwen_planned(server: RunningServer, stub_model: StubModel, tmp_path: Path) -> None:
    """Qwen Code, given sessiontodo-mcp, was asked to plan ``PLAN`` and has exited."""
    await run_qwen_code(tmp_path, stub_model, server.address, todo_prompt(PLAN))


@pytest.mark.usefixtures("qwen_planned")
async def test_the_list_qwen_code_writes_with_the_mcp_tool_lands_in_sessiontodo(client: TodoClient) -> None:
    stored = await client.get_todos(SESSION_ID)
    assert [(t.content, t.status, t.priority) for t in stored.todos] == [
        (todo["content"], todo["status"], todo["priority"]) for todo in PLAN
    ]


@pytest.mark.usefixtures("qwen_planned")
async def test_qwen_codes_session_is_labelled_with_its_mcp_client_name(client: TodoClient) -> None:
    session = await client.get_session(SESSION_ID)
    assert session.labels["client"].startswith("qwen-cli-mcp-client")


@pytest.mark.usefixtures("qwen_planned")
async def test_the_tool_result_qwen_code_hands_its_model_is_the_stored_list(
    client: TodoClient, stub_model: StubModel
) -> None:
    stored_ids = [todo.id for todo in (await client.get_todos(SESSION_ID)).todos]
    tool_messages = [m for request in stub_model.requests for m in request["messages"] if m.get("role") == "tool"]
    assert all(todo_id in json.dumps(tool_messages) for todo_id in stored_ids), tool_messages

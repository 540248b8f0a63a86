"""A real agent on sessiontodo-mcp: Qwen Code 0.24.4, run headless (``-p``) and offline on the stub model.

Qwen Code launches ``sessiontodo-mcp`` over stdio from the ``mcpServers`` of its settings, as a user
would configure it; the stub model (tests/opencode_real/stub_model.py) answers the prompt with a
call of the MCP tool as Qwen Code names it (``mcp__<server>__todo_write``). What is asserted is what
lands in sessiontodo.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sessiontodo_client import TodoClient
from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import MCP_COMMAND
from tests.peers.opencode_real.stub_model import StubModel, todo_prompt
from tests.support import ROOT, run_node

pytestmark = [pytest.mark.slow, pytest.mark.process]

QWEN_CODE = ROOT / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"
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


def qwen_home(home: Path, sessiontodo_address: str) -> None:
    """A private home whose settings give Qwen Code sessiontodo-mcp, and nothing that needs a network."""
    settings = {
        "mcpServers": {
            SERVER_NAME: {
                "command": str(MCP_COMMAND),
                "args": ["--session-id", SESSION_ID],
                "env": {"SESSIONTODO_MCP_SESSIONTODO_ADDRESS": sessiontodo_address},
                "alwaysLoadTools": True,  # offered to the model directly, not behind tool_search
                "trust": True,
            }
        },
        "security": {"auth": {"selectedType": "openai"}},
        "tools": {"approvalMode": "yolo"},
        "telemetry": {"enabled": False},
        "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False},
        "model": {"skipNextSpeakerCheck": True, "skipLoopDetection": True, "skipStartupContext": True},
    }
    (home / ".qwen").mkdir(parents=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))


async def run_qwen_code(home: Path, model: StubModel, prompt: str) -> None:
    """``qwen -p prompt``, offline, until it exits; fails the test if it failed."""
    assert QWEN_CODE.is_file(), "run `npm ci` (make test does)"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("QWEN_", "OPENAI_"))}
    env |= {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "stub-key",
        "OPENAI_MODEL": "stub-model",
        "QWEN_TELEMETRY_ENABLED": "false",
        "QWEN_CODE_DISABLE_PRECONNECT": "1",
        "NO_BROWSER": "1",
    }
    args = [str(QWEN_CODE), "-p", prompt, "--auth-type", "openai", "--approval-mode", "yolo", "--model", "stub-model"]
    status, output = await run_node(args, env=env, cwd=home, timeout=240.0, stdin=asyncio.subprocess.DEVNULL)
    assert status == 0, output


@pytest.fixture
async def qwen_planned(server: RunningServer, stub_model: StubModel, tmp_path: Path) -> None:
    """Qwen Code, given sessiontodo-mcp, was asked to plan ``PLAN`` and has exited."""
    qwen_home(tmp_path, server.address)
    await run_qwen_code(tmp_path, stub_model, todo_prompt(PLAN))


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

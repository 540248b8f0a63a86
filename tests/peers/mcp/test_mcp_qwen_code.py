"""A real agent on sessiontodo-mcp: Qwen Code 0.24.4, run headless (``-p``) and offline on the stub model.

Qwen Code launches ``sessiontodo-mcp`` over stdio from the ``mcpServers`` of its settings, as a user
would configure it; the stub model (tests/peers/opencode_real/stub_model.py) answers the prompt with a
call of the MCP tool as Qwen Code names it (``mcp__<server>__todo_write``), or with a script of task
tool calls, each using the ids earlier results returned. What is asserted is what lands in sessiontodo.
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
from tests.peers.opencode_real.stub_model import StubModel, calls_prompt, todo_prompt
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


def mcp_settings(sessiontodo_address: str, session_id: str = SESSION_ID) -> dict[str, object]:
    """Qwen Code's settings that give it sessiontodo-mcp, and its own todo tool off (its default)."""
    return {
        "mcpServers": {
            SERVER_NAME: {
                "command": str(MCP_COMMAND),
                "args": ["--session-id", session_id],
                "env": {"SESSIONTODO_MCP_SESSIONTODO_ADDRESS": sessiontodo_address},
                "alwaysLoadTools": True,  # offered to the model directly, not behind tool_search
                "trust": True,
            }
        },
        "tools": {"approvalMode": "yolo"},
    }


async def run_qwen_code(
    root: Path, model: StubModel, sessiontodo_address: str, prompt: str, session_id: str = SESSION_ID
) -> None:
    """``qwen -p prompt``, offline, until it exits; fails the test if it failed."""
    env = qwen_environment(root, model, mcp_settings(sessiontodo_address, session_id))
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


TEAM_ID = "qwen-team"
TASK_CALLS = [
    {"tool": "task_create", "arguments": {"subject": "Write the parser", "active_form": "Writing the parser"}},
    {"tool": "task_create", "arguments": {"subject": "Write the tests", "blocked_by": ["$0.task.id"]}},
    {"tool": "task_list", "arguments": {"ready": True}},
    {"tool": "task_claim", "arguments": {"owner": "qwen", "lease_seconds": 300}},
    {"tool": "task_claim", "arguments": {"owner": "qwen", "task_id": "$1.task.id"}},
    {"tool": "task_update", "arguments": {"task_id": "$3.task.id", "status": "completed"}},
    {"tool": "task_claim", "arguments": {"owner": "qwen"}},
]
"""Plan two tasks, the second waiting for the first; list the ready ones; claim one (the parser); try the
blocked one (refused); complete the parser; claim again (now the tests are ready)."""


@pytest.fixture
async def qwen_worked_the_tasks(server: RunningServer, tmp_path: Path) -> StubModel:
    """Qwen Code, given sessiontodo-mcp, ran ``TASK_CALLS`` with the task tools and has exited."""
    with StubModel() as model:
        await run_qwen_code(tmp_path, model, server.address, calls_prompt(TASK_CALLS), session_id=TEAM_ID)
    return model


async def test_qwen_code_plans_claims_and_completes_tasks_with_the_task_tools(
    client: TodoClient, qwen_worked_the_tasks: StubModel
) -> None:
    parser, tests = (await client.get_todos(TEAM_ID)).todos
    assert (parser.content, parser.active_form, parser.status, parser.owner) == (
        "Write the parser",
        "Writing the parser",
        "completed",
        "qwen",
    )
    assert (tests.content, tests.blocked_by, tests.status, tests.owner) == (
        "Write the tests",
        [parser.id],
        "in_progress",
        "qwen",
    )


async def test_qwen_codes_model_is_told_why_a_blocked_task_was_refused(
    client: TodoClient, qwen_worked_the_tasks: StubModel
) -> None:
    parser, tests = (await client.get_todos(TEAM_ID)).todos
    tool_messages = [
        m for request in qwen_worked_the_tasks.requests for m in request["messages"] if m.get("role") == "tool"
    ]
    assert f"refused: {tests.id} is blocked by {parser.id}" in json.dumps(tool_messages)

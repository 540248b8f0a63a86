"""sessiontodoctl on a task graph: ready work, claims and their refusals, dependencies, owners in ``get``."""

from __future__ import annotations

import json

import pytest

from sessiontodo_client import Todo, TodoClient
from sessiontodo_server.app import RunningServer
from tests.system.test_ctl_process import ctl

pytestmark = pytest.mark.process

GRAPH = [
    Todo(id="todo_parser", content="Write the parser"),
    Todo(id="todo_tests", content="Write the tests", blocked_by=["todo_parser"]),
    Todo(id="todo_docs", content="Write the docs"),
]


@pytest.fixture
async def address(server: RunningServer, client: TodoClient) -> tuple[str, str]:
    """The flag that points sessiontodoctl at a server whose session ``team`` holds ``GRAPH``."""
    await client.create_session("team")
    await client.replace_todos("team", GRAPH)
    return ("--address", server.address)


async def test_ready_lists_the_todos_free_to_take_with_their_positions(address: tuple[str, str]) -> None:
    code, out, err = await ctl(*address, "ready", "team")
    assert code == 0, err
    assert out.splitlines() == [
        "team",
        "#       ID           PRIORITY  OWNER  BLOCKED BY  CONTENT",
        "0  [ ]  todo_parser  medium                       Write the parser",
        "2  [ ]  todo_docs    medium                       Write the docs",
        "revision 1, 2 ready of 3",
    ]


async def test_claim_takes_the_first_ready_todo_and_get_shows_its_owner_and_the_blocked_todo(
    address: tuple[str, str],
) -> None:
    code, out, err = await ctl(*address, "claim", "team", "--owner", "worker-1", "--lease", "60")
    assert (code, out) == (0, "claimed todo_parser for worker-1, lease 60s, revision 2\n"), err
    code, out, err = await ctl(*address, "get", "team")
    assert out.splitlines()[1:4] == [
        "#       ID           PRIORITY  OWNER     BLOCKED BY  CONTENT",
        "0  [>]  todo_parser  medium    worker-1              Write the parser",
        "1  [ ]  todo_tests   medium              #0          Write the tests",
    ]


async def test_a_refused_claim_says_why_and_exits_1(address: tuple[str, str]) -> None:
    code, out, err = await ctl(*address, "-o", "json", "claim", "team", "1", "--owner", "worker-2")
    assert (code, out) == (1, "")
    refusal = json.loads(err)
    assert (refusal["code"], refusal["reason"]) == ("FAILED_PRECONDITION", "TODO_BLOCKED")


async def test_nothing_ready_is_an_answer_with_no_todo(address: tuple[str, str]) -> None:
    for owner in ("worker-1", "worker-2"):
        await ctl(*address, "claim", "team", "--owner", owner)
    code, out, err = await ctl(*address, "-o", "json", "claim", "team", "--owner", "worker-3")
    assert code == 0, err
    assert json.loads(out) == {"todo": None, "revision": 3, "changed": False}


async def test_block_and_unblock_link_todos_by_position(address: tuple[str, str], client: TodoClient) -> None:
    code, out, err = await ctl(*address, "block", "team", "2", "--on", "0", "--on", "1")
    assert (code, out) == (0, "todo_docs waits for todo_parser, todo_tests, revision 2\n"), err
    code, out, err = await ctl(*address, "unblock", "team", "todo_docs", "--on", "todo_p")
    assert (code, out) == (0, "todo_docs waits for todo_tests, revision 3\n"), err


async def test_a_release_by_someone_who_does_not_hold_the_todo_is_refused(address: tuple[str, str]) -> None:
    await ctl(*address, "claim", "team", "0", "--owner", "worker-1")
    code, _, err = await ctl(*address, "release", "team", "0", "--owner", "worker-2")
    assert code == 1
    assert err.startswith("Error: FAILED_PRECONDITION: todo 'todo_parser' in session 'team' is in_progress and held by")

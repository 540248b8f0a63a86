"""``sessiontodo-claude`` with the real Claude Code CLI: tasks Claude makes reach sessiontodo with
every field, changes made in sessiontodo reach a running Claude session's next TaskList, deletes
travel both ways, and two Claude homes share one list through one sessiontodo."""

from __future__ import annotations

import asyncio
import secrets
import shutil
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_claude import ORIGIN, ClaudeBridge, TaskFolder
from sessiontodo_client import ChangeKind, NotFound, Todo, TodoClient, TodoStatus
from sessiontodo_server.app import RunningServer
from sessiontodo_web import Settings as WebSettings
from sessiontodo_web import start_web
from tests.peers.claude_code.claude_cli import ClaudeCode, task_files
from tests.peers.claude_code.stub_anthropic import StubAnthropic
from tests.peers.web.web_support import signed_in_http
from tests.support import eventually
from tests.support.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.process, pytest.mark.slow]

SESSION = "claude-parser"


@asynccontextmanager
async def bridged(client: TodoClient, claude: ClaudeCode, *, session_id: str = SESSION) -> AsyncIterator[ClaudeBridge]:
    """The bridge between ``claude``'s list and ``session_id``, in this process, until the block ends."""
    bridge = ClaudeBridge(
        client,
        TaskFolder(claude.folder),
        session_id=session_id,
        list_id=claude.list_id,
        state_path=claude.home / ".claude" / "sessiontodo" / f"{claude.list_id}.json",
    )
    running = asyncio.create_task(bridge.run())
    try:
        await eventually(lambda: bridge.passes > 0 or running.done())
        if running.done():
            running.result()
        yield bridge
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def todos_of(client: TodoClient, session_id: str = SESSION) -> dict[str, Todo]:
    """The session's todos by content."""
    return {todo.content: todo for todo in (await client.get_todos(session_id)).todos}


async def test_tasks_claude_creates_reach_sessiontodo_with_every_field(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude, bridged(client, claude):
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": "Tokens first", "activeForm": "Writing parser"}),
            ("TaskCreate", {"subject": "Test parser", "description": "Edge cases", "metadata": {"points": 3}}),
            ("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"], "owner": "bob"}),
            ("TaskUpdate", {"taskId": "1", "status": "in_progress"}),
        )

        async def both_arrived() -> bool:
            todos = await todos_of(client)
            return todos.keys() == {"Write parser", "Test parser"} and bool(todos["Test parser"].blocked_by)

        await eventually(both_arrived)
        todos = await todos_of(client)
        session = await client.get_session(SESSION)

    write, test = todos["Write parser"], todos["Test parser"]
    assert (write.description, write.active_form, write.status, write.owner) == (
        "Tokens first",
        "Writing parser",
        TodoStatus.IN_PROGRESS,
        "",
    )
    assert (test.description, test.owner, test.status) == ("Edge cases", "bob", TodoStatus.PENDING)
    assert test.blocked_by == [write.id]
    assert write.blocks == [test.id]
    assert test.metadata["points"] == "3"
    assert (write.metadata["claude.task_id"], test.metadata["claude.task_id"]) == ("1", "2")
    assert session.labels["claude.list"] == "parser"
    files = task_files(claude.folder)
    assert (files["1"]["metadata"]["sessiontodo.todo_id"], files["2"]["metadata"]["sessiontodo.todo_id"]) == (
        write.id,
        test.id,
    )


async def test_a_running_claude_session_sees_sessiontodo_changes_at_its_next_task_list(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude, bridged(client, claude):
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": ""}),
            ("TaskCreate", {"subject": "Drop the flag", "description": ""}),
        )
        await eventually(lambda: _count(client, 2))
        todos = await todos_of(client)
        parser, flag = todos["Write parser"], todos["Drop the flag"]
        await client.update_todo(SESSION, parser.id, status=TodoStatus.IN_PROGRESS, owner="alice", origin="board")
        await client.add_todo(
            SESSION, Todo(content="Review", description="By a person", blocked_by=[parser.id]), origin="board"
        )
        await client.remove_todo(SESSION, flag.id, origin="board")
        await eventually(lambda: sorted(task_files(claude.folder)) == ["1", "3"] and _owned(claude.folder))
        listed = await claude.task_list()
        (review,) = await claude.run(("TaskGet", {"taskId": "3"}))

    assert listed.splitlines() == [
        "#1 [in_progress] Write parser (alice)",
        "#3 [pending] Review [blocked by #1]",
    ]
    assert "By a person" in review
    assert task_files(claude.folder)["1"]["blocks"] == ["3"]


async def test_a_task_claude_deletes_is_removed_from_sessiontodo(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude, bridged(client, claude):
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": ""}),
            ("TaskCreate", {"subject": "Drop the flag", "description": ""}),
            ("TaskUpdate", {"taskId": "1", "addBlockedBy": ["2"]}),
        )
        await eventually(lambda: _count(client, 2))
        watch = client.watch(SESSION)
        snapshot = await anext(watch)
        await claude.run(("TaskUpdate", {"taskId": "2", "status": "deleted"}))
        removed = await anext(watch)
        await watch.aclose()
        (left,) = (await client.get_todos(SESSION)).todos

    assert snapshot.kind is ChangeKind.SNAPSHOT
    assert (removed.kind, removed.origin) == (ChangeKind.TODO_REMOVED, ORIGIN)
    assert (left.content, left.blocked_by) == ("Write parser", [])


async def test_two_claude_homes_share_one_list_through_sessiontodo(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    await two_machines_share_one_list(tmp_path, anthropic, client, client)


@pytest.mark.etcd
async def test_two_claude_homes_share_one_list_through_two_replicas_over_etcd(
    tmp_path: Path, anthropic: StubAnthropic, etcd: EtcdCluster, start: Callable[..., Awaitable[RunningServer]]
) -> None:
    first, second = await start(store=etcd.url()), await start(store=etcd.url())
    async with TodoClient.connect(first.address) as to_first, TodoClient.connect(second.address) as to_second:
        await two_machines_share_one_list(tmp_path, anthropic, to_first, to_second)


async def two_machines_share_one_list(
    tmp_path: Path, anthropic: StubAnthropic, client_a: TodoClient, client_b: TodoClient
) -> None:
    """Claude A creates tasks, B lists them at its next TaskList; B takes one, A's TaskList shows B's name."""
    async with (
        ClaudeCode(tmp_path / "machine-a", anthropic, "team") as alice,
        ClaudeCode(tmp_path / "machine-b", anthropic, "team") as bob,
        bridged(client_a, alice, session_id="claude-team"),
        bridged(client_b, bob, session_id="claude-team"),
    ):
        await alice.run(
            ("TaskCreate", {"subject": "Write parser", "description": "Tokens first"}),
            ("TaskCreate", {"subject": "Test parser", "description": ""}),
            ("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]}),
        )
        await eventually(lambda: len(task_files(bob.folder)) == 2 and bool(task_files(bob.folder)["2"]["blockedBy"]))
        seen_by_bob = await bob.task_list()
        await bob.run(("TaskUpdate", {"taskId": "1", "owner": "bob", "status": "in_progress"}))
        await eventually(lambda: task_files(alice.folder)["1"].get("owner") == "bob")
        seen_by_alice = await alice.task_list()

    assert seen_by_bob.splitlines() == ["#1 [pending] Write parser", "#2 [pending] Test parser [blocked by #1]"]
    assert seen_by_alice.splitlines() == [
        "#1 [in_progress] Write parser (bob)",
        "#2 [pending] Test parser [blocked by #1]",
    ]


async def _count(client: TodoClient, expected: int, session_id: str = SESSION) -> bool:
    try:
        return len((await client.get_todos(session_id)).todos) == expected
    except NotFound:  # a removed session, until the bridge makes it again
        return False


def _owned(folder: Path) -> bool:
    return task_files(folder).get("1", {}).get("owner") == "alice"


async def test_a_removed_session_deletes_no_task_and_is_filled_again_from_them(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude, bridged(client, claude):
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": ""}),
            ("TaskCreate", {"subject": "Test parser", "description": ""}),
            ("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]}),
        )
        await eventually(lambda: _count(client, 2))
        before = await todos_of(client)
        await client.remove_session(SESSION)
        await eventually(lambda: _count(client, 2))
        after = await todos_of(client)
        listed = await claude.task_list()

    assert {content: todo.id for content, todo in after.items()} == {
        content: todo.id for content, todo in before.items()
    }
    assert after["Test parser"].blocked_by == [after["Write parser"].id]
    assert listed.splitlines() == ["#1 [pending] Write parser", "#2 [pending] Test parser [blocked by #1]"]


async def test_a_todo_made_just_before_a_crash_is_found_again_not_made_twice(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    """The bridge died between AddTodo and noting the todo's id in the task (no state either)."""
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude:
        await claude.run(("TaskCreate", {"subject": "Write parser", "description": ""}))
    folder = TaskFolder(claude.folder)
    source = f"{socket.gethostname()}:{claude.folder.resolve()}"
    await client.create_session(SESSION)
    made = await client.add_todo(
        SESSION, Todo(content="Write parser", metadata={"claude.task_id": "1", "claude.source": source})
    )
    async with bridged(client, claude):
        await eventually(lambda: bool(task_files(claude.folder)["1"].get("metadata")))
        todos = (await client.get_todos(SESSION)).todos
    assert [todo.id for todo in todos] == [made.todo.id]
    assert (await folder.read("1")) is not None
    assert task_files(claude.folder)["1"]["metadata"] == {"sessiontodo.todo_id": made.todo.id}


async def test_a_removed_list_folder_deletes_no_todo_and_is_written_again(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, "parser") as claude, bridged(client, claude):
        await claude.run(
            ("TaskCreate", {"subject": "Write parser", "description": ""}),
            ("TaskCreate", {"subject": "Test parser", "description": ""}),
        )
        await eventually(lambda: _count(client, 2))
        shutil.rmtree(claude.folder)
        await eventually(lambda: len(task_files(claude.folder)) == 2)
        listed = await claude.task_list()
        todos = await todos_of(client)

    assert todos.keys() == {"Write parser", "Test parser"}
    assert sorted(listed.splitlines()) == ["#1 [pending] Write parser", "#2 [pending] Test parser"]


async def test_a_person_on_the_web_board_claims_and_renames_a_task_both_claude_homes_see_it(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient, server: RunningServer
) -> None:
    token = secrets.token_urlsafe(24)
    values: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "viewer_token": token, "shutdown_grace": 1.0}
    board = await start_web(WebSettings(**values), TodoClient.connect(server.address))
    try:
        async with (
            ClaudeCode(tmp_path / "machine-a", anthropic, "team") as alice,
            ClaudeCode(tmp_path / "machine-b", anthropic, "team") as bob,
            bridged(client, alice, session_id="claude-team"),
            bridged(client, bob, session_id="claude-team"),
            signed_in_http(board.url, token) as http,
        ):
            await alice.run(("TaskCreate", {"subject": "Write parser", "description": ""}))
            await eventually(lambda: len(task_files(bob.folder)) == 1)
            (todo,) = (await client.get_todos("claude-team")).todos
            claimed = await http.post(f"/api/sessions/claude-team/todos/{todo.id}/claim", json={"owner": "ada"})
            renamed = await http.patch(
                f"/api/sessions/claude-team/todos/{todo.id}",
                json={
                    "content": "Write the parser",
                    "expected_revision": (await client.get_todos("claude-team")).revision,
                },
            )
            await eventually(
                lambda: all(
                    task_files(home.folder)["1"].get("owner") == "ada"
                    and task_files(home.folder)["1"]["subject"] == "Write the parser"
                    for home in (alice, bob)
                )
            )
            seen = [await alice.task_list(), await bob.task_list()]
    finally:
        await board.stop()

    assert (claimed.status_code, renamed.status_code) == (200, 200)
    assert seen == ["#1 [in_progress] Write the parser (ada)"] * 2

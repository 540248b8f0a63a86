"""``sessiontodo-claude`` as a process, killed with SIGKILL while it syncs, with sessiontodo restarted
and both sides changed while it was down: on restart both sides converge, nothing lost, nothing
twice. And edits of one task from both sides at once end in one state both sides show."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from sessiontodo_client import NotFound, Todo, TodoClient, TodoStatus
from tests.peers.claude_code.claude_cli import ClaudeCode, listed_subjects, task_files
from tests.peers.claude_code.stub_anthropic import StubAnthropic
from tests.peers.claude_code.test_claude_bridge import bridged
from tests.support import ROOT, ServerProcess, eventually, terminate

pytestmark = [pytest.mark.process, pytest.mark.slow]

LIST = "crash"
SESSION = f"claude-{LIST}"


def start_bridge(home: Path, address: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "sessiontodo_claude", "--list", LIST, "--claude-home", str(home)]
    return subprocess.Popen([*command, "--sessiontodo-address", address], cwd=ROOT)


def create(subject: str) -> tuple[str, dict[str, str]]:
    return "TaskCreate", {"subject": subject, "description": f"About {subject.lower()}"}


async def test_a_killed_bridge_and_a_restarted_sessiontodo_converge_with_nothing_lost_or_twice(
    tmp_path: Path, anthropic: StubAnthropic
) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    home = tmp_path / "home"
    with ServerProcess("--store", store) as server:
        async with TodoClient.connect(server.address) as client, ClaudeCode(home, anthropic, LIST) as claude:
            bridge = start_bridge(home, server.address)
            try:
                await claude.run(*(create(f"Task {n}") for n in range(1, 4)))
                await eventually(lambda: _count(client, 3), timeout=30)
                await claude.run(
                    *(create(f"Task {n}") for n in range(4, 7)), ("TaskUpdate", {"taskId": "5", "addBlockedBy": ["4"]})
                )
                bridge.kill()  # SIGKILL while it carries the last tasks over (or just after)
                bridge.wait()

                todos = {todo.content: todo for todo in (await client.get_todos(SESSION)).todos}
                await client.update_todo(SESSION, todos["Task 1"].id, owner="alice", status=TodoStatus.IN_PROGRESS)
                await client.remove_todo(SESSION, todos["Task 2"].id)
                await client.add_todo(SESSION, Todo(content="From the board", blocked_by=[todos["Task 1"].id]))
                await claude.run(
                    ("TaskUpdate", {"taskId": "3", "status": "completed"}),
                    ("TaskUpdate", {"taskId": "6", "status": "deleted"}),
                )
            finally:
                terminate(bridge)

        server.stop()
        server.start()  # the same port and database
        async with TodoClient.connect(server.address) as client, ClaudeCode(home, anthropic, LIST) as claude:
            bridge = start_bridge(home, server.address)
            try:
                expected = {"Task 1", "Task 3", "Task 4", "Task 5", "From the board"}

                async def converged() -> bool:
                    todos = (await client.get_todos(SESSION)).todos
                    subjects = [task["subject"] for task in task_files(claude.folder).values()]
                    return {todo.content for todo in todos} == expected and sorted(subjects) == sorted(expected)

                await eventually(converged, timeout=30)
                await asyncio.sleep(0.5)  # anything still in flight would show as a duplicate now
                todo_list = (await client.get_todos(SESSION)).todos
                files = task_files(claude.folder)
                listed = await claude.task_list()
            finally:
                terminate(bridge)

    assert Counter(task["subject"] for task in files.values()) == Counter(expected)
    assert Counter(todo.content for todo in todo_list) == Counter(expected)
    todos = {todo.content: todo for todo in todo_list}
    by_subject = {task["subject"]: task for task in files.values()}
    assert (by_subject["Task 1"]["owner"], by_subject["Task 1"]["status"]) == ("alice", "in_progress")
    assert by_subject["Task 3"]["status"] == "completed"
    assert todos["Task 3"].status is TodoStatus.COMPLETED
    assert todos["Task 5"].blocked_by == [todos["Task 4"].id]
    assert by_subject["From the board"]["blockedBy"] == [by_subject["Task 1"]["id"]]
    assert listed_subjects(listed) == {
        "Task 1": "in_progress",
        "Task 3": "completed",
        "Task 4": "pending",
        "Task 5": "pending",
        "From the board": "pending",
    }


async def _count(client: TodoClient, expected: int) -> bool:
    try:
        return len((await client.get_todos(SESSION)).todos) == expected
    except NotFound:  # the bridge makes the session
        return False


@pytest.mark.parametrize("keeps", ["sqlite", "nothing"])
async def test_what_claude_does_while_sessiontodo_restarts_reaches_it_once_it_is_back(
    tmp_path: Path, anthropic: StubAnthropic, keeps: str
) -> None:
    """Also from a store that keeps nothing: the session is made again and filled from the tasks."""
    store = f"sqlite:///{tmp_path / 'todos.db'}" if keeps == "sqlite" else "memory://"
    with ServerProcess("--store", store) as server:
        async with (
            TodoClient.connect(server.address) as client,
            ClaudeCode(tmp_path / "home", anthropic, LIST) as claude,
            bridged(client, claude, session_id=SESSION),
        ):
            await claude.run(create("Before"))
            await eventually(lambda: _count(client, 1))
            server.stop()
            await claude.run(create("While it was down"), ("TaskUpdate", {"taskId": "1", "status": "completed"}))
            server.start()

            async def both_carried() -> bool:
                try:
                    todos = {todo.content: todo for todo in (await client.get_todos(SESSION)).todos}
                except NotFound:  # a store that keeps nothing: until the bridge makes the session again
                    return False
                return todos.keys() == {"Before", "While it was down"} and todos["Before"].status == "completed"

            await eventually(both_carried, timeout=30)
            todos = {todo.content: todo for todo in (await client.get_todos(SESSION)).todos}

    assert todos["While it was down"].description == "About while it was down"


async def test_one_task_edited_from_both_sides_at_once_ends_the_same_on_both(
    tmp_path: Path, anthropic: StubAnthropic, client: TodoClient
) -> None:
    async with ClaudeCode(tmp_path / "home", anthropic, LIST) as claude, bridged(client, claude, session_id=SESSION):
        await claude.run(create("Write parser"))
        await eventually(lambda: _count(client, 1))
        (todo,) = (await client.get_todos(SESSION)).todos
        await asyncio.gather(
            claude.run(("TaskUpdate", {"taskId": "1", "subject": "Claude's title", "status": "in_progress"})),
            client.update_todo(SESSION, todo.id, content="The board's title", owner="carol", origin="board"),
        )

        async def agreed() -> bool:
            (now,) = (await client.get_todos(SESSION)).todos
            task = task_files(claude.folder)["1"]
            return (now.content, str(now.status), now.owner) == (task["subject"], task["status"], task.get("owner"))

        await eventually(agreed)
        await asyncio.sleep(0.3)  # no late write undoes it
        await eventually(agreed)
        (final,) = (await client.get_todos(SESSION)).todos

    assert final.content in ("Claude's title", "The board's title")
    assert (final.status, final.owner) == (TodoStatus.IN_PROGRESS, "carol")  # each changed by one side only

"""Session lifecycle and write semantics, through the typed client against a real server."""

from __future__ import annotations

import asyncio

import pytest

from sessiontodo_client import Aborted, ChangeKind, NotFound, Todo, TodoClient, TodoPriority, TodoStatus
from sessiontodo_server.app import RunningServer
from tests.support import eventually

GLOBAL = "sessiontodo:global"
"""The reserved id of RFC-0034's sessionless global list."""


async def test_create_session_is_idempotent_get_or_create(client: TodoClient) -> None:
    first, created = await client.create_session("s")
    await client.add_todo("s", Todo(content="keep me"))
    again, created_again = await client.create_session("s")
    assert (created, created_again) == (True, False)
    assert again.session_id == first.session_id
    assert again.todo_count == 1


async def test_an_empty_session_id_creates_a_fresh_session(client: TodoClient) -> None:
    one, _ = await client.create_session()
    two, _ = await client.create_session()
    assert one.session_id
    assert two.session_id
    assert one.session_id != two.session_id


async def test_a_child_session_has_its_own_list(client: TodoClient) -> None:
    await client.create_session("parent")
    child, _ = await client.create_session("child", parent_id="parent")
    await client.add_todo("parent", Todo(content="parent's"))
    assert child.parent_id == "parent"
    assert (await client.get_todos("child")).todos == []


async def test_removing_a_session_frees_it_and_its_descendants(client: TodoClient) -> None:
    await client.create_session("root")
    await client.create_session("child", parent_id="root")
    await client.create_session("grandchild", parent_id="child")
    await client.create_session("bystander")
    await client.add_todo("grandchild", Todo(content="deep"))

    removed = await client.remove_session("root")

    assert sorted(removed) == ["child", "grandchild", "root"]
    assert [s.session_id for s in await client.list_sessions()] == ["bystander"]
    for session_id in removed:
        with pytest.raises(NotFound):
            await client.get_todos(session_id)


async def test_removing_a_missing_session_succeeds_and_says_so(client: TodoClient) -> None:
    assert await client.remove_session("never-was") == []


async def test_a_recreated_session_starts_empty(client: TodoClient) -> None:
    await client.create_session("s")
    await client.add_todo("s", Todo(content="old"))
    await client.remove_session("s")
    await client.create_session("s")
    assert (await client.get_todos("s")).todos == []


async def test_remove_all_sessions_clears_every_session_and_spares_the_global_list(
    server: RunningServer, client: TodoClient
) -> None:
    await client.replace_todos(GLOBAL, [Todo(content="global")])
    for n in range(5):
        await client.create_session(f"s{n}")
        await client.add_todo(f"s{n}", Todo(content="x"))
    watch = client.watch("s0")
    assert (await anext(watch)).kind is ChangeKind.SNAPSHOT

    assert await client.remove_all_sessions() == 5

    assert (await asyncio.wait_for(anext(watch), 5)).kind is ChangeKind.SESSION_REMOVED
    assert await client.list_sessions() == []
    assert [t.content for t in (await client.get_todos(GLOBAL)).todos] == ["global"]
    await eventually(lambda: server.book.watcher_count == 0)


async def test_sessionless_calls_use_the_global_list(client: TodoClient) -> None:
    added = await client.add_todo(GLOBAL, Todo(content="cli task"))
    await client.update_todo(GLOBAL, added.todo.id, status=TodoStatus.COMPLETED)
    todos = (await client.get_todos(GLOBAL)).todos
    assert [(t.content, t.status) for t in todos] == [("cli task", TodoStatus.COMPLETED)]


async def test_list_sessions_follows_pages(client: TodoClient) -> None:
    ids = [f"s{n:04d}" for n in range(1005)]  # more than one default page of 1000
    await asyncio.gather(*(client.create_session(session_id) for session_id in ids))
    assert [s.session_id for s in await client.list_sessions()] == ids


async def test_replace_keeps_given_ids_and_generates_missing_ones(client: TodoClient) -> None:
    await client.create_session("s")
    result = await client.replace_todos(
        "s", [Todo(id="mine", content="a"), Todo(content="b", status=TodoStatus.IN_PROGRESS)]
    )
    assert result.todos[0].id == "mine"
    assert result.todos[1].id
    assert result.todos[1].id != "mine"
    assert result.todos[1].status is TodoStatus.IN_PROGRESS
    assert (await client.get_todos("s")) == result


async def test_omitted_status_and_priority_default_to_pending_and_medium(client: TodoClient) -> None:
    await client.create_session("s")
    added = await client.add_todo("s", Todo(content="defaults"))
    assert (added.todo.status, added.todo.priority) == (TodoStatus.PENDING, TodoPriority.MEDIUM)


@pytest.mark.parametrize(("index", "expected"), [(None, "abX"), (0, "Xab"), (1, "aXb"), (-5, "Xab"), (99, "abX")])
async def test_add_inserts_at_the_index_or_appends(client: TodoClient, index: int | None, expected: str) -> None:
    await client.create_session("s")
    await client.replace_todos("s", [Todo(content="a"), Todo(content="b")])
    added = await client.add_todo("s", Todo(content="X"), index=index)
    assert "".join(t.content for t in (await client.get_todos("s")).todos) == expected
    assert added.index == expected.index("X")


async def test_a_retried_add_with_the_same_request_id_adds_once(client: TodoClient) -> None:
    await client.create_session("s")
    first = await client.add_todo("s", Todo(content="once"), request_id="req-1")
    retry = await client.add_todo("s", Todo(content="once"), request_id="req-1")
    assert retry == first
    assert len((await client.get_todos("s")).todos) == 1


async def test_update_changes_only_the_given_fields(client: TodoClient) -> None:
    await client.create_session("s")
    added = await client.add_todo("s", Todo(content="a", priority=TodoPriority.LOW))
    updated = await client.update_todo("s", added.todo.id, status=TodoStatus.IN_PROGRESS)
    assert updated.changed
    assert updated.revision == added.revision + 1
    assert (updated.todo.content, updated.todo.status, updated.todo.priority) == (
        "a",
        TodoStatus.IN_PROGRESS,
        TodoPriority.LOW,
    )


async def test_an_update_that_changes_nothing_keeps_the_revision(client: TodoClient) -> None:
    await client.create_session("s")
    added = await client.add_todo("s", Todo(content="a"))
    same = await client.update_todo("s", added.todo.id, content="a", status=TodoStatus.PENDING)
    assert not same.changed
    assert same.revision == added.revision


async def test_replacing_with_an_identical_list_is_not_a_change(client: TodoClient) -> None:
    await client.create_session("s")
    first = await client.replace_todos("s", [Todo(id="a", content="a")])
    again = await client.replace_todos("s", [Todo(id="a", content="a")])
    assert again.revision == first.revision


async def test_remove_todo_removes_only_that_todo(client: TodoClient) -> None:
    await client.create_session("s")
    listed = await client.replace_todos("s", [Todo(id="a", content="a"), Todo(id="b", content="b")])
    revision = await client.remove_todo("s", "a")
    assert revision == listed.revision + 1
    assert [t.id for t in (await client.get_todos("s")).todos] == ["b"]


async def test_every_effective_write_increments_the_revision_by_one(client: TodoClient) -> None:
    await client.create_session("s")
    start = (await client.get_todos("s")).revision
    added = await client.add_todo("s", Todo(content="a"))
    updated = await client.update_todo("s", added.todo.id, content="b")
    replaced = await client.replace_todos("s", [Todo(content="c")])
    removed = await client.remove_todo("s", replaced.todos[0].id)
    assert [added.revision, updated.revision, replaced.revision, removed] == [
        start + 1,
        start + 2,
        start + 3,
        start + 4,
    ]


async def test_expected_revision_lets_exactly_one_of_two_racing_writers_win(client: TodoClient) -> None:
    await client.create_session("s")
    revision = (await client.get_todos("s")).revision
    outcomes = await asyncio.gather(
        *(client.replace_todos("s", [Todo(content=f"writer {n}")], expected_revision=revision) for n in range(2)),
        return_exceptions=True,
    )
    assert sorted(type(outcome).__name__ for outcome in outcomes) == ["Aborted", "TodoList"]
    assert (await client.get_todos("s")).revision == revision + 1
    assert any(isinstance(outcome, Aborted) for outcome in outcomes)

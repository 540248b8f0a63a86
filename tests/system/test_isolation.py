"""RFC-0034's success criteria, through a real server."""

from __future__ import annotations

import asyncio

import pytest

from sessiontodo_client import ChangeKind, NotFound, Todo, TodoClient

GLOBAL = "sessiontodo:global"
"""The reserved id of RFC-0034's sessionless global list."""


async def test_two_concurrent_sessions_keep_independent_lists(client: TodoClient) -> None:
    await client.create_session("a")
    await client.create_session("b")

    async def write(session_id: str) -> None:
        for n in range(20):
            await client.add_todo(session_id, Todo(content=f"{session_id}-{n}"))

    await asyncio.gather(write("a"), write("b"))

    a, b = await client.get_todos("a"), await client.get_todos("b")
    assert [t.content for t in a.todos] == [f"a-{n}" for n in range(20)]
    assert [t.content for t in b.todos] == [f"b-{n}" for n in range(20)]


async def test_an_unknown_session_is_not_found_and_never_falls_back_to_the_global_list(client: TodoClient) -> None:
    await client.replace_todos(GLOBAL, [Todo(content="global")])
    with pytest.raises(NotFound) as error:
        await client.get_todos("nobody")
    assert error.value.reason == "SESSION_NOT_FOUND"


async def test_a_watch_sees_only_its_own_sessions_changes(client: TodoClient) -> None:
    await client.create_session("a")
    await client.create_session("b")
    events = client.watch("a")
    snapshot = await anext(events)
    assert snapshot.kind is ChangeKind.SNAPSHOT
    await client.add_todo("b", Todo(content="not for a"))
    await client.add_todo("a", Todo(content="for a"))
    change = await asyncio.wait_for(anext(events), 5)
    assert change.session_id == "a"
    assert [t.content for t in change.todos] == ["for a"]
    await events.aclose()

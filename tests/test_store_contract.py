"""The TodoStore contract, checked against every storage engine alike (no gRPC)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from redis_support import RedisServer

from sessiontodo_server.errors import LimitExceeded, ParentMismatch, SessionNotFound
from sessiontodo_server.stores.base import GLOBAL_SESSION_ID, AddResult, TodoStore
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.redis import RedisStore
from sessiontodo_server.stores.sqlite import open_sqlite_store
from sessiontodo_server.todos import Change, ChangeKind, Todo

HISTORY = 4


@pytest.fixture(params=["memory", "sqlite", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TodoStore]:
    with ExitStack() as servers:
        engines: dict[str, Callable[[], TodoStore]] = {
            "memory": lambda: MemoryStore(HISTORY),
            "sqlite": lambda: open_sqlite_store(tmp_path / "todos.db", HISTORY),
            "redis": lambda: RedisStore(servers.enter_context(RedisServer(tmp_path / "redis")).url, HISTORY),
        }
        store = engines[request.param]()
        await store.open()
        yield store
        await store.close()


def _todos(*contents: str) -> tuple[Todo, ...]:
    return tuple(Todo(id=f"t{n}", content=content) for n, content in enumerate(contents))


async def _commit(store: TodoStore, session_id: str, *contents: str) -> Change:
    state = await store.get(session_id)
    assert state is not None
    change = Change(session_id, ChangeKind.TODOS_REPLACED, state.revision + 1, _todos(*contents))
    assert await store.commit(change)
    return change


async def test_the_global_list_exists_after_open(store: TodoStore) -> None:
    state = await store.get(GLOBAL_SESSION_ID)
    assert state is not None and state.todos == ()


async def test_create_session_is_get_or_create(store: TodoStore) -> None:
    first, created = await store.create_session("s", "", 10)
    again, created_again = await store.create_session("s", "", 10)
    assert (created, created_again) == (True, False)
    assert again == first


async def test_a_child_needs_an_existing_parent_and_keeps_it(store: TodoStore) -> None:
    with pytest.raises(SessionNotFound):
        await store.create_session("child", "missing", 10)
    await store.create_session("parent", "", 10)
    await store.create_session("child", "parent", 10)
    with pytest.raises(ParentMismatch):
        await store.create_session("child", "", 10)


async def test_the_session_limit_does_not_count_the_global_list(store: TodoStore) -> None:
    await store.create_session("one", "", 2)
    await store.create_session("two", "", 2)
    with pytest.raises(LimitExceeded):
        await store.create_session("three", "", 2)


async def test_commit_is_compare_and_set_on_the_revision(store: TodoStore) -> None:
    await store.create_session("s", "", 10)
    change = await _commit(store, "s", "a")
    stale = Change("s", ChangeKind.TODOS_REPLACED, change.revision, _todos("b"))
    assert not await store.commit(stale)
    state = await store.get("s")
    assert state is not None and state.revision == change.revision and state.todos == _todos("a")


async def test_commit_to_a_missing_session_fails(store: TodoStore) -> None:
    assert not await store.commit(Change("ghost", ChangeKind.TODOS_REPLACED, 1, _todos("a")))
    assert await store.get("ghost") is None


async def test_changes_after_bridges_only_retained_history(store: TodoStore) -> None:
    await store.create_session("s", "", 10)
    changes = [await _commit(store, "s", str(n)) for n in range(6)]
    current = changes[-1].revision
    missed = await store.changes_after("s", current - 2)
    assert missed is not None and [c.revision for c in missed] == [current - 1, current]
    assert await store.changes_after("s", current) == []
    assert await store.changes_after("s", current - HISTORY - 1) is None  # older than the history
    assert await store.changes_after("s", current + 1) is None  # newer than the store knows
    assert await store.changes_after("ghost", 0) is None


async def test_a_recreated_session_starts_above_every_revision_of_its_previous_incarnation(store: TodoStore) -> None:
    await store.create_session("s", "", 10)
    old = await _commit(store, "s", "old")
    (removal,) = await store.remove_session("s")
    assert removal.kind is ChangeKind.SESSION_REMOVED and removal.revision == old.revision + 1
    fresh, created = await store.create_session("s", "", 10)
    assert created and fresh.revision > removal.revision
    assert await store.changes_after("s", old.revision) is None


async def test_remove_session_takes_descendants_and_spares_others(store: TodoStore) -> None:
    for session_id, parent_id in [("root", ""), ("child", "root"), ("grandchild", "child"), ("other", "")]:
        await store.create_session(session_id, parent_id, 10)
    removed = await store.remove_session("root")
    assert sorted(change.session_id for change in removed) == ["child", "grandchild", "root"]
    assert [s.session_id for s in await store.list_sessions("", 10)] == ["other"]
    assert await store.remove_session("root") == []


async def test_remove_all_sessions_keeps_the_global_list(store: TodoStore) -> None:
    await _commit(store, GLOBAL_SESSION_ID, "global")
    await store.create_session("a", "", 10)
    await store.create_session("b", "a", 10)
    removed = await store.remove_all_sessions()
    assert sorted(change.session_id for change in removed) == ["a", "b"]
    state = await store.get(GLOBAL_SESSION_ID)
    assert state is not None and state.todos == _todos("global")


async def test_list_sessions_pages_in_id_order(store: TodoStore) -> None:
    for session_id in ["c", "a", "b", "d"]:
        await store.create_session(session_id, "", 10)
    first = await store.list_sessions("", 2)
    second = await store.list_sessions(first[-1].session_id, 2)
    assert [s.session_id for s in first + second] == ["a", "b", "c", "d"]


async def test_a_request_id_is_remembered_with_its_write(store: TodoStore) -> None:
    state, _ = await store.create_session("s", "", 10)
    todo = Todo(id="t", content="once")
    result = AddResult(todo, 0, state.revision + 1)
    change = Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t")
    assert await store.commit(change, ("req-1", result))
    assert await store.find_request("s", "req-1") == result
    assert await store.find_request("s", "req-2") is None


async def test_removing_a_session_forgets_its_request_ids(store: TodoStore) -> None:
    state, _ = await store.create_session("s", "", 10)
    todo = Todo(id="t", content="once")
    change = Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t")
    await store.commit(change, ("req-1", AddResult(todo, 0, change.revision)))
    await store.remove_session("s")
    await store.create_session("s", "", 10)
    assert await store.find_request("s", "req-1") is None

"""The sqlite journal: a small list is one column, a big one a row per todo, so a write on a big
list stores what it changed; every kind of write, in and across both forms, comes back from the
file in the right order."""

from __future__ import annotations

import json
import random
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.budget import list_bytes
from sessiontodo_server.domain.mutations import AddTodo, Mutation, RemoveTodo, ReplaceTodos, UpdateSession, UpdateTodo
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, StoreStartupError
from sessiontodo_server.domain.values import Limits, RemovalReason, SessionInfo, Todo, TodoPriority, TodoStatus
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.sqlite import ONE_ROW_BYTES, Durability, open_sqlite_store

LIMITS = Limits()

Reopen = Callable[[], Awaitable[MemoryStore]]


async def write(store: MemoryStore, session_id: str, mutation: Mutation) -> None:
    await store.write(Write(session_id, mutation), WriteContext("", "test", 0.0, LIMITS))


async def lists(store: MemoryStore, session_ids: list[str]) -> dict[str, tuple[int, tuple[Todo, ...]]]:
    states = {session_id: await store.get(session_id) for session_id in session_ids}
    return {session_id: (state.revision, state.todos) for session_id, state in states.items() if state is not None}


@pytest.fixture(params=["process", "fsync"])
async def reopen(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Reopen]:
    """Opens the same file again and again; the last store opened is closed at the end."""
    opened: list[MemoryStore] = []

    async def reopen() -> MemoryStore:
        if opened:
            await opened[-1].close()
        durability: Durability = request.param
        opened.append(open_sqlite_store(tmp_path / "todos.db", 4, 16, durability=durability))
        await opened[-1].open()
        return opened[-1]

    yield reopen
    await opened[-1].close()


async def test_every_kind_of_write_comes_back_from_the_file_in_order(reopen: Reopen) -> None:
    store: MemoryStore = await reopen()
    chance = random.Random(34)
    sessions = ["a", "b", "c"]
    for session_id in sessions:
        await store.create_session(session_id, SessionInfo(), 10, "test")
    numbers = iter(range(1_000_000))

    def fresh() -> Todo:  # long enough now and then for a list to grow past one column and back
        n = next(numbers)
        text = f"todo {n} " + "é" * chance.choice([0, 1, 2, 4000])
        return Todo(f"t{n}", text, metadata={"k": str(n)} if n % 3 else {})

    crossings = 0

    for step in range(600):
        session_id = chance.choice(sessions)
        todos = (await store.get(session_id)).todos  # type: ignore[union-attr]
        roll = chance.random()
        mutation: Mutation
        if roll < 0.05:
            mutation = ReplaceTodos(tuple(fresh() for _ in range(chance.randrange(6))))
        elif roll < 0.5 or not todos:
            index = chance.choice([None, 0, -1, *range(len(todos) + 2)])
            mutation = AddTodo(fresh(), index, True)
        elif roll < 0.75:
            status, priority = chance.choice(list(TodoStatus)), chance.choice(list(TodoPriority))
            mutation = UpdateTodo(chance.choice(todos).id, f"edited {step}", status, priority, {"e": str(step)})
        elif roll < 0.97:
            mutation = RemoveTodo(chance.choice(todos).id)
        else:
            mutation = UpdateSession({"step": str(step)})
        await write(store, session_id, mutation)
        after = (await store.get(session_id)).todos  # type: ignore[union-attr]
        crossings += (list_bytes(todos) > ONE_ROW_BYTES) != (list_bytes(after) > ONE_ROW_BYTES)
        if step % 150 == 149:  # now and then, the file must give back exactly what memory holds
            before = await lists(store, [*sessions, GLOBAL_SESSION_ID])
            store = await reopen()
            assert await lists(store, [*sessions, GLOBAL_SESSION_ID]) == before
    assert crossings > 5, "the lists should have moved between the two forms"


@pytest.mark.parametrize("last", ["a write", "a removal", "a creation"])
async def test_the_feed_goes_on_after_a_restart_from_the_newest_change(reopen: Reopen, last: str) -> None:
    store = await reopen()
    for session_id in ("a", "b"):
        await store.create_session(session_id, SessionInfo(), 10, "test")
    await write(store, "a", ReplaceTodos((Todo("t1", "one"),)))
    await write(store, "b", ReplaceTodos((Todo("t2", "two"),)))
    if last == "a write":
        await write(store, "a", ReplaceTodos((Todo("t3", "three"),)))
    elif last == "a removal":
        await store.remove_session("b", RemovalReason.REMOVED)
    else:
        await store.create_session("c", SessionInfo(), 10, "test")
    position = store.feed_position()
    store = await reopen()
    assert store.feed_position() == position


async def test_a_one_todo_write_on_a_big_list_stores_that_todo_not_the_list(reopen: Reopen) -> None:
    store: MemoryStore = await reopen()
    await store.create_session("big", SessionInfo(), 10, "test")
    await write(store, "big", ReplaceTodos(tuple(Todo(f"t{n}", "x" * 1000) for n in range(900))))
    statements: list[str] = []
    store._journal._db.set_trace_callback(statements.append)  # type: ignore[union-attr]  # the SQL actually run

    await write(store, "big", AddTodo(Todo("new", "y" * 1000), 450, True))
    await write(store, "big", UpdateTodo("t10", content="z" * 1000))
    await write(store, "big", RemoveTodo("t20"))
    written = sum(map(len, statements))  # the statements with their values bound

    assert written < 3 * 1000 + 2000, f"three one-todo writes ran {written} bytes of SQL"  # the list: 900 KB
    todos = (await store.get("big")).todos  # type: ignore[union-attr]
    store = await reopen()
    assert (await store.get("big")).todos == todos  # type: ignore[union-attr]
    ids = [todo.id for todo in todos]
    assert ids[449:451] == ["new", "t450"]
    assert "t20" not in ids
    assert todos[10].content == "z" * 1000


def _legacy_file(path: Path) -> None:
    """A 0.1 file: each list one JSON column, the global list under the empty id."""
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        CREATE TABLE sessions (session_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, revision INTEGER NOT NULL,
                               todos TEXT NOT NULL);
        CREATE TABLE requests (session_id TEXT NOT NULL, request_id TEXT NOT NULL, revision INTEGER NOT NULL,
                               result TEXT NOT NULL, PRIMARY KEY (session_id, request_id));
        INSERT INTO sessions VALUES ('', '', 2, '[["g","global","pending","medium"]]');
        INSERT INTO sessions VALUES ('s', '', 3, '[["a","first","completed","high"],["b","second","pending","low"]]');
        INSERT INTO sessions VALUES ('empty', 's', 1, '[]');
        """
    )
    big = json.dumps([[f"b{n}", "x" * 1000, "pending", "medium"] for n in range(100)])
    db.execute("INSERT INTO sessions VALUES ('big', '', 1, ?)", (big,))
    db.commit()
    db.close()


async def test_a_file_from_before_todo_rows_is_migrated(tmp_path: Path) -> None:
    _legacy_file(tmp_path / "todos.db")
    store = open_sqlite_store(tmp_path / "todos.db", 4, 16)
    await store.open()
    try:
        state = await store.get("s")
        assert state is not None
        assert state.revision == 3
        assert [(t.id, t.status, t.priority) for t in state.todos] == [
            ("a", TodoStatus.COMPLETED, TodoPriority.HIGH),
            ("b", TodoStatus.PENDING, TodoPriority.LOW),
        ]
        assert [t.content for t in (await store.get(GLOBAL_SESSION_ID)).todos] == ["global"]  # type: ignore[union-attr]
        assert (await store.get("empty")).todos == ()  # type: ignore[union-attr]
        await write(store, "s", AddTodo(Todo("c", "third"), 1, True))
        await write(store, "big", RemoveTodo("b50"))  # a one-todo write, now on the big list's rows
    finally:
        await store.close()

    store = open_sqlite_store(tmp_path / "todos.db", 4, 16)
    await store.open()
    try:
        assert [t.id for t in (await store.get("s")).todos] == ["a", "c", "b"]  # type: ignore[union-attr]
        big_ids = [t.id for t in (await store.get("big")).todos]  # type: ignore[union-attr]
        assert big_ids == [f"b{n}" for n in range(100) if n != 50]
    finally:
        await store.close()
    with sqlite3.connect(tmp_path / "todos.db") as db:
        assert db.execute("SELECT count(*) FROM todos WHERE session_id = 'big'").fetchone() == (99,)


async def test_a_broken_list_in_the_file_is_one_line_naming_it(tmp_path: Path) -> None:
    store = open_sqlite_store(tmp_path / "todos.db", 4, 16)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "test")
    await write(store, "s", ReplaceTodos(tuple(Todo(f"t{n}", "x" * 1000) for n in range(30))))  # in rows
    await store.close()
    with sqlite3.connect(tmp_path / "todos.db") as db:
        db.execute("DELETE FROM todos WHERE todo_id = 't1'")  # t0 now links to a row that is gone

    store = open_sqlite_store(tmp_path / "todos.db", 4, 16)
    with pytest.raises(StoreStartupError, match=r"todos\.db .*session 's'"):
        await store.open()
    await store.close()

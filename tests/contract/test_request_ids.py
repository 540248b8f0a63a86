"""AddTodo request ids: a retry gets the first result, a reused id asking for something else is
FAILED_PRECONDITION (a BatchWrite's id too, reused from another origin), ids are per session
(through a server on every store: ``store_url``), and they are remembered for at least an hour
and 10,000 writes of their session (also across a restart of the sqlite store)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import AddTodoWrite, CreateSessionWrite, FailedPrecondition, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.mutations import AddTodo, ReplaceTodos
from sessiontodo_server.domain.store import (
    REQUEST_RETENTION_SECONDS,
    REQUEST_RETENTION_WRITES,
    AddResult,
    TodoStore,
    Written,
)
from sessiontodo_server.domain.values import Limits, SessionInfo
from sessiontodo_server.domain.values import Todo as DomainTodo
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.sqlite import SqliteJournal
from tests.support import ManualClock


async def test_a_retry_returns_the_first_result_and_adds_nothing(start: Callable[..., Any], store_url: str) -> None:
    server: RunningServer = await start(store=store_url)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        first = await client.add_todo("s", Todo(content="once"), request_id="r-1")
        again = await client.add_todo("s", Todo(content="once"), request_id="r-1")
        assert again == first
        assert [t.content for t in (await client.get_todos("s")).todos] == ["once"]


async def test_a_reused_request_id_asking_for_something_else_is_failed_precondition(
    start: Callable[..., Any], store_url: str
) -> None:
    server: RunningServer = await start(store=store_url)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        await client.add_todo("s", Todo(content="once"), request_id="r-1")
        for different in (dict(todo=Todo(content="other")), dict(todo=Todo(content="once"), index=0)):
            with pytest.raises(FailedPrecondition) as raised:
                await client.add_todo("s", request_id="r-1", **different)
            assert raised.value.reason == "REQUEST_ID_REUSED"
        assert [t.content for t in (await client.get_todos("s")).todos] == ["once"]


@pytest.mark.parametrize(
    "different", [{"origin": "another-gateway"}, {"expected_revision": 0}], ids=["origin", "expected_revision"]
)
async def test_a_reused_request_id_with_another_origin_or_expected_revision_is_failed_precondition(
    start: Callable[..., Any], store_url: str, different: dict[str, Any]
) -> None:
    server: RunningServer = await start(store=store_url)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        await client.add_todo("s", Todo(id="t", content="once"), request_id="r-1", origin="gateway")
        with pytest.raises(FailedPrecondition) as raised:
            await client.add_todo(
                "s", Todo(id="t", content="once"), request_id="r-1", **{"origin": "gateway", **different}
            )
        todos = (await client.get_todos("s")).todos
    assert raised.value.reason == "REQUEST_ID_REUSED"
    assert [t.content for t in todos] == ["once"]


async def test_a_batch_request_id_reused_with_another_origin_is_failed_precondition(
    start: Callable[..., Any], store_url: str
) -> None:
    server: RunningServer = await start(store=store_url)
    writes: list[CreateSessionWrite | AddTodoWrite] = [
        CreateSessionWrite(session_id="s"),
        AddTodoWrite(session_id="s", todo=Todo(id="t", content="once")),
    ]
    async with TodoClient.connect(server.address) as client:
        await client.batch_write(writes, request_id="b-1", origin="gateway")
        with pytest.raises(FailedPrecondition) as raised:
            await client.batch_write(writes, request_id="b-1", origin="another-gateway")
        todos = (await client.get_todos("s")).todos
    assert raised.value.reason == "REQUEST_ID_REUSED"
    assert [t.content for t in todos] == ["once"]


async def test_request_ids_are_per_session(start: Callable[..., Any], store_url: str) -> None:
    server: RunningServer = await start(store=store_url)
    async with TodoClient.connect(server.address) as client:
        for session_id in ("a", "b"):
            await client.create_session(session_id)
            await client.add_todo(session_id, Todo(content=f"in {session_id}"), request_id="r-1")
            assert [t.content for t in (await client.get_todos(session_id)).todos] == [f"in {session_id}"]


async def _add(store: TodoStore, request_id: str) -> Written:
    """An AddTodo with ``request_id``; every call asks for the same (a retry), with a fresh todo id."""
    todo = DomainTodo(f"t{next(_serial)}", "added")
    add = AddTodo(todo, 0, False, "fingerprint")
    return await store.write(Write("s", add), WriteContext(request_id, "", 0.0, Limits()))


_serial = itertools.count()
"""Fresh todo ids, so that every write is a change."""


async def _add_with_request(store: TodoStore, request_id: str) -> AddResult:
    written = await _add(store, request_id)
    assert written.change is not None
    assert written.result is not None
    return written.result


async def _remembered(store: TodoStore, request_id: str) -> AddResult | None:
    """The first result, when a retry now gets it (None: the retry added again)."""
    written = await _add(store, request_id)
    return written.result if written.change is None else None


async def _write(store: TodoStore, count: int) -> None:
    for _ in range(count):
        mutation = ReplaceTodos((DomainTodo(f"w{next(_serial)}", "written"),))
        written = await store.write(Write("s", mutation), WriteContext("", "", 0.0, Limits()))
        assert written.change is not None


@pytest.mark.parametrize("engine", ["memory", "sqlite"])
async def test_a_request_id_is_forgotten_only_after_an_hour_and_10000_writes(engine: str, tmp_path: Path) -> None:
    clock = ManualClock()
    journal = SqliteJournal(tmp_path / "todos.db") if engine == "sqlite" else None
    store = MemoryStore(journal=journal, clock=clock)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    result = await _add_with_request(store, "r-1")
    await _write(store, REQUEST_RETENTION_WRITES + 1)  # many writes within the hour: kept
    clock.now += REQUEST_RETENTION_SECONDS - 1
    assert await _remembered(store, "r-1") == result
    clock.now += 2  # an hour later and 10,000 writes on: forgotten at the next write
    await _write(store, 1)
    assert await _remembered(store, "r-1") is None
    await store.close()


async def test_an_hour_old_request_id_is_kept_until_10000_writes_pass(tmp_path: Path) -> None:
    clock = ManualClock()
    store = MemoryStore(clock=clock)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    result = await _add_with_request(store, "r-1")
    clock.now += 10 * REQUEST_RETENTION_SECONDS
    await _write(store, REQUEST_RETENTION_WRITES - 2)
    assert await _remembered(store, "r-1") == result


async def test_request_ids_and_their_fingerprints_survive_a_restart(tmp_path: Path) -> None:
    store = MemoryStore(journal=SqliteJournal(tmp_path / "todos.db"))
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    result = await _add_with_request(store, "r-1")
    await store.close()
    reopened = MemoryStore(journal=SqliteJournal(tmp_path / "todos.db"))
    await reopened.open()
    assert await _remembered(reopened, "r-1") == result
    await reopened.close()

"""The TodoStore contract, checked against every storage engine alike (no gRPC)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack
from pathlib import Path

import pytest
from redis_support import RedisServer

from sessiontodo_server.errors import LimitExceeded, ParentMismatch, SessionNotFound
from sessiontodo_server.stores.base import GLOBAL_SESSION_ID, AddResult, SessionState, TodoStore
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.redis import RedisStore
from sessiontodo_server.stores.sqlite import open_sqlite_store
from sessiontodo_server.todos import (
    EVERY_SESSION,
    Change,
    ChangeKind,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
)

HISTORY = 4
FEED_HISTORY = 8


@pytest.fixture(params=["memory", "sqlite", "sqlite-fsync", "redis"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TodoStore]:
    with ExitStack() as servers:
        engines: dict[str, Callable[[], TodoStore]] = {
            "memory": lambda: MemoryStore(HISTORY, feed_history=FEED_HISTORY),
            "sqlite": lambda: open_sqlite_store(tmp_path / "todos.db", HISTORY, FEED_HISTORY),
            "sqlite-fsync": lambda: open_sqlite_store(tmp_path / "todos.db", HISTORY, FEED_HISTORY, durability="fsync"),
            "redis": lambda: RedisStore(
                servers.enter_context(RedisServer(tmp_path / "redis")).url, HISTORY, FEED_HISTORY
            ),
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
    change = Change(session_id, ChangeKind.TODOS_REPLACED, state.revision + 1, _todos(*contents), info=state.info)
    committed = await store.commit(change)
    assert committed is not None
    return committed


async def _create(
    store: TodoStore,
    session_id: str,
    parent_id: str = "",
    max_sessions: int = 10,
    labels: dict[str, str] | None = None,
    created_at: float = 0.0,
    updated_at: float = 0.0,
    idle_ttl: float = 0.0,
) -> tuple[SessionState, Change | None]:
    info = SessionInfo(parent_id, labels or {}, created_at, updated_at, idle_ttl)
    return await store.create_session(session_id, info, max_sessions, "test")


async def test_the_global_list_exists_after_open(store: TodoStore) -> None:
    state = await store.get(GLOBAL_SESSION_ID)
    assert state is not None and state.todos == ()


async def test_create_session_is_get_or_create(store: TodoStore) -> None:
    first, created = await _create(store, "s")
    again, created_again = await _create(store, "s")
    assert created is not None and created_again is None
    assert (created.kind, created.revision, created.origin) == (ChangeKind.SESSION_CREATED, 0, "test")
    assert again == first


async def test_a_child_needs_an_existing_parent_and_keeps_it(store: TodoStore) -> None:
    with pytest.raises(SessionNotFound):
        await _create(store, "child", "missing")
    await _create(store, "parent")
    await _create(store, "child", "parent")
    with pytest.raises(ParentMismatch):
        await _create(store, "child")


async def test_the_session_limit_does_not_count_the_global_list(store: TodoStore) -> None:
    await _create(store, "one", max_sessions=2)
    await _create(store, "two", max_sessions=2)
    with pytest.raises(LimitExceeded):
        await _create(store, "three", max_sessions=2)


async def test_session_count_follows_creations_and_removals_and_excludes_the_global_list(store: TodoStore) -> None:
    assert await store.session_count() == 0
    await _create(store, "parent")
    await _create(store, "child", "parent")
    await _create(store, "other")
    assert await store.session_count() == 3
    await store.remove_session("parent", RemovalReason.REMOVED)
    assert await store.session_count() == 1


async def test_commit_is_compare_and_set_on_the_revision(store: TodoStore) -> None:
    await _create(store, "s")
    change = await _commit(store, "s", "a")
    stale = Change("s", ChangeKind.TODOS_REPLACED, change.revision, _todos("b"), info=change.info)
    assert await store.commit(stale) is None
    state = await store.get("s")
    assert state is not None and state.revision == change.revision and state.todos == _todos("a")


async def test_commit_to_a_missing_session_fails(store: TodoStore) -> None:
    assert await store.commit(Change("ghost", ChangeKind.TODOS_REPLACED, 1, _todos("a"), info=SessionInfo())) is None
    assert await store.get("ghost") is None


async def test_changes_after_bridges_only_retained_history(store: TodoStore) -> None:
    await _create(store, "s")
    changes = [await _commit(store, "s", str(n)) for n in range(6)]
    current = changes[-1].revision
    missed = await store.changes_after("s", current - 2)
    assert missed is not None and [c.revision for c in missed] == [current - 1, current]
    assert await store.changes_after("s", current) == []
    assert await store.changes_after("s", current - HISTORY - 1) is None  # older than the history
    assert await store.changes_after("s", current + 1) is None  # newer than the store knows
    assert await store.changes_after("ghost", 0) is None


async def test_a_recreated_session_starts_above_every_revision_of_its_previous_incarnation(store: TodoStore) -> None:
    await _create(store, "s")
    old = await _commit(store, "s", "old")
    (removal,) = await store.remove_session("s", RemovalReason.REMOVED)
    assert removal.kind is ChangeKind.SESSION_REMOVED and removal.revision == old.revision + 1
    assert removal.reason is RemovalReason.REMOVED
    fresh, created = await _create(store, "s")
    assert created and fresh.revision > removal.revision
    assert await store.changes_after("s", old.revision) is None


async def test_a_never_used_id_starts_at_revision_zero(store: TodoStore) -> None:
    await _create(store, "gone")
    await _commit(store, "gone", "x")
    await store.remove_session("gone", RemovalReason.REMOVED)
    fresh, _ = await _create(store, "fresh")
    assert fresh.revision == 0


async def test_remove_session_takes_descendants_and_spares_others(store: TodoStore) -> None:
    for session_id, parent_id in [("root", ""), ("child", "root"), ("grandchild", "child"), ("other", "")]:
        await _create(store, session_id, parent_id)
    removed = await store.remove_session("root", RemovalReason.EXPIRED)
    assert sorted(change.session_id for change in removed) == ["child", "grandchild", "root"]
    assert {change.reason for change in removed} == {RemovalReason.EXPIRED}
    listed = await store.list_sessions("", 10, EVERY_SESSION)
    assert [s.session_id for s in listed] == ["other"]
    assert await store.remove_session("root", RemovalReason.REMOVED) == []


async def test_remove_all_sessions_keeps_the_global_list(store: TodoStore) -> None:
    await _commit(store, GLOBAL_SESSION_ID, "global")
    await _create(store, "a")
    await _create(store, "b", "a")
    removed = await store.remove_all_sessions()
    assert sorted(change.session_id for change in removed) == ["a", "b"]
    state = await store.get(GLOBAL_SESSION_ID)
    assert state is not None and state.todos == _todos("global")


async def test_list_sessions_pages_in_id_order(store: TodoStore) -> None:
    for session_id in ["c", "a", "b", "d"]:
        await _create(store, session_id)
    first = await store.list_sessions("", 2, EVERY_SESSION)
    second = await store.list_sessions(first[-1].session_id, 2, EVERY_SESSION)
    assert [s.session_id for s in first + second] == ["a", "b", "c", "d"]


async def test_list_sessions_filters_by_parent_and_labels(store: TodoStore) -> None:
    await _create(store, "p")
    await _create(store, "k1", "p", labels={"dir": "/a"})
    await _create(store, "k2", "p", labels={"dir": "/b"})
    await _create(store, "k3", "", labels={"dir": "/a"})
    children = await store.list_sessions("", 10, SessionFilter(parent_id="p"))
    in_a = await store.list_sessions("", 10, SessionFilter(labels={"dir": "/a"}))
    both = await store.list_sessions("k1", 10, SessionFilter(parent_id="p", labels={"dir": "/b"}))
    assert [s.session_id for s in children] == ["k1", "k2"]
    assert [s.session_id for s in in_a] == ["k1", "k3"]
    assert [s.session_id for s in both] == ["k2"]


async def test_metadata_labels_and_times_round_trip(store: TodoStore) -> None:
    created_state, _ = await _create(store, "s", labels={"title": "T"}, created_at=1.5, updated_at=1.5, idle_ttl=60.0)
    state = await store.get("s")
    assert state == created_state and state is not None
    assert (dict(state.info.labels), state.info.created_at, state.info.idle_ttl) == ({"title": "T"}, 1.5, 60.0)
    todo = Todo(id="t", content="c", metadata={"example.com/estimate": "3"})
    info = SessionInfo("", {"title": "U"}, 1.5, 9.0, 60.0)
    assert await store.commit(Change("s", ChangeKind.TODOS_REPLACED, 1, (todo,), info=info, origin="x"))
    state = await store.get("s")
    assert state is not None and state.todos == (todo,) and state.info == info


async def test_the_feed_numbers_every_change_and_resumes_by_cursor(store: TodoStore) -> None:
    start, _ = await store.snapshot()
    _, created = await _create(store, "s")
    assert created is not None
    first = await _commit(store, "s", "a")
    (removal,) = await store.remove_session("s", RemovalReason.REMOVED)
    cursors = [created.cursor, first.cursor, removal.cursor]
    assert cursors == sorted(set(cursors)) and cursors[0] > start
    after = await store.feed_after(start)
    assert after is not None
    assert [(c.kind, c.session_id) for c in after] == [
        (ChangeKind.SESSION_CREATED, "s"),
        (ChangeKind.TODOS_REPLACED, "s"),
        (ChangeKind.SESSION_REMOVED, "s"),
    ]
    assert [c.kind for c in await store.feed_after(first.cursor) or []] == [ChangeKind.SESSION_REMOVED]
    assert await store.feed_after(removal.cursor) == []
    assert await store.feed_after(removal.cursor + 1) is None  # newer than the store knows


async def test_the_feed_forgets_beyond_its_history(store: TodoStore) -> None:
    start, _ = await store.snapshot()
    await _create(store, "s")
    for n in range(FEED_HISTORY + 1):
        await _commit(store, "s", str(n))
    assert await store.feed_after(start) is None


async def test_a_snapshot_is_every_session_at_one_cursor(store: TodoStore) -> None:
    await _create(store, "a")
    last = await _commit(store, "a", "x")
    cursor, states = await store.snapshot()
    assert cursor == last.cursor
    assert [(s.session_id, s.todos) for s in states] == [("a", _todos("x")), (GLOBAL_SESSION_ID, ())]


async def test_sessions_past_their_idle_ttl_are_due(store: TodoStore) -> None:
    await _create(store, "idle", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    await _create(store, "busy", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    await _create(store, "forever", created_at=100.0, updated_at=100.0)
    state = await store.get("busy")
    assert state is not None
    touched = SessionInfo("", {}, 100.0, 108.0, 10.0)
    assert await store.commit(Change("busy", ChangeKind.TODOS_REPLACED, 1, _todos("x"), info=touched))
    assert await store.expired(105.0) == []
    assert await store.expired(111.0) == ["idle"]
    assert await store.expired(119.0) == ["busy"]


async def test_a_request_id_is_remembered_with_its_write(store: TodoStore) -> None:
    state, _ = await _create(store, "s")
    todo = Todo(id="t", content="once")
    result = AddResult(todo, 0, state.revision + 1)
    change = Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t", info=state.info)
    assert await store.commit(change, ("req-1", result))
    assert await store.find_request("s", "req-1") == result
    assert await store.find_request("s", "req-2") is None


async def test_a_request_id_is_remembered_per_session_for_10000_writes_with_its_fingerprint(
    store: TodoStore,
) -> None:
    state, _ = await _create(store, "s")
    await _create(store, "other")
    todo = Todo(id="t", content="once")
    result = AddResult(todo, 0, state.revision + 1, "fingerprint-1")
    change = Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t", info=state.info)
    assert await store.commit(change, ("req-1", result))
    for _ in range(10_000):
        await _commit(store, "s", "later")
    assert await store.find_request("s", "req-1") == result
    assert await store.find_request("other", "req-1") is None  # request ids are per session


async def test_removing_a_session_forgets_its_request_ids(store: TodoStore) -> None:
    state, _ = await _create(store, "s")
    todo = Todo(id="t", content="once")
    change = Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t", info=state.info)
    await store.commit(change, ("req-1", AddResult(todo, 0, change.revision)))
    await store.remove_session("s", RemovalReason.REMOVED)
    await _create(store, "s")
    assert await store.find_request("s", "req-1") is None

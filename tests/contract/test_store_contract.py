"""The TodoStore contract, checked against every storage engine alike (no gRPC)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import ExitStack, asynccontextmanager
from pathlib import Path

import pytest

from sessiontodo_server.domain.batch import Batch, BatchWritten, Create, Operation, Outcome, Remove, Write, WriteContext
from sessiontodo_server.domain.errors import (
    BatchRequestIdReused,
    InvalidArgument,
    LimitExceeded,
    ParentMismatch,
    RevisionMismatch,
    SessionNotFound,
    TodoNotFound,
)
from sessiontodo_server.domain.mutations import AddTodo, Mutation, RemoveTodo, ReplaceTodos, UpdateSession, UpdateTodo
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, SessionState, TodoStore, Written
from sessiontodo_server.domain.values import (
    EVERY_SESSION,
    Change,
    ChangeKind,
    Limits,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    TodoPriority,
    TodoStatus,
)
from sessiontodo_server.stores.etcd import EtcdStore
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.redis import RedisStore
from sessiontodo_server.stores.sqlite import open_sqlite_store
from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import ON_ETCD, ON_REDIS
from tests.support.redis_server import RedisServer

HISTORY = 4
FEED_HISTORY = 8


ENGINES = [
    "memory",
    "sqlite",
    "sqlite-fsync",
    pytest.param("redis", marks=ON_REDIS),
    pytest.param("etcd", marks=ON_ETCD),
]


@asynccontextmanager
async def _opened(engine: str, tmp_path: Path, etcd_members: int = 1) -> AsyncIterator[TodoStore]:
    with ExitStack() as servers:
        engines: dict[str, Callable[[], TodoStore]] = {
            "memory": lambda: MemoryStore(HISTORY, feed_history=FEED_HISTORY),
            "sqlite": lambda: open_sqlite_store(tmp_path / "todos.db", HISTORY, FEED_HISTORY),
            "sqlite-fsync": lambda: open_sqlite_store(tmp_path / "todos.db", HISTORY, FEED_HISTORY, durability="fsync"),
            "redis": lambda: RedisStore(
                servers.enter_context(RedisServer(tmp_path / "redis")).url, HISTORY, FEED_HISTORY
            ),
            "etcd": lambda: EtcdStore(servers.enter_context(EtcdCluster(etcd_members)).url(), HISTORY, FEED_HISTORY),
        }
        store = engines[engine]()
        await store.open()
        yield store
        await store.close()


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TodoStore]:
    async with _opened(request.param, tmp_path) as opened:
        yield opened


@pytest.fixture(params=ENGINES)
async def batching(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TodoStore]:
    """Every store; etcd's on three members (a batch is one Txn, committed by a majority)."""
    async with _opened(request.param, tmp_path, etcd_members=3) as opened:
        yield opened


def _todos(*contents: str) -> tuple[Todo, ...]:
    return tuple(Todo(id=f"t{n}", content=content) for n, content in enumerate(contents))


LIMITS = Limits(max_todos_per_session=3, max_list_bytes=64, max_metadata_bytes=32, max_labels=2)


async def _write(
    store: TodoStore,
    session_id: str,
    mutation: Mutation,
    expected_revision: int | None = None,
    request_id: str = "",
    now: float = 0.0,
    limits: Limits = LIMITS,
) -> Written:
    return await store.write(
        Write(session_id, mutation, expected_revision), WriteContext(request_id, "test", now, limits)
    )


async def _commit(store: TodoStore, session_id: str, *contents: str, now: float = 0.0) -> Change:
    written = await _write(store, session_id, ReplaceTodos(_todos(*contents)), now=now)
    assert written.change is not None
    return written.change


async def _add(
    store: TodoStore,
    session_id: str,
    content: str,
    index: int | None = None,
    todo_id: str = "",
    limits: Limits = LIMITS,
) -> Written:
    todo = Todo(todo_id or f"id-{content}", content)
    return await _write(store, session_id, AddTodo(todo, index, bool(todo_id)), limits=limits)


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
    assert state is not None
    assert state.todos == ()


async def test_create_session_is_get_or_create(store: TodoStore) -> None:
    first, created = await _create(store, "s")
    again, created_again = await _create(store, "s")
    assert created is not None
    assert created_again is None
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


async def test_the_tenant_session_limit_counts_only_that_tenants_sessions_and_not_its_global_list(
    store: TodoStore,
) -> None:
    async def create(session_id: str) -> None:
        await store.create_session(session_id, SessionInfo(), 100, "", max_per_tenant=2)

    await create(f"acme/{GLOBAL_SESSION_ID}")
    await create("acme/one")
    await create("globex/one")
    await create("acme/two")
    with pytest.raises(LimitExceeded):
        await create("acme/three")
    await store.remove_session("acme/one", RemovalReason.REMOVED)
    await create("acme/three")
    await create("globex/two")


async def test_session_count_follows_creations_and_removals_and_excludes_the_global_list(store: TodoStore) -> None:
    assert await store.session_count() == 0
    await _create(store, "parent")
    await _create(store, "child", "parent")
    await _create(store, "other")
    assert await store.session_count() == 3
    await store.remove_session("parent", RemovalReason.REMOVED)
    assert await store.session_count() == 1


async def test_a_write_with_a_stale_expected_revision_is_refused_and_changes_nothing(store: TodoStore) -> None:
    await _create(store, "s")
    change = await _commit(store, "s", "a")
    with pytest.raises(RevisionMismatch) as refused:
        await _write(store, "s", ReplaceTodos(_todos("b")), expected_revision=change.revision - 1)
    assert (refused.value.expected, refused.value.actual) == (change.revision - 1, change.revision)
    state = await store.get("s")
    assert state is not None
    assert state.revision == change.revision
    assert state.todos == _todos("a")


async def test_a_write_expecting_a_revision_ahead_of_the_sessions_is_refused_and_changes_nothing(
    store: TodoStore,
) -> None:
    await _create(store, "s")
    change = await _commit(store, "s", "a")
    with pytest.raises(RevisionMismatch) as refused:
        await _write(store, "s", ReplaceTodos(_todos("b")), expected_revision=change.revision + 1)
    assert (refused.value.expected, refused.value.actual) == (change.revision + 1, change.revision)
    state = await store.get("s")
    assert state is not None
    assert (state.revision, state.todos) == (change.revision, _todos("a"))


async def test_a_write_to_a_missing_session_is_not_found(store: TodoStore) -> None:
    with pytest.raises(SessionNotFound):
        await _write(store, "ghost", ReplaceTodos(_todos("a")))
    assert await store.get("ghost") is None


async def test_unconditional_writes_racing_on_one_session_all_succeed_in_one_order(store: TodoStore) -> None:
    await _create(store, "s")
    written = await asyncio.gather(*(_add(store, "s", f"w{n}", limits=Limits()) for n in range(20)))
    revisions = sorted(w.state.revision for w in written)
    assert revisions == list(range(1, 21))
    state = await store.get("s")
    assert state is not None
    assert sorted(t.content for t in state.todos) == sorted(f"w{n}" for n in range(20))


async def test_add_inserts_at_the_index_clamped_to_the_list(store: TodoStore) -> None:
    await _create(store, "s")
    await _add(store, "s", "b", limits=Limits())
    front = await _add(store, "s", "a", index=-5, limits=Limits())
    end = await _add(store, "s", "d", index=99, limits=Limits())
    middle = await _add(store, "s", "c", index=2, limits=Limits())
    assert [w.result.index for w in (front, end, middle) if w.result] == [0, 2, 2]
    assert [t.content for t in middle.state.todos] == ["a", "b", "c", "d"]
    assert middle.change is not None
    assert middle.change.kind is ChangeKind.TODO_ADDED
    assert middle.change.todo_id == "id-c"
    assert middle.change.todos == middle.state.todos


async def test_add_refuses_a_duplicate_id_and_a_full_list_as_the_domain_does(store: TodoStore) -> None:
    await _create(store, "s")
    await _add(store, "s", "a", todo_id="x")
    with pytest.raises(InvalidArgument) as duplicate:
        await _add(store, "s", "b", todo_id="x")
    assert duplicate.value.violations == [("todo.id", "duplicate id 'x'")]
    with pytest.raises(LimitExceeded) as too_big:
        await _add(store, "s", "y" * 60)
    assert (too_big.value.limit, too_big.value.value) == ("list bytes", 64)
    await _add(store, "s", "b")
    await _add(store, "s", "c")
    with pytest.raises(LimitExceeded) as full:
        await _add(store, "s", "d")
    assert (full.value.limit, full.value.value) == ("todos per session", 3)
    state = await store.get("s")
    assert state is not None
    assert state.revision == 3


async def test_a_retried_request_id_returns_the_first_result_and_writes_nothing(store: TodoStore) -> None:
    await _create(store, "s")
    first = await _write(store, "s", AddTodo(Todo("t1", "once"), None, False), request_id="req")
    again = await _write(store, "s", AddTodo(Todo("t2", "once"), None, False), request_id="req")
    assert again.change is None
    assert again.result == first.result
    assert first.result is not None
    assert first.result.todo == Todo("t1", "once")
    assert first.result.revision == 1
    assert again.state.revision == 1
    assert again.state.todos == (Todo("t1", "once"),)


async def test_update_changes_the_given_fields_and_metadata(store: TodoStore) -> None:
    await _create(store, "s")
    await _write(store, "s", ReplaceTodos((Todo("t", "old", metadata={"a": "1", "b": "2"}),)))
    update = UpdateTodo("t", "new", TodoStatus.COMPLETED, TodoPriority.HIGH, {"c": "3"}, ("a",))
    written = await _write(store, "s", update)
    assert written.change is not None
    assert written.change.kind is ChangeKind.TODO_UPDATED
    expected = Todo("t", "new", TodoStatus.COMPLETED, TodoPriority.HIGH, {"b": "2", "c": "3"})
    assert written.state.todos == (expected,) == (await store.get("s") or written.state).todos


async def test_an_update_that_changes_nothing_keeps_the_revision(store: TodoStore) -> None:
    await _create(store, "s")
    await _write(store, "s", ReplaceTodos((Todo("t", "same", metadata={"k": "v"}),)))
    written = await _write(store, "s", UpdateTodo("t", "same", TodoStatus.PENDING, None, {"k": "v"}))
    assert written.change is None
    assert written.state.revision == 1


async def test_a_list_written_back_unchanged_after_an_update_is_no_change(store: TodoStore) -> None:
    """Lists changed inside the store encode exactly as the domain's own (stores/codec.py)."""
    tricky = 'quote " slash / back \\ tab \t nl \n nul \x00 del \x7f é ✓ \u2028 😀'
    await _create(store, "s")
    await _write(store, "s", ReplaceTodos((Todo("t", "x"),)))
    update = UpdateTodo("t", tricky, set_metadata={"z/ä": tricky[:8], "a": "1"})
    updated = await _write(store, "s", update, limits=Limits())
    assert updated.change is not None
    same = await _write(store, "s", ReplaceTodos(updated.state.todos), limits=Limits())
    assert same.change is None
    assert same.state == updated.state


async def test_update_refusals_follow_the_domain(store: TodoStore) -> None:
    await _create(store, "s")
    await _write(store, "s", ReplaceTodos((Todo("t", "x"),)))
    with pytest.raises(TodoNotFound):
        await _write(store, "s", UpdateTodo("missing", "y"))
    with pytest.raises(InvalidArgument) as metadata:
        await _write(store, "s", UpdateTodo("t", set_metadata={"k": "v" * 40}))
    assert metadata.value.violations == [("metadata", "keys and values must total at most 32 bytes")]
    with pytest.raises(InvalidArgument) as content:
        await _write(store, "s", UpdateTodo("t", "y" * 70))
    assert content.value.violations == [("content", "the list must stay under 64 bytes of text")]
    state = await store.get("s")
    assert state is not None
    assert state.revision == 1
    assert state.todos == (Todo("t", "x"),)


async def test_remove_todo_removes_exactly_that_todo(store: TodoStore) -> None:
    await _create(store, "s")
    await _write(store, "s", ReplaceTodos(_todos("a", "b", "c")))
    written = await _write(store, "s", RemoveTodo("t1"))
    assert written.change is not None
    assert written.change.kind is ChangeKind.TODO_REMOVED
    assert [t.content for t in written.state.todos] == ["a", "c"]
    with pytest.raises(TodoNotFound):
        await _write(store, "s", RemoveTodo("t1"))


async def test_the_bytes_of_a_removed_todo_are_given_back(store: TodoStore) -> None:
    await _create(store, "s")
    await _add(store, "s", "x" * 40, todo_id="big")
    await _write(store, "s", RemoveTodo("big"))
    await _add(store, "s", "y" * 40, todo_id="big")


async def test_update_session_sets_and_removes_labels_and_the_idle_ttl(store: TodoStore) -> None:
    await _create(store, "s", labels={"a": "1"})
    await _commit(store, "s", "kept")
    written = await _write(store, "s", UpdateSession({"b": "2"}, ("a",), 30.0), now=5.0)
    assert written.change is not None
    assert written.change.kind is ChangeKind.SESSION_UPDATED
    assert written.change.todos == _todos("kept")
    info = written.state.info
    assert (dict(info.labels), info.idle_ttl, info.updated_at) == ({"b": "2"}, 30.0, 5.0)
    unchanged = await _write(store, "s", UpdateSession({"b": "2"}, ("a",), 30.0))
    assert unchanged.change is None
    assert unchanged.state.revision == written.state.revision
    with pytest.raises(InvalidArgument) as too_many:
        await _write(store, "s", UpdateSession({"c": "3", "d": "4"}))
    assert too_many.value.violations == [("labels", "at most 2 labels")]


async def test_update_session_with_a_stale_expected_revision_is_refused_and_changes_nothing(store: TodoStore) -> None:
    await _create(store, "s", labels={"title": "first"})
    await _commit(store, "s", "x")

    with pytest.raises(RevisionMismatch):
        await _write(store, "s", UpdateSession({"title": "stale"}), expected_revision=0)
    state = await store.get("s")

    assert state is not None
    assert dict(state.info.labels) == {"title": "first"}


async def test_changes_after_bridges_only_retained_history(store: TodoStore) -> None:
    await _create(store, "s")
    changes = [await _commit(store, "s", str(n)) for n in range(6)]
    current = changes[-1].revision
    missed = await store.changes_after("s", current - 2)
    assert missed is not None
    assert [c.revision for c in missed] == [current - 1, current]
    assert await store.changes_after("s", current) == []
    assert await store.changes_after("s", current - HISTORY - 1) is None  # older than the history
    assert await store.changes_after("s", current + 1) is None  # newer than the store knows
    assert await store.changes_after("ghost", 0) is None


async def test_a_recreated_session_starts_above_every_revision_of_its_previous_incarnation(store: TodoStore) -> None:
    await _create(store, "s")
    old = await _commit(store, "s", "old")
    (removal,) = await store.remove_session("s", RemovalReason.REMOVED)
    assert removal.kind is ChangeKind.SESSION_REMOVED
    assert removal.revision == old.revision + 1
    assert removal.reason is RemovalReason.REMOVED
    fresh, created = await _create(store, "s")
    assert created
    assert fresh.revision > removal.revision
    assert await store.changes_after("s", old.revision) is None


async def test_a_session_removed_by_a_batch_and_created_again_starts_above_every_revision_it_had(
    store: TodoStore,
) -> None:
    await _create(store, "s")
    old = await _commit(store, "s", "old")
    (removal,) = (await _batch(store, Remove("s"))).changes
    assert (removal.kind, removal.revision) == (ChangeKind.SESSION_REMOVED, old.revision + 1)
    fresh, created = await _create(store, "s")
    assert created
    assert fresh.revision > removal.revision
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
    assert state is not None
    assert state.todos == _todos("global")


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
    assert state == created_state
    assert state is not None
    assert (dict(state.info.labels), state.info.created_at, state.info.idle_ttl) == ({"title": "T"}, 1.5, 60.0)
    todo = Todo(id="t", content="c", metadata={"example.com/estimate": "3"})
    await _write(store, "s", ReplaceTodos((todo,)), now=9.0)
    written = await _write(store, "s", UpdateSession({"title": "U"}), now=9.5)
    state = await store.get("s")
    assert state is not None
    assert state.todos == (todo,)
    assert state == written.state
    assert state.info == SessionInfo("", {"title": "U"}, 1.5, 9.5, 60.0)


async def test_the_feed_numbers_every_change_and_resumes_by_cursor(store: TodoStore) -> None:
    start, _ = await store.snapshot()
    _, created = await _create(store, "s")
    assert created is not None
    first = await _commit(store, "s", "a")
    (removal,) = await store.remove_session("s", RemovalReason.REMOVED)
    cursors = [created.cursor, first.cursor, removal.cursor]
    assert cursors == sorted(set(cursors))
    assert cursors[0] > start
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


async def test_a_tenants_snapshot_is_its_sessions_and_its_global_list_only(store: TodoStore) -> None:
    for session_id in ("acme/a", f"acme/{GLOBAL_SESSION_ID}", "b", "globex/a", "acmeco/a"):
        await _create(store, session_id)
    last = await _commit(store, "acme/a", "x")

    cursor, states = await store.snapshot("acme")

    assert cursor == last.cursor
    assert sorted(s.session_id for s in states) == ["acme/a", f"acme/{GLOBAL_SESSION_ID}"]


async def test_sessions_past_their_idle_ttl_are_due(store: TodoStore) -> None:
    await _create(store, "idle", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    await _create(store, "busy", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    await _create(store, "forever", created_at=100.0, updated_at=100.0)
    await _commit(store, "busy", "x", now=108.0)
    assert await store.expired(105.0) == []
    assert await store.expired(111.0) == ["idle"]
    assert await store.expired(119.0) == ["busy"]


async def test_a_session_written_after_the_sweep_found_it_due_does_not_expire(store: TodoStore) -> None:
    await _create(store, "renewed", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    assert await store.expired(111.0) == ["renewed"]
    await _commit(store, "renewed", "acknowledged", now=111.5)
    assert await store.remove_session("renewed", RemovalReason.EXPIRED) == []
    state = await store.get("renewed")
    assert state is not None
    assert state.todos == _todos("acknowledged")


async def test_a_session_with_a_write_in_flight_when_its_expiry_runs_does_not_expire(store: TodoStore) -> None:
    """The write is accepted first (with a journal it is not durable yet). A store behind a network
    may still receive the removal first: then the write is refused, never acknowledged."""
    await _create(store, "renewing", created_at=100.0, updated_at=100.0, idle_ttl=10.0)
    assert await store.expired(111.0) == ["renewing"]
    write = asyncio.create_task(_commit(store, "renewing", "in flight", now=111.5))
    await asyncio.sleep(0)
    removed = await store.remove_session("renewing", RemovalReason.EXPIRED)
    try:
        await write
    except SessionNotFound:
        assert [change.session_id for change in removed] == ["renewing"]
        return
    assert removed == []
    state = await store.get("renewing")
    assert state is not None
    assert state.todos == _todos("in flight")


async def test_a_request_id_is_remembered_per_session_for_10000_writes_with_its_fingerprint(
    store: TodoStore,
) -> None:
    await _create(store, "s")
    await _create(store, "other")
    add = AddTodo(Todo("t", "once"), None, False, "fingerprint-1")
    first = await _write(store, "s", add, request_id="req-1", limits=Limits())
    for _ in range(10_000):
        await _write(store, "s", RemoveTodo("t") if _ % 2 == 0 else add, limits=Limits())
    again = await _write(store, "s", add, request_id="req-1", limits=Limits())
    assert again.change is None
    assert again.result == first.result
    assert first.result is not None
    assert first.result.fingerprint == "fingerprint-1"
    elsewhere = await _write(store, "other", add, request_id="req-1", limits=Limits())
    assert elsewhere.change is not None  # request ids are per session


async def test_removing_a_session_forgets_its_request_ids(store: TodoStore) -> None:
    await _create(store, "s")
    await _write(store, "s", AddTodo(Todo("t", "once"), None, False), request_id="req-1")
    await store.remove_session("s", RemovalReason.REMOVED)
    await _create(store, "s")
    again = await _write(store, "s", AddTodo(Todo("t", "once"), None, False), request_id="req-1")
    assert again.change is not None


async def _batch(
    store: TodoStore, *operations: Operation, request_id: str = "", fingerprint: str = "", limits: Limits = LIMITS
) -> BatchWritten:
    return await store.write_batch(Batch(operations, fingerprint), WriteContext(request_id, "batch", 5.0, limits))


async def test_a_batch_applies_its_operations_in_order_each_on_the_state_the_last_left(
    batching: TodoStore,
) -> None:
    written = await _batch(
        batching,
        Create("b", SessionInfo()),
        Write("b", ReplaceTodos(_todos("one"))),
        Write("b", AddTodo(Todo("t1", "two"), None, True), expected_revision=1),
        Write("b", UpdateTodo("t0", content="uno")),
        Create("b.child", SessionInfo(parent_id="b")),
    )

    assert [outcome.revision for outcome in written.outcomes] == [0, 1, 2, 3, 0]
    state = await batching.get("b")
    assert state is not None
    assert [todo.content for todo in state.todos] == ["uno", "two"]


async def test_a_batch_makes_one_change_per_effective_operation_with_consecutive_cursors(
    batching: TodoStore,
) -> None:
    before = (await batching.snapshot())[0]

    written = await _batch(
        batching,
        Create("b", SessionInfo()),
        Write("b", ReplaceTodos(_todos("one"))),
        Write("b", ReplaceTodos(_todos("one"))),  # the same list: no change
        Write("b", RemoveTodo("t0")),
    )

    kinds = [change.kind for change in written.changes]
    assert kinds == [ChangeKind.SESSION_CREATED, ChangeKind.TODOS_REPLACED, ChangeKind.TODO_REMOVED]
    first = written.changes[0].cursor
    assert [change.cursor for change in written.changes] == [first, first + 1, first + 2]
    assert first > before
    assert [change.origin for change in written.changes] == ["batch"] * 3
    feed = await batching.feed_after(before)
    assert [(c.cursor, c.kind, c.revision) for c in feed or ()] == [
        (c.cursor, c.kind, c.revision) for c in written.changes
    ]


async def test_a_batchs_changes_read_back_from_the_feed_and_the_history_carry_each_whole_list(
    batching: TodoStore,
) -> None:
    await _create(batching, "a")
    await _commit(batching, "a", "kept", "dropped")
    before = (await batching.snapshot())[0]

    written = await _batch(
        batching,
        Write("a", AddTodo(Todo("t2", "added"), 1, True)),
        Create("b", SessionInfo()),
        Write("a", RemoveTodo("t1")),
        Write("b", ReplaceTodos(_todos("other"))),
        Write("a", UpdateTodo("t0", content="changed")),
    )

    lists = [[todo.content for todo in change.todos] for change in written.changes]
    assert lists == [["kept", "added", "dropped"], [], ["kept", "added"], ["other"], ["changed", "added"]]
    feed = await batching.feed_after(before)
    assert [(c.session_id, c.revision, c.todos) for c in feed or ()] == [
        (c.session_id, c.revision, c.todos) for c in written.changes
    ]
    history = await batching.changes_after("a", 1)
    assert [(c.revision, c.todos) for c in history or ()] == [
        (c.revision, c.todos) for c in written.changes if c.session_id == "a"
    ]


async def test_a_batch_removing_and_creating_one_id_again_leaves_the_new_session(batching: TodoStore) -> None:
    await _create(batching, "a")
    await _commit(batching, "a", "old")

    written = await _batch(batching, Remove("a"), Create("a", SessionInfo()), Write("a", ReplaceTodos(_todos("new"))))

    assert [(c.kind, c.revision) for c in written.changes] == [
        (ChangeKind.SESSION_REMOVED, 2),
        (ChangeKind.SESSION_CREATED, 3),
        (ChangeKind.TODOS_REPLACED, 4),
    ]
    state = await batching.get("a")
    assert state is not None
    assert (state.revision, [todo.content for todo in state.todos]) == (4, ["new"])
    assert await batching.session_count() == 1


async def test_a_batch_with_a_failing_operation_writes_nothing(batching: TodoStore) -> None:
    await _create(batching, "a")
    await _commit(batching, "a", "kept")
    before = (await batching.snapshot())[0]

    with pytest.raises(TodoNotFound) as raised:
        await _batch(
            batching,
            Create("new", SessionInfo()),
            Write("a", ReplaceTodos(_todos("lost"))),
            Write("a", RemoveTodo("no-such-todo")),
        )

    assert raised.value.write_index == 2
    assert await batching.get("new") is None
    state = await batching.get("a")
    assert state is not None
    assert [todo.content for todo in state.todos] == ["kept"]
    assert (await batching.snapshot())[0] == before


async def test_a_batch_refuses_a_stale_expected_revision_naming_the_write(batching: TodoStore) -> None:
    await _create(batching, "a")

    with pytest.raises(RevisionMismatch) as raised:
        await _batch(batching, Write("a", ReplaceTodos(_todos("x"))), Write("a", RemoveTodo("t0"), expected_revision=0))

    assert raised.value.write_index == 1


async def test_a_batch_refuses_an_expected_revision_ahead_of_the_sessions_and_writes_nothing(
    store: TodoStore,
) -> None:
    await _create(store, "a")
    change = await _commit(store, "a", "kept")

    with pytest.raises(RevisionMismatch) as raised:
        await _batch(store, Write("a", ReplaceTodos(_todos("x")), expected_revision=change.revision + 1))

    assert (raised.value.expected, raised.value.actual) == (change.revision + 1, change.revision)
    state = await store.get("a")
    assert state is not None
    assert (state.revision, state.todos) == (change.revision, _todos("kept"))


async def test_a_batch_removal_takes_descendants_created_in_the_same_batch(batching: TodoStore) -> None:
    await _create(batching, "p")

    written = await _batch(batching, Create("p.c", SessionInfo(parent_id="p")), Remove("p"), Remove("gone"))

    assert written.outcomes[1].removed == ("p", "p.c")
    assert written.outcomes[2] == Outcome(0, False)
    assert [change.kind for change in written.changes][-2:] == [ChangeKind.SESSION_REMOVED] * 2
    assert await batching.get("p.c") is None


async def test_a_batch_of_only_a_removal_removes_the_session_and_its_descendants(batching: TodoStore) -> None:
    await _create(batching, "p")
    await _create(batching, "p.c", parent_id="p")

    written = await _batch(batching, Remove("p"))

    assert written.outcomes[0].removed == ("p", "p.c")
    assert await batching.session_count() == 0


async def test_a_batch_removal_takes_the_descendants_of_a_child_the_batch_also_names(batching: TodoStore) -> None:
    await _create(batching, "p")
    await _create(batching, "p.c", parent_id="p")
    await _create(batching, "p.c.g", parent_id="p.c")

    written = await _batch(batching, Write("p.c", ReplaceTodos(_todos("last"))), Remove("p"))

    assert written.outcomes[1].removed == ("p", "p.c", "p.c.g")
    assert await batching.get("p.c.g") is None
    assert await batching.session_count() == 0


async def test_a_batch_creating_past_the_session_limit_is_refused(batching: TodoStore) -> None:
    limits = Limits(max_sessions=2)

    with pytest.raises(LimitExceeded) as raised:
        await _batch(batching, *(Create(f"s{n}", SessionInfo()) for n in range(3)), limits=limits)

    assert raised.value.write_index == 2
    assert await batching.session_count() == 0


async def test_a_remembered_batch_request_id_returns_the_first_outcomes_and_writes_nothing(batching: TodoStore) -> None:
    first = await _batch(batching, Create("b", SessionInfo()), request_id="\nr1", fingerprint="f")
    cursor = (await batching.snapshot())[0]

    again = await _batch(batching, Create("b", SessionInfo()), request_id="\nr1", fingerprint="f")

    assert again.outcomes == first.outcomes
    assert again.changes == ()
    assert (await batching.snapshot())[0] == cursor


async def test_a_batch_request_id_reused_for_another_batch_is_refused(batching: TodoStore) -> None:
    await _batch(batching, Create("b", SessionInfo()), request_id="\nr1", fingerprint="f")

    with pytest.raises(BatchRequestIdReused):
        await _batch(batching, Create("c", SessionInfo()), request_id="\nr1", fingerprint="g")


async def test_a_batch_creating_past_a_tenants_session_limit_is_refused(batching: TodoStore) -> None:
    limits = Limits(max_sessions_per_tenant=2)
    await _batch(batching, Create("acme/one", SessionInfo()), limits=limits)

    with pytest.raises(LimitExceeded) as raised:
        await _batch(
            batching,
            Create("globex/one", SessionInfo()),
            *(Create(f"acme/{n}", SessionInfo()) for n in range(2)),
            limits=limits,
        )

    assert raised.value.write_index == 2
    assert await batching.get("globex/one") is None

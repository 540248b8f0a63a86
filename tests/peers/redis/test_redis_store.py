"""The Redis store as replicas see it: several stores on one Redis stand for replicas (no gRPC)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import redis.exceptions

from sessiontodo_server.domain.errors import LimitExceeded, RevisionMismatch, SessionNotFound, Unavailable
from sessiontodo_server.domain.mutations import AddTodo, Mutation, ReplaceTodos
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, Written
from sessiontodo_server.domain.todos import EVERY_SESSION, Change, ChangeKind, Limits, RemovalReason, SessionInfo, Todo
from sessiontodo_server.stores.redis import RedisStore
from tests.support import eventually
from tests.support.redis_server import RedisServer

OpenReplica = Callable[..., Awaitable[RedisStore]]
LIMITS = Limits()


def _listen(store: RedisStore) -> list[Change]:
    """Every change ``store`` reports from other replicas, in the order reported."""
    heard: list[Change] = []
    store.on_external_change(heard.append)
    return heard


async def _write(store: RedisStore, session_id: str, mutation: Mutation, expected: int | None = None) -> Written:
    return await store.write(
        session_id, mutation, expected_revision=expected, request_id="", origin="test", now=1.0, limits=LIMITS
    )


async def _replace(store: RedisStore, session_id: str, *contents: str) -> Change:
    todos = tuple(Todo(f"t{n}", content) for n, content in enumerate(contents))
    written = await _write(store, session_id, ReplaceTodos(todos))
    assert written.change is not None
    return written.change


async def _create(store: RedisStore, session_id: str, parent_id: str = "", max_sessions: int = 10) -> Change | None:
    _, created = await store.create_session(session_id, SessionInfo(parent_id), max_sessions, "test")
    return created


async def _heard_up_to(heard: list[Change], barrier: Change) -> None:
    """Wait until ``barrier`` is heard: changes are heard in feed order, so every change before it in
    the feed has been heard by then, or never will be."""
    await eventually(lambda: barrier.cursor in [change.cursor for change in heard])


def _summary(changes: list[Change]) -> list[tuple[ChangeKind, str, int, tuple[str, ...]]]:
    return [(c.kind, c.session_id, c.revision, tuple(t.content for t in c.todos)) for c in changes]


async def _pause_following(store: RedisStore) -> None:
    """What a replica that is slow to read the feed looks like."""
    await store._stop_following()


def _resume_following(store: RedisStore) -> None:
    store._task = asyncio.create_task(store._follower.run())


async def test_a_replica_hears_every_change_others_make_in_feed_order(open_replica: OpenReplica) -> None:
    first, second, reader = await open_replica(), await open_replica(), await open_replica()
    heard = _listen(reader)
    made = [await _create(first, "s")]
    for n in range(10):
        made.append(await _replace([first, second][n % 2], "s", f"v{n}"))
    made += await second.remove_session("s", RemovalReason.REMOVED)
    await eventually(lambda: len(heard) == len(made))
    assert _summary(heard) == _summary([c for c in made if c is not None])
    assert [c.cursor for c in heard] == [c.cursor for c in made if c is not None]


async def test_a_replica_does_not_hear_its_own_changes(open_replica: OpenReplica) -> None:
    writer, other = await open_replica(), await open_replica()
    heard_by_writer = _listen(writer)
    await _create(writer, "s")
    await _replace(writer, "s", "mine")
    theirs = await _replace(other, "s", "theirs")
    barrier = await _replace(other, "s", "later")
    await _heard_up_to(heard_by_writer, barrier)
    assert _summary(heard_by_writer) == _summary([theirs, barrier])


async def test_a_list_too_large_for_the_feed_is_read_from_the_sessions_history(open_replica: OpenReplica) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = _listen(reader)
    await _create(writer, "s")
    large = await _replace(writer, "s", *(f"{n}: " + "x" * 4000 for n in range(40)))  # ~160 KB of text
    await eventually(lambda: len(heard) == 2)
    assert _summary(heard[1:]) == _summary([large])
    assert _summary((await reader.feed_after(large.cursor - 1)) or []) == _summary([large])


async def test_a_replica_writing_before_it_read_others_changes_delivers_them_first(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    heard = _listen(second)
    await _create(first, "s")
    await eventually(lambda: len(heard) == 1)
    await _pause_following(second)
    unheard = [await _replace(first, "s", "from elsewhere"), await _replace(first, "s", "again")]
    mine = await _replace(second, "s", "mine")
    assert _summary(heard[1:]) == _summary(unheard)  # already, before its own change is published
    assert mine.cursor == unheard[-1].cursor + 1
    _resume_following(second)
    barrier = await _replace(first, "s", "later")
    await _heard_up_to(heard, barrier)
    assert _summary(heard[3:]) == _summary([barrier])  # nothing heard twice, and never its own change


async def test_a_replica_whose_connections_were_cut_catches_up_on_what_it_missed(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = _listen(reader)
    await _create(writer, "s")
    await eventually(lambda: len(heard) == 1)
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        await admin.client_kill_filter(_type="pubsub")
    missed = [await _replace(writer, "s", f"while away {n}") for n in range(3)]
    await eventually(lambda: len(heard) == 4)
    assert _summary(heard[1:]) == _summary(missed)


async def test_a_replica_the_feed_was_trimmed_past_resets_every_watcher(open_replica: OpenReplica) -> None:
    writer, reader = await open_replica(feed_history=2), await open_replica(feed_history=2)
    heard = _listen(reader)
    await _create(writer, "s")
    await eventually(lambda: len(heard) == 1)
    await _pause_following(reader)
    for n in range(4):
        last = await _replace(writer, "s", f"lost {n}")
    _resume_following(reader)
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].session_id, heard[1].cursor) == (ChangeKind.RESET, "", last.cursor)


async def test_a_replica_hears_a_removal_made_by_another_replica_with_its_reason(open_replica: OpenReplica) -> None:
    remover, other = await open_replica(), await open_replica()
    heard = _listen(other)
    await _create(remover, "parent")
    await _create(remover, "child", "parent")
    removed = await remover.remove_session("parent", RemovalReason.EXPIRED)
    await eventually(lambda: len(heard) == 4)
    assert _summary(heard[2:]) == _summary(removed)
    assert {c.reason for c in heard[2:]} == {RemovalReason.EXPIRED}


async def test_a_session_removed_on_one_replica_and_recreated_on_another_starts_above_its_removal(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "s")
    await _replace(first, "s", "old")
    (removal,) = await first.remove_session("s", RemovalReason.REMOVED)
    created = await _create(second, "s")
    assert created is not None
    assert created.revision > removal.revision


async def test_conditional_writes_racing_through_several_replicas_have_exactly_one_winner(
    open_replica: OpenReplica,
) -> None:
    replicas = [await open_replica() for _ in range(3)]
    await _create(replicas[0], "s")
    for round_ in range(10):
        state = await replicas[1].get("s")
        assert state is not None
        attempts = [
            _write(r, "s", ReplaceTodos((Todo("t", f"round {round_} by {n}"),)), state.revision)
            for n, r in enumerate(replicas)
        ]
        outcomes = await asyncio.gather(*attempts, return_exceptions=True)
        winners = [o for o in outcomes if isinstance(o, Written)]
        assert len(winners) == 1
        assert all(isinstance(o, RevisionMismatch) for o in outcomes if o is not winners[0])
        assert await replicas[2].get("s") == winners[0].state


async def test_unconditional_writers_on_two_replicas_never_fail_on_contention(open_replica: OpenReplica) -> None:
    """0.1 gave up after 32 compare-and-set attempts: 10% UNAVAILABLE with 32 writers on two replicas."""
    replicas = [await open_replica(), await open_replica()]
    await _create(replicas[0], "s")
    writers = [
        _write(replicas[n % 2], "s", AddTodo(Todo(f"w{n}-{k}", f"writer {n} #{k}"), None, True))
        for n in range(32)
        for k in range(5)
    ]
    written = await asyncio.gather(*writers)
    assert sorted(w.state.revision for w in written) == list(range(1, 161))
    state = await replicas[1].get("s")
    assert state is not None
    assert len(state.todos) == 160


async def test_a_request_id_recorded_through_one_replica_is_honoured_through_another(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "s")
    add = AddTodo(Todo("t", "once"), None, False)
    original = await first.write("s", add, expected_revision=None, request_id="req", origin="", now=1.0, limits=LIMITS)
    retried = await second.write("s", add, expected_revision=None, request_id="req", origin="", now=2.0, limits=LIMITS)
    assert retried.change is None
    assert retried.result == original.result


async def test_the_session_limit_counts_sessions_created_through_every_replica(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "a", max_sessions=2)
    await _create(second, "b", max_sessions=2)
    with pytest.raises(LimitExceeded):
        await _create(first, "c", max_sessions=2)


async def test_create_and_remove_forced_to_interleave_leave_no_half_session(
    open_replica: OpenReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1 created a session in two steps (index, then data): a RemoveAllSessions between them left
    a session readable and writable but unlisted, uncounted and unremovable. Here the creation is
    held at its only await point while another replica removes everything, in both orders."""
    creator, remover = await open_replica(), await open_replica()
    create_script = creator._scripts.create
    for remove_first in (True, False):
        release, reached = asyncio.Event(), asyncio.Event()

        async def held_create(*args: Any, release: asyncio.Event = release, reached: asyncio.Event = reached) -> Any:
            reached.set()
            await release.wait()
            return await create_script(*args)

        monkeypatch.setattr(creator._scripts, "create", held_create)
        await _create(remover, "parent")
        creating = asyncio.create_task(_create(creator, "child", "parent"))
        await reached.wait()
        if remove_first:
            await remover.remove_all_sessions()
            release.set()
            with pytest.raises(SessionNotFound):
                await creating
        else:
            release.set()
            await creating
            await remover.remove_all_sessions()
        monkeypatch.setattr(creator._scripts, "create", create_script)
        for store in (creator, remover):
            assert await store.get("child") is None
            assert await store.get("parent") is None
            assert await store.list_sessions("", 10, EVERY_SESSION) == []
        assert await _create(remover, "fresh", max_sessions=1) is not None  # nothing left counted
        assert await remover.remove_all_sessions() != []


async def test_creates_and_removes_racing_on_two_replicas_keep_index_and_data_in_step(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    a, b = await open_replica(), await open_replica()
    for round_ in range(5):
        jobs: list[Awaitable[Any]] = [_create([a, b][n % 2], f"s{n}", max_sessions=1000) for n in range(20)]
        jobs += [b.remove_all_sessions(), a.remove_all_sessions()]
        jobs += [a.remove_session(f"s{n}", RemovalReason.REMOVED) for n in range(0, 20, 3)]
        await asyncio.gather(*jobs)
        listed = {s.session_id for s in await a.list_sessions("", 1000, EVERY_SESSION)}
        readable = {f"s{n}" for n in range(20) if await b.get(f"s{n}") is not None}
        assert listed == readable, f"round {round_}"
        async with redis.asyncio.Redis(port=redis_server.port) as admin:
            assert await admin.zcard("sessiontodo:{st}:sessions") == len(listed) + 1  # and the global list
        await a.remove_all_sessions()


async def test_an_expired_session_is_removed_once_whichever_replicas_reap_it(open_replica: OpenReplica) -> None:
    reapers = [await open_replica(), await open_replica()]
    watcher = await open_replica()
    heard = _listen(watcher)
    await reapers[0].create_session("idle", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    due = await asyncio.gather(*(r.expired(200.0) for r in reapers))
    assert sorted(due[0] + due[1]) == ["idle"]  # claimed by one of them
    removed = [
        change
        for reaper, ids in zip(reapers, due, strict=True)
        for session_id in ids
        for change in await reaper.remove_session(session_id, RemovalReason.EXPIRED)
    ]
    assert [c.reason for c in removed] == [RemovalReason.EXPIRED]
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)


async def test_a_session_written_after_it_was_claimed_for_expiry_is_not_removed(open_replica: OpenReplica) -> None:
    reaper, writer = await open_replica(), await open_replica()
    await reaper.create_session("s", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    assert await reaper.expired(111.0) == ["s"]
    renewal = ReplaceTodos((Todo("t", "busy"),))
    await writer.write("s", renewal, expected_revision=None, request_id="", origin="", now=110.5, limits=LIMITS)
    assert await reaper.remove_session("s", RemovalReason.EXPIRED) == []
    assert await reaper.get("s") is not None


async def test_the_feed_resumes_on_any_replica_and_snapshots_are_consistent(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    start, _ = await second.snapshot()
    made = [await _create(first, "a"), await _replace(first, "a", "x"), await _create(second, "b")]
    made.append(await _replace(second, "a", "y"))
    feed = await first.feed_after(start)
    assert feed is not None
    assert _summary(feed) == _summary([c for c in made if c is not None])
    assert first.feed_epoch == second.feed_epoch
    cursor, states = await first.snapshot()
    assert cursor == feed[-1].cursor
    assert [(s.session_id, s.revision) for s in states] == [("a", 2), ("b", 0), (GLOBAL_SESSION_ID, 0)]


async def test_the_global_list_of_the_01_layout_is_carried_over(redis_server: RedisServer) -> None:
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        change = json.dumps([7, "todos_replaced", "", [["a", "kept", "completed", "high"]]])
        await admin.hset("sessiontodo:{s:}:state", mapping={"revision": 7, "change": change, "incarnation": 0})
    store = RedisStore(redis_server.url)
    await store.open()
    try:
        state = await store.get(GLOBAL_SESSION_ID)
        assert state is not None
        assert state.revision == 8
        assert [(t.id, t.content, t.status.value) for t in state.todos] == [("a", "kept", "completed")]
    finally:
        await store.close()
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        assert await admin.exists("sessiontodo:{s:}:state") == 0


async def test_stores_with_different_prefixes_share_one_redis_without_seeing_each_other(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    blue = await open_replica(f"{redis_server.url}?prefix=blue:")
    green = await open_replica(f"{redis_server.url}?prefix=green:")
    await _create(blue, "s")
    await _replace(blue, "s", "blue only")
    assert await green.get("s") is None
    assert await green.list_sessions("", 10, EVERY_SESSION) == []
    async with redis.asyncio.Redis(port=redis_server.port, decode_responses=True) as admin:
        keys = [str(key) for key in await admin.keys("*")]
    assert keys
    assert all(key.startswith(("blue:", "green:")) for key in keys)


async def test_every_operation_keeps_to_one_cluster_slot(tmp_path: Path) -> None:
    """On a (one-node) Redis Cluster a script touching two slots fails with CROSSSLOT."""
    with RedisServer(tmp_path / "cluster", cluster_node=True) as node:
        store = RedisStore(node.url, 4)
        await store.open()
        try:
            await _create(store, "parent")
            await _create(store, "child", "parent")
            add = AddTodo(Todo("t", "x"), None, True)
            await store.write("child", add, expected_revision=None, request_id="r", origin="", now=1.0, limits=LIMITS)
            assert await store.changes_after("child", 0) is not None
            assert [s.session_id for s in await store.list_sessions("", 10, EVERY_SESSION)] == ["child", "parent"]
            assert await store.feed_after(0) is not None
            assert (await store.snapshot())[0] == 3
            assert await store.expired(1.0) == []
            assert len(await store.remove_session("parent", RemovalReason.REMOVED)) == 2
            await _create(store, "again")
            assert len(await store.remove_all_sessions()) == 1
        finally:
            await store.close()


async def test_while_redis_is_down_writes_fail_as_unavailable_without_its_address_and_change_nothing(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    store = await open_replica()
    await _create(store, "s")
    before = await _replace(store, "s", "kept")
    redis_server.kill()
    with pytest.raises(Unavailable) as refused:
        await _replace(store, "s", "lost")
    assert str(redis_server.port) not in str(refused.value)
    assert "127.0.0.1" not in str(refused.value)
    with pytest.raises(Unavailable):
        await store.get("s")
    redis_server.start()
    state = await store.get("s")
    assert state is not None
    assert state.revision == before.revision
    assert state.todos == before.todos


async def test_the_store_reports_losing_redis_and_getting_it_back(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    store = await open_replica()
    reports: list[bool] = []

    async def report(available: bool) -> None:
        reports.append(available)

    store.on_availability_change(report)
    redis_server.kill()
    await eventually(lambda: reports == [False])
    redis_server.start()
    await eventually(lambda: reports == [False, True], timeout=10)


async def test_a_redis_error_naming_an_internal_address_reaches_clients_as_unavailable_without_it(
    open_replica: OpenReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_replica()
    await _create(store, "s")

    async def moved(*args: Any) -> Any:
        raise redis.exceptions.ResponseError("MOVED 3999 10.1.2.3:6380")

    monkeypatch.setattr(store._scripts, "write", moved)
    with pytest.raises(Unavailable) as refused:
        await _replace(store, "s", "x")
    assert "10.1.2.3" not in str(refused.value)

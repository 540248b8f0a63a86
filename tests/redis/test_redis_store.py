"""The Redis store as replicas see it: two stores on one Redis stand for two replicas (no gRPC)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import redis.asyncio
from redis_support import RedisServer

from sessiontodo_server.app import open_store
from sessiontodo_server.errors import LimitExceeded, Unavailable
from sessiontodo_server.stores.base import AddResult
from sessiontodo_server.stores.redis import RedisStore, parse_redis_url
from sessiontodo_server.todos import Change, ChangeKind, Todo
from support import eventually

OpenReplica = Callable[..., Awaitable[RedisStore]]


def _listen(store: RedisStore) -> list[Change]:
    """Every change ``store`` reports from other replicas, in the order reported."""
    heard: list[Change] = []
    store.on_external_change(heard.append)
    return heard


async def _replace(store: RedisStore, session_id: str, *contents: str) -> Change:
    state = await store.get(session_id)
    assert state is not None
    todos = tuple(Todo(f"t{n}", content) for n, content in enumerate(contents))
    change = Change(session_id, ChangeKind.TODOS_REPLACED, state.revision + 1, todos)
    assert await store.commit(change)
    return change


def _summary(changes: list[Change]) -> list[tuple[ChangeKind, int, tuple[str, ...]]]:
    return [(c.kind, c.revision, tuple(t.content for t in c.todos)) for c in changes]


def _silenced(store: RedisStore) -> RedisStore:
    """A replica whose notices never arrive: what a lost pub/sub message looks like to the others."""
    store._keys.channel = "nobody-listens"
    return store


async def test_a_replica_hears_every_change_another_replica_commits_in_order(open_replica: OpenReplica) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    written = [await _replace(writer, "s", f"v{n}") for n in range(5)]
    await eventually(lambda: len(heard) == len(written))
    assert _summary(heard) == _summary(written)


async def test_a_replica_does_not_hear_its_own_changes(open_replica: OpenReplica) -> None:
    writer, other = await open_replica(), await open_replica()
    heard_by_writer = _listen(writer)
    await writer.create_session("s", "", 10)
    await _replace(writer, "s", "mine")
    theirs = await _replace(other, "s", "theirs")  # its notice reaches the writer after the writer's own
    await eventually(lambda: len(heard_by_writer) >= 1)
    assert _summary(heard_by_writer) == _summary([theirs])


async def test_a_change_too_large_for_its_notice_is_read_back_from_redis(open_replica: OpenReplica) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    large = await _replace(writer, "s", *(f"{n}: " + "x" * 4000 for n in range(40)))  # ~160 KB of text
    await eventually(lambda: len(heard) == 1)
    assert _summary(heard) == _summary([large])


async def test_a_lost_notice_is_bridged_from_the_log_by_the_next_one(open_replica: OpenReplica) -> None:
    writer, reader = await open_replica(), await open_replica()
    muted = _silenced(await open_replica())
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    lost = await _replace(muted, "s", "lost")
    announced = await _replace(writer, "s", "announced")
    await eventually(lambda: len(heard) == 2)
    assert _summary(heard) == _summary([lost, announced])


async def test_a_gap_the_log_cannot_bridge_is_reported_as_a_reset_of_the_current_list(
    open_replica: OpenReplica,
) -> None:
    writer, reader = await open_replica(history_limit=2), await open_replica(history_limit=2)
    muted = _silenced(await open_replica(history_limit=2))
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    for n in range(3):
        await _replace(muted, "s", f"lost {n}")
    last = await _replace(writer, "s", "announced")
    await eventually(lambda: len(heard) == 1)
    assert _summary(heard) == [(ChangeKind.RESET, last.revision, ("announced",))]


async def test_a_replica_writing_right_after_another_first_reports_the_change_it_had_not_heard(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    muted = _silenced(await open_replica())
    heard = _listen(second)
    await first.create_session("s", "", 10)
    await second.get("s")
    unheard = await _replace(muted, "s", "from elsewhere")
    await _replace(second, "s", "mine")
    assert _summary(heard) == _summary([unheard])


async def test_after_its_notices_connection_drops_a_replica_catches_up_on_what_it_missed(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    writer, reader = await open_replica(), await open_replica()
    muted = _silenced(await open_replica())
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    missed = await _replace(muted, "s", "while away")
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        await admin.client_kill_filter(_type="pubsub")
    await eventually(lambda: len(heard) == 1)
    assert _summary(heard) == _summary([missed])


async def test_after_a_reconnect_a_replica_resets_sessions_whose_missed_changes_left_the_log(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    writer, reader = await open_replica(history_limit=2), await open_replica(history_limit=2)
    muted = _silenced(await open_replica(history_limit=2))
    heard = _listen(reader)
    await writer.create_session("s", "", 10)
    await reader.get("s")
    for n in range(3):
        last = await _replace(muted, "s", f"while away {n}")
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        await admin.client_kill_filter(_type="pubsub")
    await eventually(lambda: len(heard) == 1)
    assert _summary(heard) == [(ChangeKind.RESET, last.revision, ("while away 2",))]


async def test_a_removal_cut_short_is_finished_by_the_next_replica_that_starts(open_replica: OpenReplica) -> None:
    """The index step alone, as if Redis went away before the session's data was deleted."""
    first = await open_replica()
    await first.create_session("s", "", 10)
    await first._remove_from_index(first._keys.removal(), ["s"])
    assert await first.get("s") is not None
    await open_replica()
    assert await first.get("s") is None


async def test_a_replica_hears_a_removal_made_by_another_replica(open_replica: OpenReplica) -> None:
    remover, other = await open_replica(), await open_replica()
    heard = _listen(other)
    await remover.create_session("parent", "", 10)
    await remover.create_session("child", "parent", 10)
    await other.get("child")
    removed = await remover.remove_session("parent")
    await eventually(lambda: {c.session_id for c in heard} == {"parent", "child"})
    assert all(c.kind is ChangeKind.SESSION_REMOVED for c in heard)
    assert {c.session_id: c.revision for c in heard} == {c.session_id: c.revision for c in removed}


async def test_a_session_removed_on_one_replica_and_recreated_on_another_starts_above_its_removal(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    await first.create_session("s", "", 10)
    await _replace(first, "s", "old")
    (removal,) = await first.remove_session("s")
    fresh, created = await second.create_session("s", "", 10)
    assert created and fresh.revision > removal.revision and fresh.todos == ()


async def test_concurrent_commits_at_one_revision_through_several_replicas_have_exactly_one_winner(
    open_replica: OpenReplica,
) -> None:
    replicas = [await open_replica() for _ in range(3)]
    state, _ = await replicas[0].create_session("s", "", 10)
    for round_ in range(10):
        contenders = [
            Change("s", ChangeKind.TODOS_REPLACED, state.revision + 1, (Todo("t", f"round {round_} by {n}"),))
            for n in range(len(replicas))
        ]
        outcomes = await asyncio.gather(*(r.commit(c) for r, c in zip(replicas, contenders, strict=True)))
        assert outcomes.count(True) == 1
        winner = contenders[outcomes.index(True)]
        latest = await replicas[1].get("s")
        assert latest is not None and latest.todos == winner.todos and latest.revision == winner.revision
        state = latest


async def test_a_request_id_recorded_through_one_replica_is_found_through_another(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    state, _ = await first.create_session("s", "", 10)
    todo = Todo("t", "once")
    result = AddResult(todo, 0, state.revision + 1)
    await first.commit(Change("s", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t"), ("req", result))
    assert await second.find_request("s", "req") == result


async def test_the_session_limit_counts_sessions_created_through_every_replica(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    await first.create_session("a", "", 2)
    await second.create_session("b", "", 2)
    with pytest.raises(LimitExceeded):
        await first.create_session("c", "", 2)


async def test_stores_with_different_prefixes_share_one_redis_without_seeing_each_other(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    blue = await open_replica(f"{redis_server.url}?prefix=blue:")
    green = await open_replica(f"{redis_server.url}?prefix=green:")
    await blue.create_session("s", "", 10)
    await _replace(blue, "s", "blue only")
    assert await green.get("s") is None
    assert await green.list_sessions("", 10) == []
    async with redis.asyncio.Redis(port=redis_server.port, decode_responses=True) as admin:
        keys = [str(key) for key in await admin.keys("*")]
    assert keys and all(key.startswith(("blue:", "green:")) for key in keys)


async def test_every_operation_keeps_to_one_cluster_slot_per_script(tmp_path: Path) -> None:
    """On a (one-node) Redis Cluster a script touching two slots fails with CROSSSLOT."""
    with RedisServer(tmp_path / "cluster", cluster_node=True) as node:
        store = RedisStore(node.url, 4)
        await store.open()
        try:
            await store.create_session("parent", "", 10)
            await store.create_session("child", "parent", 10)
            state = await store.get("child")
            assert state is not None
            todo = Todo("t", "x")
            change = Change("child", ChangeKind.TODO_ADDED, state.revision + 1, (todo,), "t")
            assert await store.commit(change, ("req", AddResult(todo, 0, change.revision)))
            assert await store.changes_after("child", state.revision) is not None
            assert await store.find_request("child", "req") is not None
            assert [s.session_id for s in await store.list_sessions("", 10)] == ["child", "parent"]
            assert len(await store.remove_session("parent")) == 2
            await store.create_session("again", "", 10)
            assert len(await store.remove_all_sessions()) == 1
        finally:
            await store.close()


async def test_while_redis_is_down_commits_fail_as_unavailable_and_change_nothing(
    open_replica: OpenReplica, redis_server: RedisServer
) -> None:
    store = await open_replica()
    await store.create_session("s", "", 10)
    before = await _replace(store, "s", "kept")
    redis_server.kill()
    with pytest.raises(Unavailable):
        await store.commit(Change("s", ChangeKind.TODOS_REPLACED, before.revision + 1, (Todo("t", "lost"),)))
    with pytest.raises(Unavailable):
        await store.get("s")
    redis_server.start()
    state = await store.get("s")
    assert state is not None and state.revision == before.revision and state.todos == before.todos


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


def test_a_redis_url_carries_the_key_prefix_and_redis_py_options() -> None:
    location = parse_redis_url("rediss://:secret@cache:6380/2?prefix=team-a:&socket_timeout=1")
    assert location.prefix == "team-a:"
    assert location.url == "rediss://:secret@cache:6380/2?socket_timeout=1"
    assert parse_redis_url("redis://cache:6379/0").prefix == "sessiontodo:"


def test_a_prefix_with_braces_is_refused_because_braces_choose_cluster_slots() -> None:
    with pytest.raises(ValueError, match="braces"):
        parse_redis_url("redis://cache:6379/0?prefix={team}:")


def test_the_server_opens_a_redis_store_for_redis_and_rediss_urls() -> None:
    assert isinstance(open_store("redis://127.0.0.1:1/0", 8), RedisStore)
    assert isinstance(open_store("rediss://127.0.0.1:1/0", 8), RedisStore)

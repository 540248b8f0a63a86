"""Several server processes on one Redis behave as one service: the issue's cross-replica criteria."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest

from sessiontodo_client import (
    Aborted,
    ChangeKind,
    FeedEvent,
    ResourceExhausted,
    Todo,
    TodoClient,
    WatchEvent,
)
from tests.support import ServerProcess

StartReplicas = Callable[..., list[ServerProcess]]
Connect = Callable[[ServerProcess], TodoClient]
TIMEOUT = 10
GLOBAL = "sessiontodo:global"


async def _next(events: AsyncIterator[WatchEvent]) -> WatchEvent:
    return await asyncio.wait_for(anext(events), TIMEOUT)


def _summary(events: list[WatchEvent]) -> list[tuple[ChangeKind, int, list[str]]]:
    return [(e.kind, e.revision, [t.content for t in e.todos]) for e in events]


async def test_a_watcher_on_one_replica_sees_every_write_made_on_another_in_order(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    watching, writing = [connect(replica) for replica in start_replicas(2)]
    await writing.create_session("s")
    events = watching.watch("s")
    assert (await _next(events)).kind is ChangeKind.SNAPSHOT
    written = [await writing.add_todo("s", Todo(content=f"todo {n}")) for n in range(20)]
    seen = [await _next(events) for _ in written]
    await events.aclose()
    assert [e.kind for e in seen] == [ChangeKind.TODO_ADDED] * len(written)
    assert [e.revision for e in seen] == [w.revision for w in written]
    assert [e.todo_id for e in seen] == [w.todo.id for w in written]
    assert seen[-1].todos == (await writing.get_todos("s")).todos


async def test_watchers_on_every_replica_see_writes_rotating_through_the_replicas_identically(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    clients = [connect(replica) for replica in start_replicas(3)]
    await clients[0].create_session("s")
    feeds = [client.watch("s") for client in clients]
    for feed in feeds:
        assert (await _next(feed)).kind is ChangeKind.SNAPSHOT
    written = [await clients[n % 3].add_todo("s", Todo(content=f"todo {n}")) for n in range(30)]
    seen = [[await _next(feed) for _ in written] for feed in feeds]
    for feed in feeds:
        await feed.aclose()
    assert [e.revision for e in seen[0]] == [w.revision for w in written]
    assert _summary(seen[1]) == _summary(seen[0])
    assert _summary(seen[2]) == _summary(seen[0])


async def test_concurrent_conditional_writes_through_different_replicas_have_exactly_one_winner(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    clients = [connect(replica) for replica in start_replicas(3)]
    await clients[0].create_session("s")
    for round_ in range(5):
        revision = (await clients[0].get_todos("s")).revision
        attempts = [
            client.replace_todos("s", [Todo(content=f"round {round_} via {n}")], expected_revision=revision)
            for n, client in enumerate(clients)
        ]
        outcomes = await asyncio.gather(*attempts, return_exceptions=True)
        winners = [outcome for outcome in outcomes if not isinstance(outcome, BaseException)]
        assert len(winners) == 1
        assert all(isinstance(outcome, Aborted) for outcome in outcomes if outcome is not winners[0])
        assert await clients[2].get_todos("s") == winners[0]


async def test_removing_a_session_on_one_replica_ends_its_and_its_childrens_watchers_on_the_others(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    remover, *watchers = [connect(replica) for replica in start_replicas(3)]
    await remover.create_session("parent")
    await remover.create_session("child", parent_id="parent")
    feeds = [client.watch(session) for client in watchers for session in ("parent", "child")]
    for feed in feeds:
        assert (await _next(feed)).kind is ChangeKind.SNAPSHOT
    assert sorted(await remover.remove_session("parent")) == ["child", "parent"]
    for feed in feeds:
        assert (await _next(feed)).kind is ChangeKind.SESSION_REMOVED
        with pytest.raises(StopAsyncIteration):
            await _next(feed)


async def test_removing_all_sessions_on_one_replica_ends_watchers_everywhere_and_keeps_the_global_list(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    remover, watcher, reader = [connect(replica) for replica in start_replicas(3)]
    await reader.add_todo(GLOBAL, Todo(content="global"))
    for session in ("a", "b"):
        await reader.create_session(session)
    feed = watcher.watch("b")
    assert (await _next(feed)).kind is ChangeKind.SNAPSHOT
    assert await remover.remove_all_sessions() == 2
    assert (await _next(feed)).kind is ChangeKind.SESSION_REMOVED
    assert await reader.list_sessions() == []
    assert [t.content for t in (await reader.get_todos(GLOBAL)).todos] == ["global"]


async def test_the_session_limit_holds_across_replicas(start_replicas: StartReplicas, connect: Connect) -> None:
    first, second = [connect(replica) for replica in start_replicas(2, "--max-sessions", "2")]
    await first.create_session("a")
    await second.create_session("b")
    with pytest.raises(ResourceExhausted):
        await first.create_session("c")
    await second.remove_session("a")
    await first.create_session("c")


async def test_an_add_retried_through_another_replica_with_the_same_request_id_adds_nothing(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    first, second = [connect(replica) for replica in start_replicas(2)]
    await first.create_session("s")
    original = await first.add_todo("s", Todo(content="once"), request_id="add-1")
    retried = await second.add_todo("s", Todo(content="once"), request_id="add-1")
    assert retried == original
    assert [t.content for t in (await second.get_todos("s")).todos] == ["once"]


async def _next_event(events: AsyncIterator[FeedEvent]) -> FeedEvent:
    return await asyncio.wait_for(anext(events), TIMEOUT)


async def test_a_feed_on_one_replica_carries_every_replicas_writes_in_commit_order_and_resumes_on_another(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    first, second, third = [connect(replica) for replica in start_replicas(3)]
    feed = third.watch_changes(include_snapshot=True)
    assert (await _next_event(feed)).session_id == GLOBAL  # the snapshot: only the global list
    await first.create_session("a")
    await second.create_session("b", parent_id="a")
    for n in range(10):
        await [first, second][n % 2].add_todo(["a", "b"][n % 3 % 2], Todo(content=f"todo {n}"))
    await first.remove_session("a")
    seen = [await _next_event(feed) for _ in range(2 + 10 + 2)]
    await feed.aclose()
    kinds = [e.kind for e in seen]
    assert kinds[:2] == [ChangeKind.SESSION_CREATED] * 2
    assert kinds[-2:] == [ChangeKind.SESSION_REMOVED] * 2
    for session in ("a", "b"):
        revisions = [e.revision for e in seen if e.session_id == session]
        assert revisions == list(range(revisions[0], revisions[0] + len(revisions)))  # per session +1
    resumed = first.watch_changes(after_cursor=seen[5].cursor)
    again = [await _next_event(resumed) for _ in range(len(seen) - 6)]
    await resumed.aclose()
    assert [(e.session_id, e.kind, e.revision, e.cursor) for e in again] == [
        (e.session_id, e.kind, e.revision, e.cursor) for e in seen[6:]
    ]


async def test_an_idle_session_expires_once_and_every_replica_says_why(
    start_replicas: StartReplicas, connect: Connect
) -> None:
    creator, watcher = [connect(replica) for replica in start_replicas(2, "--expiry-interval", "0.2")]
    feed = watcher.watch_changes(include_snapshot=True)
    assert (await _next_event(feed)).session_id == GLOBAL  # the feed is open
    await creator.create_session("idle", idle_ttl=1)
    created = await _next_event(feed)
    removed = await _next_event(feed)
    await feed.aclose()
    assert (created.kind, removed.kind) == (ChangeKind.SESSION_CREATED, ChangeKind.SESSION_REMOVED)
    assert removed.session_id == "idle"
    assert removed.removal_reason is not None
    assert removed.removal_reason.name == "EXPIRED"
    assert await creator.list_sessions() == []

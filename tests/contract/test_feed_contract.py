"""The WatchChanges contract, message by message, against a real grpc.aio server on every store
(``store_url``, tests/contract/conftest.py); the checks that start servers of their own run once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import ChangeKind, FeedEvent, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.values import TodoDraft
from tests.support import ServerProcess

Kind = pb.ChangeKind
GLOBAL = "sessiontodo:global"


@pytest.fixture
async def server(start: Callable[..., Any], store_url: str) -> RunningServer:
    running: RunningServer = await start(store=store_url, progress_interval=0.5, watch_buffer=8, feed_history=64)
    return running


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.TodoServiceStub(channel)


async def read(call: Any, timeout: float = 10.0) -> pb.WatchChangesResponse:
    message = await asyncio.wait_for(call.read(), timeout)
    assert message is not grpc.aio.EOF, "the stream ended"
    return message


def position(cursor: str) -> int:
    """The feed position a cursor (``epoch.position``) names."""
    return int(cursor.rsplit(".", 1)[1])


async def read_changes(call: Any, count: int) -> list[pb.WatchChangesResponse]:
    """The next ``count`` messages that are not PROGRESS."""
    messages: list[pb.WatchChangesResponse] = []
    while len(messages) < count:
        message = await read(call)
        if message.kind != Kind.CHANGE_KIND_PROGRESS:
            messages.append(message)
    return messages


async def open_feed(stub: pb_grpc.TodoServiceStub, **request: Any) -> tuple[Any, list[pb.WatchChangesResponse]]:
    """A feed with a snapshot, read up to its bookmark: (call, snapshot messages + bookmark)."""
    call = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True, **request))
    messages = [await read(call)]
    while messages[-1].kind != Kind.CHANGE_KIND_PROGRESS:
        messages.append(await read(call))
    return call, messages


async def churn(stub: pb_grpc.TodoServiceStub, session_id: str) -> None:
    """A session's whole life, written by a client that is not the feed's."""
    await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id, labels={"dir": "/w"}, origin="other"))
    await stub.AddTodo(pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(id="a", content="a"), origin="other"))
    await stub.UpdateTodo(
        pb.UpdateTodoRequest(session_id=session_id, todo_id="a", status=pb.TODO_STATUS_COMPLETED, origin="other")
    )
    await stub.UpdateSession(pb.UpdateSessionRequest(session_id=session_id, labels={"title": "T"}))
    todos = [pb.Todo(id="a", content="a again"), pb.Todo(content="b")]
    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=todos))
    await stub.RemoveTodo(pb.RemoveTodoRequest(session_id=session_id, todo_id="a"))
    await stub.RemoveSession(pb.RemoveSessionRequest(session_id=session_id, origin="other"))


LIFE = [
    Kind.CHANGE_KIND_SESSION_CREATED,
    Kind.CHANGE_KIND_TODO_ADDED,
    Kind.CHANGE_KIND_TODO_UPDATED,
    Kind.CHANGE_KIND_SESSION_UPDATED,
    Kind.CHANGE_KIND_TODOS_REPLACED,
    Kind.CHANGE_KIND_TODO_REMOVED,
    Kind.CHANGE_KIND_SESSION_REMOVED,
]


async def test_the_snapshot_holds_every_session_and_ends_with_a_bookmark(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", labels={"title": "A"}))
    await stub.AddTodo(pb.AddTodoRequest(session_id="a", todo=pb.Todo(content="x")))

    call, messages = await open_feed(stub)

    *snapshot, bookmark = messages
    assert [(m.kind, m.session_id) for m in snapshot] == [
        (Kind.CHANGE_KIND_SNAPSHOT, "a"),
        (Kind.CHANGE_KIND_SNAPSHOT, GLOBAL),
    ]
    assert [t.content for t in snapshot[0].todos] == ["x"]
    assert snapshot[0].session.labels == {"title": "A"}
    assert all(not m.cursor for m in snapshot)
    assert bookmark.cursor
    call.cancel()


async def test_sessions_created_and_written_by_others_appear_with_every_change_in_order(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    call, _ = await open_feed(stub)

    await asyncio.gather(churn(stub, "one"), churn(stub, "two"))

    messages = await read_changes(call, 2 * len(LIFE))
    for session_id in ("one", "two"):
        own = [m for m in messages if m.session_id == session_id]
        assert [m.kind for m in own] == LIFE
        assert [m.revision for m in own] == list(range(len(LIFE)))  # a fresh id starts at 0, then +1
        assert [m.origin for m in own[:3]] == ["other"] * 3
        assert own[-1].origin == "other"
        assert own[-1].removal_reason == pb.REMOVAL_REASON_REMOVED
        assert own[-2].session.labels == {"dir": "/w", "title": "T"}
    cursors = [m.cursor for m in messages]
    assert len(set(cursors)) == len(cursors)
    call.cancel()


async def test_resuming_after_any_cursor_gives_exactly_the_later_messages(stub: pb_grpc.TodoServiceStub) -> None:
    call, _ = await open_feed(stub)
    await churn(stub, "s")
    messages = await read_changes(call, len(LIFE))
    call.cancel()

    for position, message in enumerate(list(messages)):
        resumed = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=message.cursor))
        expected = messages[position + 1 :]
        later = await read_changes(resumed, len(expected))
        assert [m.cursor for m in later] == [m.cursor for m in expected]
        # Nothing else was pending: the next message is a change made now.
        await stub.CreateSession(pb.CreateSessionRequest(session_id=f"marker{position}"))
        (marker,) = await read_changes(resumed, 1)
        assert marker.session_id == f"marker{position}"
        messages.append(marker)
        resumed.cancel()


async def test_a_cursor_that_cannot_be_bridged_gets_a_reset_and_a_fresh_snapshot(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    call, messages = await open_feed(stub)
    call.cancel()
    first_cursor = messages[-1].cursor
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    for n in range(70):  # more than the feed history of 64
        await stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=pb.Todo(content=str(n))))

    for stale in (first_cursor, "another-store.5", first_cursor.split(".")[0] + ".999999"):
        resumed = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=stale))
        reset = await read(resumed)
        assert (reset.kind, reset.session_id, reset.cursor) == (Kind.CHANGE_KIND_RESET, "", "")
        snapshot = [await read(resumed), await read(resumed)]
        assert [(m.kind, m.session_id) for m in snapshot] == [
            (Kind.CHANGE_KIND_SNAPSHOT, "s"),
            (Kind.CHANGE_KIND_SNAPSHOT, GLOBAL),
        ]
        assert len(snapshot[0].todos) == 70
        bookmark = await read(resumed)
        assert bookmark.kind == Kind.CHANGE_KIND_PROGRESS
        assert bookmark.cursor
        resumed.cancel()


async def test_a_cursor_of_another_store_is_reset_even_at_a_position_within_this_feeds_history(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    call, _ = await open_feed(stub)
    await churn(stub, "s")
    messages = await read_changes(call, len(LIFE))
    call.cancel()
    first, last = position(messages[0].cursor), position(messages[-1].cursor)

    for inside in (first, last):  # one this feed could bridge, one it is at
        resumed = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=f"another-store.{inside}"))
        reset = await read(resumed)
        assert (reset.kind, reset.session_id, reset.cursor) == (Kind.CHANGE_KIND_RESET, "", "")
        snapshot = await read(resumed)
        assert (snapshot.kind, snapshot.session_id) == (Kind.CHANGE_KIND_SNAPSHOT, GLOBAL)
        resumed.cancel()


# Writes that never yield to the feed: only the in-process stores make them (the hub's lag handling
# is the same for every store).
@pytest.mark.parametrize("store_url", ["memory", "sqlite"], indirect=True)
async def test_a_lagging_feed_is_reset_with_a_snapshot_and_never_skips_silently(
    server: RunningServer, stub: pb_grpc.TodoServiceStub
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    call, _ = await open_feed(stub)
    # The feed's buffer holds 8; the writes happen before it reads again (made at once: with a
    # journal each write waits for its group commit, where the feed could otherwise catch up).
    await asyncio.gather(*(server.book.add("s", TodoDraft(content=f"burst {n}")) for n in range(50)))

    kinds = []
    while True:
        message = await read(call)
        kinds.append(message.kind)
        if message.kind == Kind.CHANGE_KIND_SNAPSHOT and message.session_id == "s":
            assert len(message.todos) == 50
            break
    assert Kind.CHANGE_KIND_RESET in kinds
    call.cancel()


async def test_filters_select_sessions_by_id_parent_and_labels(stub: pb_grpc.TodoServiceStub) -> None:
    filters = {
        "ids": pb.SessionFilter(session_ids=["b"]),
        "parent": pb.SessionFilter(parent_id="p"),
        "labels": pb.SessionFilter(labels={"dir": "/a"}),
    }
    await stub.CreateSession(pb.CreateSessionRequest(session_id="p"))
    feeds = {name: (await open_feed(stub, filter=only))[0] for name, only in filters.items()}

    await stub.CreateSession(pb.CreateSessionRequest(session_id="a", labels={"dir": "/a"}))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="b", parent_id="p"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="c"))
    await stub.UpdateSession(pb.UpdateSessionRequest(session_id="c", labels={"dir": "/a"}))

    assert [m.session_id for m in await read_changes(feeds["ids"], 1)] == ["b"]
    assert [m.session_id for m in await read_changes(feeds["parent"], 1)] == ["b"]
    assert [(m.session_id, m.kind) for m in await read_changes(feeds["labels"], 2)] == [
        ("a", Kind.CHANGE_KIND_SESSION_CREATED),
        ("c", Kind.CHANGE_KIND_SESSION_UPDATED),  # matched by its labels after the change
    ]
    for call in feeds.values():
        call.cancel()


async def test_a_quiet_feed_sends_progress_with_a_resumable_cursor(stub: pb_grpc.TodoServiceStub) -> None:
    witness, _ = await open_feed(stub)
    call = stub.WatchChanges(pb.WatchChangesRequest(filter=pb.SessionFilter(session_ids=["quiet"])))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="noise"))
    (noise,) = await read_changes(witness, 1)
    witness.cancel()
    # A write slower than the progress interval (etcd on a busy disk) leaves a first bookmark before the
    # noise, which a resume would rightly repeat: the one that matters is the first at or after it.
    progress = await read(call)
    while progress.kind == Kind.CHANGE_KIND_PROGRESS and position(progress.cursor) < position(noise.cursor):
        progress = await read(call)
    assert progress.kind == Kind.CHANGE_KIND_PROGRESS
    assert progress.cursor
    call.cancel()

    resumed = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=progress.cursor))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="later"))
    (message,) = await read_changes(resumed, 1)
    assert message.session_id == "later"  # the noise before the bookmark is not repeated
    resumed.cancel()


@pytest.mark.parametrize("cursor", ["not a cursor", "1.\u00b2", "1.\u0663", "1.-1", "1.", ".5"])
async def test_a_malformed_cursor_is_invalid(stub: pb_grpc.TodoServiceStub, cursor: str) -> None:
    call = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=cursor))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_feeds_count_against_the_watcher_limit(start: Callable[..., Any]) -> None:
    server = await start(max_watchers=1)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        first, _ = await open_feed(stub)
        refused = stub.WatchChanges(pb.WatchChangesRequest())
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await refused.read()
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        first.cancel()


async def test_shutdown_ends_the_feed_with_unavailable(server: RunningServer, stub: pb_grpc.TodoServiceStub) -> None:
    call, _ = await open_feed(stub)
    await server.stop()

    async def read_to_the_end() -> None:
        while True:
            await read(call)

    with pytest.raises(grpc.aio.AioRpcError) as ended:
        await read_to_the_end()
    assert ended.value.code() == grpc.StatusCode.UNAVAILABLE


@pytest.mark.process
async def test_the_typed_client_resumes_its_feed_across_a_server_restart(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    events: list[FeedEvent] = []
    with ServerProcess("--store", store) as first:
        async with TodoClient.connect(first.address) as client:
            await client.create_session("s")
            feed = client.watch_changes(include_snapshot=True, include_progress=True)
            while (event := await anext(feed)).kind is not ChangeKind.PROGRESS:
                events.append(event)
            reader = asyncio.create_task(anext(feed))
            first.stop()
            with ServerProcess("--store", store, port=first.port) as second:
                async with TodoClient.connect(second.address) as writer:
                    await writer.add_todo("s", Todo(content="after the restart"))
                while (event := await reader).kind is ChangeKind.PROGRESS:
                    reader = asyncio.create_task(anext(feed))
                await feed.aclose()
    assert [e.session_id for e in events] == ["s", GLOBAL]
    # Nothing changed while the server was down, so the cursor resumed without a reset.
    assert (event.kind, event.session_id, event.revision) == (ChangeKind.TODO_ADDED, "s", 1)


async def test_a_session_whose_labels_stop_matching_leaves_a_label_filtered_feed_and_can_come_back(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s", labels={"team": "a"}))
    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=[pb.Todo(id="t", content="x")]))
    feed, snapshot = await open_feed(stub, filter=pb.SessionFilter(labels={"team": "a"}))
    await stub.UpdateSession(pb.UpdateSessionRequest(session_id="s", labels={"team": "b"}))
    await stub.UpdateSession(pb.UpdateSessionRequest(session_id="s", labels={"other": "label"}))  # out of view
    await stub.UpdateSession(pb.UpdateSessionRequest(session_id="s", labels={"team": "a"}))
    left, _, back = await read_changes(feed, 3)
    feed.cancel()

    resumed = stub.WatchChanges(
        pb.WatchChangesRequest(after_cursor=snapshot[-1].cursor, filter=pb.SessionFilter(labels={"team": "a"}))
    )
    replayed = await read_changes(resumed, 1)
    resumed.cancel()
    assert [m.session_id for m in snapshot[:-1]] == ["s"]
    assert (left.kind, left.session_id, len(left.todos)) == (Kind.CHANGE_KIND_SESSION_LEFT_VIEW, "s", 0)
    assert left.cursor
    assert left.session.labels["team"] == "b"
    assert (back.kind, [t.content for t in back.todos]) == (Kind.CHANGE_KIND_SESSION_UPDATED, ["x"])
    assert replayed[0].kind == Kind.CHANGE_KIND_SESSION_LEFT_VIEW


async def test_a_fresh_feed_after_a_sqlite_restart_bookmarks_a_cursor_that_resumes_without_a_reset(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    settings = {"store": f"sqlite:///{tmp_path / 'todos.db'}", "progress_interval": 0.2}
    first: RunningServer = await start(**settings)
    async with grpc.aio.insecure_channel(first.address) as channel:
        await pb_grpc.TodoServiceStub(channel).CreateSession(pb.CreateSessionRequest(session_id="before"))
    await first.stop()
    second: RunningServer = await start(**settings)
    async with grpc.aio.insecure_channel(second.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        fresh = stub.WatchChanges(pb.WatchChangesRequest())  # from now: nothing but bookmarks
        bookmark = await read(fresh)
        fresh.cancel()
        resumed = stub.WatchChanges(pb.WatchChangesRequest(after_cursor=bookmark.cursor))
        first_resumed = await read(resumed)
        resumed.cancel()
    assert bookmark.kind == Kind.CHANGE_KIND_PROGRESS
    assert not bookmark.cursor.endswith(".0")
    assert first_resumed.kind == Kind.CHANGE_KIND_PROGRESS  # not a RESET and a snapshot

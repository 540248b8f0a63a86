"""The WatchTodos contract, message by message, against a real grpc.aio server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.values import TodoDraft
from tests.support import eventually

Kind = pb.ChangeKind

GLOBAL = "sessiontodo:global"
"""The reserved id of RFC-0034's sessionless global list."""


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.TodoServiceStub(channel)


async def read(call: Any, timeout: float = 10.0) -> pb.WatchTodosResponse:
    message = await asyncio.wait_for(call.read(), timeout)
    assert message is not grpc.aio.EOF, "the stream ended"
    return message


async def assert_next_is_a_fresh_write(stub: pb_grpc.TodoServiceStub, call: Any, session_id: str) -> None:
    """Nothing else is pending on ``call``: the next message is a write made now."""
    written = await add(stub, session_id, "marker")
    message = await read(call)
    assert (message.kind, message.revision) == (Kind.CHANGE_KIND_TODO_ADDED, written.revision)


async def add(stub: pb_grpc.TodoServiceStub, session_id: str, content: str) -> pb.AddTodoResponse:
    return await stub.AddTodo(pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(content=content)))


async def test_the_first_message_is_a_snapshot_of_the_list(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    written = await add(stub, "s", "first")
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
    snapshot = await read(call)
    assert snapshot.kind == Kind.CHANGE_KIND_SNAPSHOT
    assert snapshot.revision == written.revision
    assert [t.content for t in snapshot.todos] == ["first"]
    assert snapshot.session_id == "s"
    call.cancel()


async def test_every_change_arrives_once_in_order_with_its_kind_and_the_full_list(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
    start = (await read(call)).revision

    added = await add(stub, "s", "a")
    await stub.UpdateTodo(
        pb.UpdateTodoRequest(session_id="s", todo_id=added.todo.id, status=pb.TODO_STATUS_IN_PROGRESS)
    )
    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=[pb.Todo(id="x", content="x")]))
    await stub.RemoveTodo(pb.RemoveTodoRequest(session_id="s", todo_id="x"))

    messages = [await read(call) for _ in range(4)]
    assert [m.kind for m in messages] == [
        Kind.CHANGE_KIND_TODO_ADDED,
        Kind.CHANGE_KIND_TODO_UPDATED,
        Kind.CHANGE_KIND_TODOS_REPLACED,
        Kind.CHANGE_KIND_TODO_REMOVED,
    ]
    assert [m.revision for m in messages] == [start + 1, start + 2, start + 3, start + 4]
    assert [m.todo_id for m in messages] == [added.todo.id, added.todo.id, "", "x"]
    assert messages[1].todos[0].status == pb.TODO_STATUS_IN_PROGRESS
    assert [len(m.todos) for m in messages] == [1, 1, 1, 0]
    await assert_next_is_a_fresh_write(stub, call, "s")
    call.cancel()


async def test_an_update_that_changes_nothing_sends_nothing(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    added = await add(stub, "s", "same")
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
    await read(call)
    response = await stub.UpdateTodo(pb.UpdateTodoRequest(session_id="s", todo_id=added.todo.id, content="same"))
    assert not response.changed
    assert response.revision == added.revision
    await assert_next_is_a_fresh_write(stub, call, "s")
    call.cancel()


async def test_resuming_at_the_current_revision_sends_nothing_until_the_next_change(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    current = (await add(stub, "s", "seen")).revision
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=current))
    await assert_next_is_a_fresh_write(stub, call, "s")
    call.cancel()


async def test_resuming_after_a_gap_sends_exactly_the_missed_changes(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    seen = (await add(stub, "s", "seen")).revision
    for content in ["missed 1", "missed 2", "missed 3"]:
        await add(stub, "s", content)
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=seen))
    messages = [await read(call) for _ in range(3)]
    assert [m.revision for m in messages] == [seen + 1, seen + 2, seen + 3]
    assert all(m.kind == Kind.CHANGE_KIND_TODO_ADDED for m in messages)
    await assert_next_is_a_fresh_write(stub, call, "s")
    call.cancel()


async def test_resuming_beyond_the_retained_history_sends_a_reset(start: Callable[..., Any]) -> None:
    server = await start(history_limit=2)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        seen = (await add(stub, "s", "seen")).revision
        for content in ["1", "2", "3"]:
            latest = await add(stub, "s", content)
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=seen))
        reset = await read(call)
        assert (reset.kind, reset.revision) == (Kind.CHANGE_KIND_RESET, latest.revision)
        assert [t.content for t in reset.todos] == ["seen", "1", "2", "3"]
        call.cancel()


async def test_resuming_from_a_revision_newer_than_the_server_knows_sends_a_reset(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    current = (await add(stub, "s", "a")).revision
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=current + 10))
    reset = await read(call)
    assert (reset.kind, reset.revision) == (Kind.CHANGE_KIND_RESET, current)
    call.cancel()


async def test_resuming_into_a_recreated_session_sends_a_reset(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    old = (await add(stub, "s", "old incarnation")).revision
    await stub.RemoveSession(pb.RemoveSessionRequest(session_id="s"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    for content in ["new 1", "new 2"]:
        await add(stub, "s", content)
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=old))
    reset = await read(call)
    assert reset.kind == Kind.CHANGE_KIND_RESET
    assert [t.content for t in reset.todos] == ["new 1", "new 2"]
    assert reset.revision > old
    call.cancel()


async def test_a_watcher_that_falls_behind_gets_one_reset_with_the_latest_state(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(watch_buffer=2)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
        snapshot = await read(call)
        # Writes made in one turn of the server's event loop overflow the watcher's buffer.
        for n in range(10):
            await server.book.add("s", TodoDraft(content=f"burst {n}"))
        reset = await read(call)
        assert (reset.kind, reset.revision) == (Kind.CHANGE_KIND_RESET, snapshot.revision + 10)
        assert len(reset.todos) == 10
        await add(stub, "s", "after the burst")
        after = await read(call)
        assert (after.kind, after.revision) == (Kind.CHANGE_KIND_TODO_ADDED, reset.revision + 1)
        call.cancel()


async def test_a_stuck_watcher_delays_neither_writers_nor_other_watchers(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    stuck = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
    await read(stuck)  # then never read again: its transport window fills up
    live = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
    await read(live)
    big = [pb.Todo(content=f"{n} " + "x" * 3000) for n in range(300)]  # about 1 MB per message
    for _ in range(20):
        written = await asyncio.wait_for(stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=big)), 10)
    revision = 0
    while revision < written.revision:
        revision = (await read(live)).revision
    stuck.cancel()
    live.cancel()


async def test_the_progress_message_repeats_the_revision_on_a_quiet_stream(start: Callable[..., Any]) -> None:
    server = await start(progress_interval=0.05)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        current = (await add(stub, "s", "a")).revision
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id="s"))
        await read(call)
        progress = await read(call)
        assert (progress.kind, progress.revision, len(progress.todos)) == (Kind.CHANGE_KIND_PROGRESS, current, 0)
        call.cancel()


async def test_removing_a_session_ends_its_watchers_and_its_childrens_with_a_final_message(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="parent"))
    await stub.CreateSession(pb.CreateSessionRequest(session_id="child", parent_id="parent"))
    calls = [stub.WatchTodos(pb.WatchTodosRequest(session_id=sid)) for sid in ("parent", "child")]
    snapshots = [await read(call) for call in calls]
    await stub.RemoveSession(pb.RemoveSessionRequest(session_id="parent"))
    for call, snapshot in zip(calls, snapshots, strict=True):
        final = await read(call)
        assert (final.kind, final.revision) == (Kind.CHANGE_KIND_SESSION_REMOVED, snapshot.revision + 1)
        assert await asyncio.wait_for(call.read(), 5) is grpc.aio.EOF
        assert await call.code() == grpc.StatusCode.OK


async def test_cancelling_a_watch_frees_its_subscription(server: RunningServer, stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
    calls = [stub.WatchTodos(pb.WatchTodosRequest(session_id="s")) for _ in range(5)]
    for call in calls:
        await read(call)
    assert server.book.watcher_count == 5
    for call in calls:
        call.cancel()
    await eventually(lambda: server.book.watcher_count == 0)


async def test_watching_an_unknown_session_is_not_found(stub: pb_grpc.TodoServiceStub) -> None:
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id="nobody"))
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call.read()
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_watchers_beyond_the_limit_are_resource_exhausted(start: Callable[..., Any]) -> None:
    server = await start(max_watchers=2)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        calls = [stub.WatchTodos(pb.WatchTodosRequest(session_id=GLOBAL)) for _ in range(2)]
        for call in calls:
            await read(call)
        refused = stub.WatchTodos(pb.WatchTodosRequest(session_id=GLOBAL))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await refused.read()
        assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for call in calls:
            call.cancel()


async def test_shutdown_turns_health_off_and_ends_watches_with_unavailable(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(shutdown_grace=60.0)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        call = stub.WatchTodos(pb.WatchTodosRequest(session_id=GLOBAL))
        await read(call)
        health = health_pb2_grpc.HealthStub(channel)
        assert (await health.Check(health_pb2.HealthCheckRequest())).status == health_pb2.HealthCheckResponse.SERVING
        stopping = asyncio.create_task(server.stop())
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await asyncio.wait_for(call.read(), 20)
        assert raised.value.code() == grpc.StatusCode.UNAVAILABLE
        # The stream ended, so the grace period is not waited out (a bound far from both, for a busy machine).
        await asyncio.wait_for(stopping, 20)

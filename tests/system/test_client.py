"""The typed client's own promises: retries while the service is down, and a watch that resumes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from pydantic import ValidationError

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client import ChangeKind, InvalidArgument, NotFound, RetryPolicy, Todo, TodoClient, Unavailable
from sessiontodo_server.app import RunningServer
from tests.support import ServerProcess, free_port


@pytest.mark.process
async def test_unary_calls_are_retried_until_the_service_comes_up(tmp_path: Path) -> None:
    port = free_port()
    server = ServerProcess("--store", "memory://", port=port)
    # Tries every 0.25 s on average for the whole deadline: a server process can take 10 s to come up on
    # a loaded machine, which 40 tries (about 10 s) did not always cover.
    retry = RetryPolicy(attempts=1000, maximum=0.5, deadline=60.0)
    async with TodoClient.connect(f"127.0.0.1:{port}", retry=retry) as client:
        call = asyncio.ensure_future(client.create_session("late"))
        await asyncio.to_thread(server.start)
        try:
            session, created = await asyncio.wait_for(call, 90)
        finally:
            server.__exit__(None, None, None)
    assert (session.session_id, created) == ("late", True)


@pytest.mark.process
async def test_the_watch_resumes_after_a_server_restart_without_loss_or_duplicates(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    server = ServerProcess("--store", store).start()
    restarted = ServerProcess("--store", store, port=server.port)
    try:
        async with TodoClient.connect(server.address, retry=RetryPolicy(maximum=0.2)) as client:
            await client.create_session("s")
            events = client.watch("s")
            snapshot = await anext(events)
            assert snapshot.kind is ChangeKind.SNAPSHOT

            assert server.stop() == 0
            restarted.start()
            written = await client.add_todo("s", Todo(content="after the restart"))

            event = await asyncio.wait_for(anext(events), 30)
            assert (event.kind, event.revision) == (ChangeKind.TODO_ADDED, written.revision)
            await events.aclose()
    finally:
        server.__exit__(None, None, None)
        restarted.__exit__(None, None, None)


async def test_a_running_server_reports_its_todo_service_serving(client: TodoClient) -> None:
    assert await client.serving() is True


async def test_asking_an_address_where_nothing_listens_whether_it_serves_is_unavailable() -> None:
    async with TodoClient.connect(f"127.0.0.1:{free_port()}") as client:
        with pytest.raises(Unavailable):
            await client.serving()


async def test_the_watch_raises_not_found_for_an_unknown_session(client: TodoClient) -> None:
    with pytest.raises(NotFound):
        await anext(client.watch("nobody"))


async def test_errors_carry_the_field_violations(client: TodoClient) -> None:
    with pytest.raises(InvalidArgument) as raised:
        await client.replace_todos("", [Todo(content="")])
    assert raised.value.violations == [("todos[0].content", "must not be empty")]


class LoseFirstReply(grpc.aio.UnaryUnaryClientInterceptor):
    """The first call reaches the server, but its caller sees UNAVAILABLE (a reply lost on the way)."""

    def __init__(self) -> None:
        self.lost = 0

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        await call
        if self.lost:
            return call
        self.lost += 1
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata())


async def test_a_retried_create_session_without_an_id_creates_one_session(server: RunningServer) -> None:
    interceptor = LoseFirstReply()
    channel = grpc.aio.insecure_channel(server.address, interceptors=[interceptor])
    async with TodoClient(channel, retry=RetryPolicy(maximum=0.1)) as client:
        session, _ = await client.create_session()

        assert interceptor.lost == 1
        assert [s.session_id for s in await client.list_sessions()] == [session.session_id]


@contextlib.asynccontextmanager
async def newer_server(handlers: dict[str, grpc.RpcMethodHandler]) -> AsyncIterator[str]:
    """A real grpc.aio server answering the given TodoService methods as a newer server would; yields its address."""
    server = grpc.aio.server()
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sessiontodo.v1.TodoService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        await server.stop(0)


async def test_watches_skip_change_kinds_a_newer_server_adds() -> None:
    """proto3 enums are open: a kind this client does not know is skipped, never a crash."""
    unknown_kind = 99

    async def watch_todos(request: pb.WatchTodosRequest, context: object) -> AsyncIterator[pb.WatchTodosResponse]:
        yield pb.WatchTodosResponse(kind=unknown_kind, revision=1, session_id=request.session_id)  # type: ignore[arg-type]
        yield pb.WatchTodosResponse(kind=pb.CHANGE_KIND_SESSION_REMOVED, revision=2, session_id=request.session_id)

    async def watch_changes(request: pb.WatchChangesRequest, context: object) -> AsyncIterator[pb.WatchChangesResponse]:
        yield pb.WatchChangesResponse(kind=unknown_kind, session_id="s", cursor="e.1")  # type: ignore[arg-type]
        yield pb.WatchChangesResponse(kind=pb.CHANGE_KIND_SESSION_CREATED, session_id="s", cursor="e.2")

    handlers = {
        "WatchTodos": grpc.unary_stream_rpc_method_handler(
            watch_todos, pb.WatchTodosRequest.FromString, pb.WatchTodosResponse.SerializeToString
        ),
        "WatchChanges": grpc.unary_stream_rpc_method_handler(
            watch_changes, pb.WatchChangesRequest.FromString, pb.WatchChangesResponse.SerializeToString
        ),
    }
    async with newer_server(handlers) as address, TodoClient.connect(address) as client:
        watched = [event.kind async for event in client.watch("s")]
        feed = client.watch_changes()
        first = await anext(feed)
        await feed.aclose()
    assert watched == [ChangeKind.SESSION_REMOVED]
    assert (first.kind, first.cursor) == (ChangeKind.SESSION_CREATED, "e.2")


NEWER_STATUS, NEWER_PRIORITY = 7, 9  # numbers a newer server might add to TodoStatus and TodoPriority


def newer_todo(todo_id: str) -> pb.Todo:
    return pb.Todo(id=todo_id, content="c", status=NEWER_STATUS, priority=NEWER_PRIORITY)  # type: ignore[arg-type]


async def test_a_status_or_priority_a_newer_server_adds_is_read_and_watched_as_its_number() -> None:
    async def get_todos(request: pb.GetTodosRequest, context: object) -> pb.GetTodosResponse:
        return pb.GetTodosResponse(todos=[newer_todo("a")], revision=3)

    async def watch_todos(request: pb.WatchTodosRequest, context: object) -> AsyncIterator[pb.WatchTodosResponse]:
        yield pb.WatchTodosResponse(kind=pb.CHANGE_KIND_SNAPSHOT, revision=3, todos=[newer_todo("a")])
        yield pb.WatchTodosResponse(kind=pb.CHANGE_KIND_SESSION_REMOVED, revision=4)

    handlers = {
        "GetTodos": grpc.unary_unary_rpc_method_handler(
            get_todos, pb.GetTodosRequest.FromString, pb.GetTodosResponse.SerializeToString
        ),
        "WatchTodos": grpc.unary_stream_rpc_method_handler(
            watch_todos, pb.WatchTodosRequest.FromString, pb.WatchTodosResponse.SerializeToString
        ),
    }
    async with newer_server(handlers) as address, TodoClient.connect(address) as client:
        listed = await client.get_todos("s")
        watched = [event async for event in client.watch("s")]
    (todo,) = listed.todos
    assert (todo.status, todo.priority) == (NEWER_STATUS, NEWER_PRIORITY)
    assert [(t.status, t.priority) for t in watched[0].todos] == [(NEWER_STATUS, NEWER_PRIORITY)]
    assert watched[-1].kind is ChangeKind.SESSION_REMOVED


async def test_a_read_modify_write_sends_a_newer_status_and_priority_back_unchanged() -> None:
    sent: list[pb.ReplaceTodosRequest] = []

    async def get_todos(request: pb.GetTodosRequest, context: object) -> pb.GetTodosResponse:
        return pb.GetTodosResponse(todos=[newer_todo("a")], revision=3)

    async def replace_todos(request: pb.ReplaceTodosRequest, context: object) -> pb.ReplaceTodosResponse:
        sent.append(request)
        return pb.ReplaceTodosResponse(todos=request.todos, revision=4)

    handlers = {
        "GetTodos": grpc.unary_unary_rpc_method_handler(
            get_todos, pb.GetTodosRequest.FromString, pb.GetTodosResponse.SerializeToString
        ),
        "ReplaceTodos": grpc.unary_unary_rpc_method_handler(
            replace_todos, pb.ReplaceTodosRequest.FromString, pb.ReplaceTodosResponse.SerializeToString
        ),
    }
    async with newer_server(handlers) as address, TodoClient.connect(address) as client:
        listed = await client.get_todos("s")
        edited = listed.todos[0].model_copy(update={"content": "edited"})
        await client.replace_todos("s", [edited, Todo(content="new")], expected_revision=listed.revision)
    (request,) = sent
    assert [(t.content, t.status, t.priority) for t in request.todos] == [
        ("edited", NEWER_STATUS, NEWER_PRIORITY),
        ("new", pb.TODO_STATUS_PENDING, pb.TODO_PRIORITY_MEDIUM),
    ]


def test_a_newer_status_survives_the_json_a_script_edits() -> None:
    """``sessiontodoctl -o json get`` then ``replace -f``: the number goes out and comes back as it was."""
    todo = Todo(id="a", content="c", status=NEWER_STATUS, priority=NEWER_PRIORITY)
    assert Todo.model_validate_json(todo.model_dump_json()) == todo


@pytest.mark.parametrize("status", ["nonsense", True, 2**31, "7"])
def test_a_status_that_is_neither_a_known_name_nor_a_wire_number_is_refused(status: object) -> None:
    with pytest.raises(ValidationError):
        Todo(content="c", status=status)  # type: ignore[arg-type]

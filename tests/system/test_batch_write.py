"""BatchWrite through a real grpc.aio server: one message per effective write on watches and the
feed, in write order with consecutive cursors; errors that name the write; request id replay;
limits; tenants and roles. (The store side is in test_store_contract.py, on every store.)"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import (
    AddTodoWrite,
    CreateSessionWrite,
    NotFound,
    RemoveSessionWrite,
    RemoveTodoWrite,
    ReplaceTodosWrite,
    Todo,
    TodoClient,
    TodoStatus,
    UpdateSessionWrite,
    UpdateTodoWrite,
)
from sessiontodo_server.app import RunningServer
from tests.support.certificates import auth_toml

WAIT = 10.0


@pytest.fixture(params=["memory", "sqlite"])
async def server(request: pytest.FixtureRequest, start: Callable[..., Any], tmp_path: Path) -> RunningServer:
    store = "memory://" if request.param == "memory" else f"sqlite:///{tmp_path / 'todos.db'}"
    running: RunningServer = await start(store=store)
    return running


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.TodoServiceStub(channel)


def create(session_id: str, parent_id: str = "") -> pb.Write:
    return pb.Write(create_session=pb.CreateSessionRequest(session_id=session_id, parent_id=parent_id))


def add(session_id: str, content: str, **fields: Any) -> pb.Write:
    return pb.Write(add_todo=pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(content=content), **fields))


def replace(session_id: str, *contents: str) -> pb.Write:
    todos = [pb.Todo(id=f"t{n}", content=content) for n, content in enumerate(contents)]
    return pb.Write(replace_todos=pb.ReplaceTodosRequest(session_id=session_id, todos=todos))


async def read(call: Any) -> Any:
    message = await asyncio.wait_for(call.read(), WAIT)
    assert message is not grpc.aio.EOF, "the stream ended"
    return message


async def started_feed(stub: pb_grpc.TodoServiceStub) -> Any:
    """A feed whose snapshot has been read: every message after it is a change."""
    feed = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True))
    while (await read(feed)).kind != pb.CHANGE_KIND_PROGRESS:
        pass
    return feed


async def refusal(call: Any) -> tuple[grpc.StatusCode, list[str], dict[str, str]]:
    """The status code, BadRequest field paths and ErrorInfo metadata of a failed call."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    status = rpc_status.from_call(raised.value)
    assert status is not None
    fields, metadata = [], {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            fields += [violation.field for violation in bad_request.field_violations]
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            metadata = dict(info.metadata)
    return raised.value.code(), fields, metadata


async def test_each_effective_write_is_one_feed_message_in_write_order_with_consecutive_cursors(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    feed = await started_feed(stub)
    try:
        writes = [create("plan"), replace("plan", "one"), replace("plan", "one"), add("plan", "two"), create("plan")]
        await stub.BatchWrite(pb.BatchWriteRequest(writes=writes, origin="resync"))

        messages = [await read(feed) for _ in range(3)]  # the repeated list and the existing session change nothing
    finally:
        feed.cancel()
    kinds = [message.kind for message in messages]
    assert kinds == [pb.CHANGE_KIND_SESSION_CREATED, pb.CHANGE_KIND_TODOS_REPLACED, pb.CHANGE_KIND_TODO_ADDED]
    epoch, first = messages[0].cursor.rsplit(".", 1)
    assert [message.cursor for message in messages] == [f"{epoch}.{int(first) + n}" for n in range(3)]
    assert {message.origin for message in messages} == {"resync"}


async def test_a_watch_gets_one_message_per_effective_write_of_its_session(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="watched"))
    watch = stub.WatchTodos(pb.WatchTodosRequest(session_id="watched"))
    try:
        assert (await read(watch)).kind == pb.CHANGE_KIND_SNAPSHOT
        writes = [replace("watched", "a"), create("other"), add("other", "elsewhere"), add("watched", "b")]
        await stub.BatchWrite(pb.BatchWriteRequest(writes=writes))

        messages = [await read(watch) for _ in range(2)]
    finally:
        watch.cancel()
    assert [(message.kind, message.revision) for message in messages] == [
        (pb.CHANGE_KIND_TODOS_REPLACED, 1),
        (pb.CHANGE_KIND_TODO_ADDED, 2),
    ]
    assert [todo.content for todo in messages[1].todos] == ["a", "b"]


async def test_the_results_say_what_each_write_did(stub: pb_grpc.TodoServiceStub) -> None:
    writes = [
        create("r"),
        replace("r", "one"),
        add("r", "two", index=0),
        pb.Write(update_todo=pb.UpdateTodoRequest(session_id="r", todo_id="t0", status=pb.TODO_STATUS_COMPLETED)),
        pb.Write(remove_session=pb.RemoveSessionRequest(session_id="r")),
    ]

    results = (await stub.BatchWrite(pb.BatchWriteRequest(writes=writes))).results

    assert [(result.revision, result.changed) for result in results] == [
        (0, True),
        (1, True),
        (2, True),
        (3, True),
        (4, True),
    ]
    assert list(results[1].todo_ids) == ["t0"]
    assert (results[2].todo.content, results[2].index) == ("two", 0)
    assert results[3].todo.status == pb.TODO_STATUS_COMPLETED
    assert list(results[4].removed_session_ids) == ["r"]


async def test_an_invalid_write_is_named_by_its_field_path_and_nothing_is_written(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    writes = [create("kept-out"), add("kept-out", "fine"), add("kept-out", "   ")]

    code, fields, metadata = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=writes)))

    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert fields == ["writes[2].add_todo.todo.content"]
    assert metadata["writeIndex"] == "2"
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await stub.GetSession(pb.GetSessionRequest(session_id="kept-out"))
    assert raised.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_write_refused_by_the_state_names_the_write(stub: pb_grpc.TodoServiceStub) -> None:
    writes = [create("s"), add("s", "x", expected_revision=0), add("s", "y", expected_revision=0)]

    code, _, metadata = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=writes)))

    assert code == grpc.StatusCode.ABORTED
    assert (metadata["writeIndex"], metadata["actualRevision"]) == ("2", "1")


async def test_a_write_without_an_operation_or_with_its_own_origin_is_invalid(stub: pb_grpc.TodoServiceStub) -> None:
    own_origin = pb.Write(add_todo=pb.AddTodoRequest(session_id="s", todo=pb.Todo(content="x"), origin="mine"))

    _, empty_fields, _ = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=[pb.Write()])))
    _, origin_fields, _ = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=[own_origin])))

    assert empty_fields == ["writes[0].operation.operation"]
    assert origin_fields == ["writes[0].add_todo.origin"]


async def test_a_batch_needs_one_to_1000_writes(stub: pb_grpc.TodoServiceStub) -> None:
    too_many = [create(f"s{n}") for n in range(1001)]

    empty, _, _ = await refusal(stub.BatchWrite(pb.BatchWriteRequest()))
    over, fields, _ = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=too_many)))

    assert (empty, over) == (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INVALID_ARGUMENT)
    assert fields == ["writes"]


async def test_a_retried_request_id_returns_the_first_results_and_writes_nothing(stub: pb_grpc.TodoServiceStub) -> None:
    request = pb.BatchWriteRequest(writes=[create("once"), add("once", "step")], request_id="batch-1")
    first = await stub.BatchWrite(request)

    again = await stub.BatchWrite(request)

    assert again == first
    todos = await stub.GetTodos(pb.GetTodosRequest(session_id="once"))
    assert [todo.content for todo in todos.todos] == ["step"]


async def test_a_request_id_reused_for_another_batch_is_failed_precondition(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.BatchWrite(pb.BatchWriteRequest(writes=[create("a")], request_id="batch-1"))

    code, _, _ = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=[create("b")], request_id="batch-1")))

    assert code == grpc.StatusCode.FAILED_PRECONDITION


async def test_a_batch_past_the_memory_budget_writes_nothing(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(memory_budget=16 * 1024 * 1024)  # 8 MiB for lists
    megabyte = ["x" * 4000] * 250
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        for n in range(7):
            await stub.BatchWrite(pb.BatchWriteRequest(writes=[create(f"full{n}"), replace(f"full{n}", *megabyte)]))

        writes = [create("over"), replace("over", *megabyte)]
        code, _, metadata = await refusal(stub.BatchWrite(pb.BatchWriteRequest(writes=writes)))

        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert metadata["writeIndex"] == "1"
        with pytest.raises(grpc.aio.AioRpcError):
            await stub.GetSession(pb.GetSessionRequest(session_id="over"))


def token(tenant: str, role: str) -> str:
    return f"{tenant}-{role}-token-0123456789"


async def test_each_tenant_batches_in_its_own_namespace_and_a_reader_may_not(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    auth_file = tmp_path / "auth.toml"
    entries = [(token(tenant, role), tenant, role) for tenant in ("acme", "globex") for role in ("writer", "reader")]
    auth_file.write_text(auth_toml(*entries))
    server: RunningServer = await start(auth_file=auth_file)
    request = pb.BatchWriteRequest(writes=[create("shared"), add("shared", "mine")], request_id="same-id")

    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)

        def as_(tenant: str, role: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {token(tenant, role)}"),)

        acme = await stub.BatchWrite(request, metadata=as_("acme", "writer"))
        globex = await stub.BatchWrite(request, metadata=as_("globex", "writer"))  # same request id: another batch
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.BatchWrite(request, metadata=as_("acme", "reader"))
        todos = await stub.GetTodos(pb.GetTodosRequest(session_id="shared"), metadata=as_("globex", "reader"))

    assert acme.results[1].revision == globex.results[1].revision == 1
    assert [todo.content for todo in todos.todos] == ["mine"]
    assert raised.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_the_typed_client_batches_every_kind_of_write(client: TodoClient) -> None:
    results = await client.batch_write(
        [
            CreateSessionWrite(session_id="typed", labels={"title": "Typed"}),
            ReplaceTodosWrite(session_id="typed", todos=[Todo(id="a", content="A")]),
            AddTodoWrite(session_id="typed", todo=Todo(content="B"), expected_revision=1),
            UpdateTodoWrite(session_id="typed", todo_id="a", status=TodoStatus.COMPLETED),
            UpdateSessionWrite(session_id="typed", labels={"done": "yes"}),
            CreateSessionWrite(session_id="gone"),
            RemoveTodoWrite(session_id="typed", todo_id="a"),
            RemoveSessionWrite(session_id="gone"),
        ],
        origin="typed-client",
    )

    assert [result.revision for result in results] == [0, 1, 2, 3, 4, 0, 5, 1]
    assert results[1].todo_ids == ["a"]
    assert results[2].todo is not None
    assert results[2].todo.content == "B"
    assert results[7].removed_session_ids == ["gone"]
    assert [todo.content for todo in (await client.get_todos("typed")).todos] == ["B"]


async def test_the_typed_client_raises_the_failing_writes_error(client: TodoClient) -> None:
    with pytest.raises(NotFound) as raised:
        await client.batch_write([CreateSessionWrite(session_id="x"), RemoveTodoWrite(session_id="x", todo_id="nope")])

    assert raised.value.metadata["writeIndex"] == "1"

"""Bad input: the right status code, readable details, and nothing changed."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer

LIMITS = {"max_todos_per_session": 3, "max_content_length": 20, "max_session_id_length": 16, "max_sessions": 2}

GLOBAL = "sessiontodo:global"


@pytest.fixture
async def stub(start: Callable[..., Any]) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    server: RunningServer = await start(**LIMITS)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=[pb.Todo(id="keep", content="kept")]))
        yield stub


async def failure(call: Any) -> tuple[grpc.StatusCode, list[tuple[str, str]], str]:
    """The status code, BadRequest field violations and ErrorInfo reason of a failing call."""
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    status = rpc_status.from_call(raised.value)
    assert status is not None, "no google.rpc.Status in the trailers"
    violations, reason = [], ""
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations = [(v.field, v.description) for v in bad_request.field_violations]
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reason = info.reason
    return raised.value.code(), violations, reason


async def assert_unchanged(stub: pb_grpc.TodoServiceStub) -> None:
    state = await stub.GetTodos(pb.GetTodosRequest(session_id="s"))
    assert [(t.id, t.content) for t in state.todos] == [("keep", "kept")]
    assert state.revision == 1


def fields(violations: list[tuple[str, str]]) -> list[str]:
    return [field for field, _ in violations]


@pytest.mark.parametrize(
    ("todos", "expected_fields"),
    [
        ([pb.Todo(content="")], ["todos[0].content"]),
        ([pb.Todo(content="   ")], ["todos[0].content"]),
        ([pb.Todo(content="x" * 21)], ["todos[0].content"]),
        ([pb.Todo(id="i" * 129, content="x")], ["todos[0].id"]),
        ([pb.Todo(id="d", content="a"), pb.Todo(id="d", content="b")], ["todos[1].id"]),
        ([pb.Todo(content="a", status=99)], ["todos[0].status"]),  # type: ignore[arg-type]
        ([pb.Todo(content="a", priority=-1)], ["todos[0].priority"]),  # type: ignore[arg-type]
        ([pb.Todo(content=str(n)) for n in range(4)], ["todos"]),
        ([pb.Todo(content=""), pb.Todo(content="ok", status=42)], ["todos[0].content", "todos[1].status"]),  # type: ignore[arg-type]
    ],
)
async def test_replace_rejects_invalid_lists_with_field_violations(
    stub: pb_grpc.TodoServiceStub, todos: list[pb.Todo], expected_fields: list[str]
) -> None:
    code, violations, reason = await failure(stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=todos)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert fields(violations) == expected_fields
    assert all(description for _, description in violations)
    assert reason == "INVALID_ARGUMENT"
    await assert_unchanged(stub)


@pytest.mark.parametrize(
    ("todo", "expected_field"),
    [
        (pb.Todo(content=""), "todo.content"),
        (pb.Todo(id="keep", content="dup"), "todo.id"),
        (pb.Todo(content="x", status=7), "todo.status"),  # type: ignore[arg-type]
    ],
)
async def test_add_rejects_invalid_todos(stub: pb_grpc.TodoServiceStub, todo: pb.Todo, expected_field: str) -> None:
    code, violations, _ = await failure(stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=todo)))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert fields(violations) == [expected_field]
    await assert_unchanged(stub)


async def test_adding_to_a_full_list_is_resource_exhausted(stub: pb_grpc.TodoServiceStub) -> None:
    todos = [pb.Todo(id="keep", content="kept"), pb.Todo(content="b"), pb.Todo(content="c")]
    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=todos))
    code, _, reason = await failure(stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=pb.Todo(content="d"))))
    assert (code, reason) == (grpc.StatusCode.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED")
    assert len((await stub.GetTodos(pb.GetTodosRequest(session_id="s"))).todos) == 3


@pytest.mark.parametrize(
    ("request_", "expected_field"),
    [
        (pb.UpdateTodoRequest(session_id="s", todo_id="keep", content=""), "content"),
        (pb.UpdateTodoRequest(session_id="s", todo_id="keep", status=9), "status"),  # type: ignore[arg-type]
        (pb.UpdateTodoRequest(session_id="s", todo_id="keep", priority=9), "priority"),  # type: ignore[arg-type]
    ],
)
async def test_update_rejects_invalid_values(
    stub: pb_grpc.TodoServiceStub, request_: pb.UpdateTodoRequest, expected_field: str
) -> None:
    code, violations, _ = await failure(stub.UpdateTodo(request_))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert fields(violations) == [expected_field]
    await assert_unchanged(stub)


@pytest.mark.parametrize("session_id", ["has space", "slash/es", "x" * 17, "ünïcode"])
async def test_malformed_session_ids_are_invalid_everywhere(stub: pb_grpc.TodoServiceStub, session_id: str) -> None:
    calls = [
        stub.CreateSession(pb.CreateSessionRequest(session_id=session_id)),
        stub.GetTodos(pb.GetTodosRequest(session_id=session_id)),
        stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=[pb.Todo(content="x")])),
        stub.AddTodo(pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(content="x"))),
        stub.RemoveSession(pb.RemoveSessionRequest(session_id=session_id)),
    ]
    for call in calls:
        code, violations, _ = await failure(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert fields(violations) == ["session_id"]
    sessions = await stub.ListSessions(pb.ListSessionsRequest())
    assert [s.session_id for s in sessions.sessions] == ["s"]


async def test_a_malformed_parent_id_is_invalid(stub: pb_grpc.TodoServiceStub) -> None:
    code, violations, _ = await failure(stub.CreateSession(pb.CreateSessionRequest(session_id="c", parent_id="a b")))
    assert (code, fields(violations)) == (grpc.StatusCode.INVALID_ARGUMENT, ["parent_id"])


async def test_the_global_list_cannot_be_removed(stub: pb_grpc.TodoServiceStub) -> None:
    code, violations, _ = await failure(stub.RemoveSession(pb.RemoveSessionRequest(session_id=GLOBAL)))
    assert (code, fields(violations)) == (grpc.StatusCode.INVALID_ARGUMENT, ["session_id"])


async def test_an_empty_session_id_is_invalid_on_every_rpc(stub: pb_grpc.TodoServiceStub) -> None:
    """A forgotten session_id must never reach a shared list (RFC-0034's leak)."""
    calls = [
        stub.CreateSession(pb.CreateSessionRequest()),
        stub.GetSession(pb.GetSessionRequest()),
        stub.UpdateSession(pb.UpdateSessionRequest(labels={"a": "b"})),
        stub.RemoveSession(pb.RemoveSessionRequest()),
        stub.GetTodos(pb.GetTodosRequest()),
        stub.BatchGetTodos(pb.BatchGetTodosRequest(session_ids=["s", ""])),
        stub.ReplaceTodos(pb.ReplaceTodosRequest(todos=[pb.Todo(content="x")])),
        stub.AddTodo(pb.AddTodoRequest(todo=pb.Todo(content="x"))),
        stub.UpdateTodo(pb.UpdateTodoRequest(todo_id="keep", content="x")),
        stub.RemoveTodo(pb.RemoveTodoRequest(todo_id="keep")),
    ]
    for call in calls:
        code, violations, _ = await failure(call)
        assert code == grpc.StatusCode.INVALID_ARGUMENT
        assert fields(violations) in (["session_id"], ["session_ids[1]"])
    watch = stub.WatchTodos(pb.WatchTodosRequest())
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await watch.read()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    await assert_unchanged(stub)
    assert not (await stub.GetTodos(pb.GetTodosRequest(session_id=GLOBAL))).todos


async def test_writes_to_an_unknown_session_are_not_found_and_create_nothing(stub: pb_grpc.TodoServiceStub) -> None:
    calls = [
        stub.GetTodos(pb.GetTodosRequest(session_id="ghost")),
        stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="ghost", todos=[pb.Todo(content="x")])),
        stub.AddTodo(pb.AddTodoRequest(session_id="ghost", todo=pb.Todo(content="x"))),
        stub.UpdateTodo(pb.UpdateTodoRequest(session_id="ghost", todo_id="keep", content="x")),
        stub.RemoveTodo(pb.RemoveTodoRequest(session_id="ghost", todo_id="keep")),
    ]
    for call in calls:
        code, _, reason = await failure(call)
        assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND")
    sessions = await stub.ListSessions(pb.ListSessionsRequest())
    assert [s.session_id for s in sessions.sessions] == ["s"]
    assert not (await stub.GetTodos(pb.GetTodosRequest(session_id=GLOBAL))).todos


async def test_an_unknown_todo_is_not_found(stub: pb_grpc.TodoServiceStub) -> None:
    for call in [
        stub.UpdateTodo(pb.UpdateTodoRequest(session_id="s", todo_id="nope", content="x")),
        stub.RemoveTodo(pb.RemoveTodoRequest(session_id="s", todo_id="nope")),
    ]:
        code, _, reason = await failure(call)
        assert (code, reason) == (grpc.StatusCode.NOT_FOUND, "TODO_NOT_FOUND")
    await assert_unchanged(stub)


async def test_a_stale_expected_revision_is_aborted_for_every_write(stub: pb_grpc.TodoServiceStub) -> None:
    calls = [
        stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=[], expected_revision=0)),
        stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=pb.Todo(content="x"), expected_revision=0)),
        stub.UpdateTodo(pb.UpdateTodoRequest(session_id="s", todo_id="keep", content="x", expected_revision=0)),
        stub.RemoveTodo(pb.RemoveTodoRequest(session_id="s", todo_id="keep", expected_revision=0)),
    ]
    for call in calls:
        code, _, reason = await failure(call)
        assert (code, reason) == (grpc.StatusCode.ABORTED, "REVISION_MISMATCH")
    await assert_unchanged(stub)


async def test_sessions_beyond_the_limit_are_resource_exhausted(stub: pb_grpc.TodoServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="second"))
    code, _, _ = await failure(stub.CreateSession(pb.CreateSessionRequest(session_id="third")))
    assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
    existing = await stub.CreateSession(pb.CreateSessionRequest(session_id="second"))
    assert not existing.created  # get-or-create of an existing session is never refused


async def test_a_session_recreated_under_another_parent_is_a_failed_precondition(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(session_id="child", parent_id="s"))
    code, _, reason = await failure(stub.CreateSession(pb.CreateSessionRequest(session_id="child")))
    assert (code, reason) == (grpc.StatusCode.FAILED_PRECONDITION, "PARENT_MISMATCH")


async def test_an_unknown_parent_is_not_found(stub: pb_grpc.TodoServiceStub) -> None:
    code, _, _ = await failure(stub.CreateSession(pb.CreateSessionRequest(session_id="orphan", parent_id="ghost")))
    assert code == grpc.StatusCode.NOT_FOUND


async def test_a_negative_page_size_is_invalid(stub: pb_grpc.TodoServiceStub) -> None:
    code, violations, _ = await failure(stub.ListSessions(pb.ListSessionsRequest(page_size=-1)))
    assert (code, fields(violations)) == (grpc.StatusCode.INVALID_ARGUMENT, ["page_size"])


async def test_a_list_too_large_in_bytes_is_invalid(start: Callable[..., Any]) -> None:
    server = await start(max_list_bytes=2048, max_content_length=1000)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        todos = [pb.Todo(content="x" * 1000) for _ in range(3)]
        code, violations, _ = await failure(stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=GLOBAL, todos=todos)))
        assert (code, fields(violations)) == (grpc.StatusCode.INVALID_ARGUMENT, ["todos"])
        assert not (await stub.GetTodos(pb.GetTodosRequest(session_id=GLOBAL))).todos


async def test_an_idle_ttl_beyond_protobuf_durations_range_is_invalid_and_creates_nothing(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    too_long = duration_pb2.Duration(seconds=315_576_000_001)

    created_code, created_violations, _ = await failure(
        stub.CreateSession(pb.CreateSessionRequest(session_id="forever", idle_ttl=too_long))
    )
    updated_code, _, _ = await failure(stub.UpdateSession(pb.UpdateSessionRequest(session_id="s", idle_ttl=too_long)))

    assert created_code is grpc.StatusCode.INVALID_ARGUMENT
    assert fields(created_violations) == ["idle_ttl"]
    assert updated_code is grpc.StatusCode.INVALID_ARGUMENT
    assert (await failure(stub.GetSession(pb.GetSessionRequest(session_id="forever"))))[0] is grpc.StatusCode.NOT_FOUND
    assert (await stub.GetSession(pb.GetSessionRequest(session_id="s"))).session.revision == 1

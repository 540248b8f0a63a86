"""Every error reaches the client with its true code, however much it has to say."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer

GLOBAL = "sessiontodo:global"
"""The global list (its id is reserved)."""


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    """A stub on a channel with gRPC's default limits (8 KiB of metadata)."""
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.TodoServiceStub(channel)


async def details(call: Any) -> tuple[grpc.StatusCode, str, list[tuple[str, str]], dict[str, str]]:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await call
    status = rpc_status.from_call(raised.value)
    assert status is not None
    violations: list[tuple[str, str]] = []
    metadata: dict[str, str] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad_request = error_details_pb2.BadRequest()
            detail.Unpack(bad_request)
            violations = [(v.field, v.description) for v in bad_request.field_violations]
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            metadata = dict(info.metadata)
    return raised.value.code(), raised.value.details() or "", violations, metadata


async def test_a_thousand_bad_todos_are_invalid_argument_with_the_first_violations_and_a_count(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    request = pb.ReplaceTodosRequest(session_id=GLOBAL, todos=[pb.Todo() for _ in range(1000)])
    code, message, violations, _ = await details(stub.ReplaceTodos(request))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    *shown, (last_field, last_description) = violations
    assert shown[0] == ("todos[0].content", "must not be empty")
    assert [field for field, _ in shown] == [f"todos[{n}].content" for n in range(len(shown))]
    assert last_field == ""
    assert last_description == f"and {1000 - len(shown)} more"
    assert message.startswith("todos[0].content: must not be empty; ")
    assert message.endswith(" more")
    assert (await stub.GetTodos(pb.GetTodosRequest(session_id=GLOBAL))).revision == 0


async def test_an_echoed_16000_character_todo_id_is_not_found_with_the_id_cut_short(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    todo_id = "t" * 16_000
    code, message, _, metadata = await details(
        stub.RemoveTodo(pb.RemoveTodoRequest(session_id=GLOBAL, todo_id=todo_id))
    )
    assert code == grpc.StatusCode.NOT_FOUND
    assert message.startswith("todo 'tttt")
    assert len(message.encode()) <= 1024
    echoed = next(value for value in metadata.values() if value.startswith("ttt"))
    assert len(echoed) <= 200
    assert "16000" in echoed

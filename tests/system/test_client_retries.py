"""What the typed client repeats on UNAVAILABLE and what it never does, against a gRPC server that
answers as a server losing its replies would (UNAVAILABLE after applying, then what a repeat gets)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client import Aborted, RetryPolicy, Todo, TodoClient, TodoStatus, Unavailable

QUICK = RetryPolicy(attempts=3, initial=0.01, maximum=0.02)


class LossyServer:
    """A TodoService whose rpcs answer in turn from a script: each answer a response message or a
    status code to abort with; every request is kept."""

    def __init__(self) -> None:
        self.requests: dict[str, list[Any]] = {}
        self._answers: dict[str, list[Any]] = {}

    def script(self, method: str, *answers: Any) -> None:
        self._answers[method] = list(answers)

    def handler(self, method: str) -> grpc.RpcMethodHandler:
        descriptor = pb.DESCRIPTOR.services_by_name["TodoService"].methods_by_name[method]
        request_class = getattr(pb, descriptor.input_type.name)

        async def answer(request: Any, context: grpc.aio.ServicerContext) -> Any:
            self.requests.setdefault(method, []).append(request)
            reply = self._answers[method].pop(0)
            if isinstance(reply, grpc.StatusCode):
                await context.abort(reply, "scripted")
            return reply

        return grpc.unary_unary_rpc_method_handler(
            answer, request_deserializer=request_class.FromString, response_serializer=lambda m: m.SerializeToString()
        )


@pytest.fixture
async def lossy() -> AsyncIterator[tuple[LossyServer, TodoClient]]:
    fake = LossyServer()
    server = grpc.aio.server()
    names = ("AddTodo", "ReplaceTodos", "UpdateTodo", "ClaimTodo", "ReleaseTodo")
    methods = {name: fake.handler(name) for name in names}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("sessiontodo.v1.TodoService", methods),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with TodoClient.connect(f"127.0.0.1:{port}", QUICK) as client:
        yield fake, client
    await server.stop(None)


async def test_add_todo_retries_with_one_generated_request_id_so_a_lost_reply_adds_nothing_twice(
    lossy: tuple[LossyServer, TodoClient],
) -> None:
    fake, client = lossy
    added = pb.AddTodoResponse(todo=pb.Todo(id="t", content="once"), index=0, revision=1)
    fake.script("AddTodo", grpc.StatusCode.UNAVAILABLE, added)

    result = await client.add_todo("s", Todo(content="once"))

    ids = [request.request_id for request in fake.requests["AddTodo"]]
    assert result.revision == 1
    assert len(ids) == 2
    assert ids[0] == ids[1] != ""


async def test_a_conditional_replace_that_lost_its_reply_is_unavailable_never_a_retried_aborted(
    lossy: tuple[LossyServer, TodoClient],
) -> None:
    fake, client = lossy
    fake.script("ReplaceTodos", grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)

    with pytest.raises(Unavailable):
        await client.replace_todos("s", [Todo(content="x")], expected_revision=3)

    assert len(fake.requests["ReplaceTodos"]) == 1


async def test_a_conditional_update_that_lost_its_reply_is_retried_at_the_same_revision(
    lossy: tuple[LossyServer, TodoClient],
) -> None:
    fake, client = lossy
    fake.script("UpdateTodo", grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED)

    with pytest.raises(Aborted):  # the first try was applied: the repeat cannot apply over it
        await client.update_todo("s", "t", status=TodoStatus.COMPLETED, expected_revision=3)

    assert [request.expected_revision for request in fake.requests["UpdateTodo"]] == [3, 3]


async def test_claim_todo_retries_with_one_generated_request_id_so_a_lost_reply_claims_nothing_twice(
    lossy: tuple[LossyServer, TodoClient],
) -> None:
    fake, client = lossy
    claimed = pb.ClaimTodoResponse(todo=pb.Todo(id="t", content="x", owner="w1"), revision=2, changed=True)
    fake.script("ClaimTodo", grpc.StatusCode.UNAVAILABLE, claimed)

    claim = await client.claim_todo("s", "w1")

    ids = [request.request_id for request in fake.requests["ClaimTodo"]]
    assert claim.todo is not None
    assert claim.todo.id == "t"
    assert len(ids) == 2
    assert ids[0] == ids[1] != ""


async def test_each_claim_todo_call_has_a_request_id_of_its_own(lossy: tuple[LossyServer, TodoClient]) -> None:
    fake, client = lossy
    fake.script("ClaimTodo", pb.ClaimTodoResponse(revision=1), pb.ClaimTodoResponse(revision=1))

    await client.claim_todo("s", "w1")
    await client.claim_todo("s", "w1")

    first, second = (request.request_id for request in fake.requests["ClaimTodo"])
    assert first != second


async def test_a_release_that_lost_its_reply_is_unavailable_never_retried(
    lossy: tuple[LossyServer, TodoClient],
) -> None:
    fake, client = lossy
    fake.script("ReleaseTodo", grpc.StatusCode.UNAVAILABLE, pb.ReleaseTodoResponse(revision=3))

    with pytest.raises(Unavailable):
        await client.release_todo("s", "t", "w1")

    assert len(fake.requests["ReleaseTodo"]) == 1

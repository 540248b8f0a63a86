"""Task graphs over gRPC (issue 32): the new fields round trip, the dependency rules name their
culprit on every write path, removal strips blockers in one change, reads select ready work and
owners, and claims, renewals, releases and lapsing leases behave as the proto says."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer
from tests.support import eventually
from tests.system.test_validation import failure

PENDING, WORKING, DONE, CANCELLED = (
    pb.TODO_STATUS_PENDING,
    pb.TODO_STATUS_IN_PROGRESS,
    pb.TODO_STATUS_COMPLETED,
    pb.TODO_STATUS_CANCELLED,
)


@pytest.fixture
async def stub(start: Callable[..., Any]) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    server: RunningServer = await start(expiry_interval=0.1)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        yield stub


def todo(todo_id: str, *blocked_by: str, status: pb.TodoStatus.ValueType = PENDING, owner: str = "") -> pb.Todo:
    return pb.Todo(id=todo_id, content=f"do {todo_id}", status=status, owner=owner, blocked_by=blocked_by)


async def plan(stub: pb_grpc.TodoServiceStub, *todos: pb.Todo) -> pb.ReplaceTodosResponse:
    response: pb.ReplaceTodosResponse = await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=todos))
    return response


async def listed(stub: pb_grpc.TodoServiceStub, **filter_fields: Any) -> pb.GetTodosResponse:
    request = pb.GetTodosRequest(session_id="s", filter=pb.TodoFilter(**filter_fields))
    response: pb.GetTodosResponse = await stub.GetTodos(request)
    return response


async def test_the_graph_fields_round_trip_and_responses_carry_who_each_todo_blocks(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    written = pb.Todo(id="b", content="Parse", description="The long story", active_form="Parsing", owner="ann")
    written.blocked_by.append("a")

    await plan(stub, todo("a"), written, todo("c", "a", "b"))
    read = await listed(stub)

    a, b, _ = read.todos
    assert (b.description, b.active_form, b.owner, list(b.blocked_by)) == ("The long story", "Parsing", "ann", ["a"])
    assert (list(a.blocks), list(b.blocks)) == (["b", "c"], ["c"])


async def test_a_replace_naming_an_unknown_blocker_is_refused_with_its_field_path(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    code, violations, _ = await failure(plan(stub, todo("a"), todo("b", "a", "nope")))

    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in violations] == ["todos[1].blocked_by[1]"]


async def test_a_replace_making_a_cycle_is_refused_and_changes_nothing(stub: pb_grpc.TodoServiceStub) -> None:
    code, violations, _ = await failure(plan(stub, todo("a", "c"), todo("b", "a"), todo("c", "b")))

    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert "closes a cycle" in violations[0][1]
    assert (await listed(stub)).revision == 0


async def test_an_update_adding_a_blocker_that_closes_a_cycle_names_it(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"), todo("b", "a"))

    update = pb.UpdateTodoRequest(session_id="s", todo_id="a", add_blocked_by=["b"])
    code, violations, _ = await failure(stub.UpdateTodo(update))

    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in violations] == ["add_blocked_by[0]"]


async def test_an_added_todo_blocking_on_itself_is_refused(stub: pb_grpc.TodoServiceStub) -> None:
    code, violations, _ = await failure(stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=todo("x", "x"))))

    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in violations] == ["todo.blocked_by[0]"]


async def test_a_batch_write_names_the_culprit_inside_its_write(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"))
    write = pb.Write(add_todo=pb.AddTodoRequest(session_id="s", todo=todo("b", "missing")))

    code, violations, _ = await failure(stub.BatchWrite(pb.BatchWriteRequest(writes=[write])))

    assert code is grpc.StatusCode.INVALID_ARGUMENT
    assert [field for field, _ in violations] == ["writes[0].add_todo.todo.blocked_by[0]"]


async def test_removing_a_todo_strips_it_from_every_blocked_by_in_one_change(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    before = await plan(stub, todo("a"), todo("b", "a"), todo("c", "a", "b"))

    removed = await stub.RemoveTodo(pb.RemoveTodoRequest(session_id="s", todo_id="a"))
    after = await listed(stub)

    assert removed.revision == before.revision + 1
    assert [list(t.blocked_by) for t in after.todos] == [[], ["b"]]


async def test_a_ready_read_keeps_pending_unowned_todos_whose_blockers_are_finished(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await plan(
        stub,
        todo("done", status=DONE),
        todo("dropped", status=CANCELLED),
        todo("free", "done", "dropped"),
        todo("waiting", "free"),
        todo("mine", owner="ann"),
    )

    assert [t.id for t in (await listed(stub, ready=True)).todos] == ["free"]
    assert [t.id for t in (await listed(stub, owner="ann")).todos] == ["mine"]
    assert [list(t.blocks) for t in (await listed(stub, ready=True)).todos] == [["waiting"]]


async def test_claiming_without_an_id_takes_the_first_ready_todo_then_answers_nothing_ready(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await plan(stub, todo("a"), todo("b", "a"))

    first = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", owner="w1"))
    second = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", owner="w2"))

    assert (first.todo.id, first.todo.owner, first.todo.status, first.changed) == ("a", "w1", WORKING, True)
    assert (second.HasField("todo"), second.changed, second.revision) == (False, False, first.revision)


async def test_claim_refusals_say_who_holds_it_which_blockers_wait_and_what_status_it_has(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await plan(stub, todo("held", status=WORKING, owner="w1"), todo("waiting", "held"), todo("done", status=DONE))

    taken = await failure(stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", todo_id="held", owner="w2")))
    blocked = await failure(stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", todo_id="waiting", owner="w2")))
    finished = await failure(stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", todo_id="done", owner="w2")))

    assert {taken[0], blocked[0], finished[0]} == {grpc.StatusCode.FAILED_PRECONDITION}
    assert (taken[2], blocked[2], finished[2]) == ("TODO_TAKEN", "TODO_BLOCKED", "TODO_NOT_PENDING")


async def test_a_retried_claim_request_id_returns_the_first_claim(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"), todo("b"))
    request = pb.ClaimTodoRequest(session_id="s", owner="w1", request_id="claim-1")

    first = await stub.ClaimTodo(request)
    retried = await stub.ClaimTodo(request)

    assert (retried.todo.id, retried.changed) == (first.todo.id, False)
    assert [t.owner for t in (await listed(stub)).todos] == ["w1", ""]


async def test_a_release_gives_the_todo_back_and_a_second_release_is_refused(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"))
    await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", owner="w1"))

    released = await stub.ReleaseTodo(pb.ReleaseTodoRequest(session_id="s", todo_id="a", owner="w1"))
    again = await failure(stub.ReleaseTodo(pb.ReleaseTodoRequest(session_id="s", todo_id="a", owner="w1")))

    assert (released.todo.status, released.todo.owner) == (PENDING, "")
    assert again[2] == "CLAIM_NOT_HELD"


async def test_a_lease_not_renewed_lapses_as_one_change_with_the_lease_origin(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"))
    claimed = await stub.ClaimTodo(
        pb.ClaimTodoRequest(session_id="s", owner="w1", lease_duration=duration_pb2.Duration(seconds=1))
    )
    watch = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=claimed.revision))
    try:
        lapse = await watch.read()
    finally:
        watch.cancel()

    assert (lapse.origin, lapse.revision, lapse.todo_id) == ("sessiontodo:lease", claimed.revision + 1, "a")
    assert (lapse.todos[0].status, lapse.todos[0].owner, lapse.todos[0].HasField("lease_expires_at")) == (
        PENDING,
        "",
        False,
    )


async def test_a_renewed_lease_is_still_held_after_its_first_deadline(stub: pb_grpc.TodoServiceStub) -> None:
    await plan(stub, todo("a"))
    lease = duration_pb2.Duration(seconds=2)
    claimed = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", owner="w1", lease_duration=lease))
    longer = duration_pb2.Duration(seconds=3)
    renewed = await stub.RenewClaim(
        pb.RenewClaimRequest(session_id="s", todo_id="a", owner="w1", lease_duration=longer)
    )

    assert renewed.todo.lease_expires_at.ToNanoseconds() > claimed.todo.lease_expires_at.ToNanoseconds()

    async def lapsed() -> bool:
        return (await listed(stub)).todos[0].owner == ""

    await eventually(lapsed)  # the renewed deadline, not the first one: the claim was held until then
    assert (await listed(stub)).revision == renewed.revision + 1


async def test_a_batch_claims_and_its_result_carries_the_claimed_todo_with_who_it_blocks(
    stub: pb_grpc.TodoServiceStub,
) -> None:
    await plan(stub, todo("a"), todo("b", "a"))
    claims = [pb.Write(claim_todo=pb.ClaimTodoRequest(session_id="s", owner=f"w{n}")) for n in range(2)]

    written = await stub.BatchWrite(pb.BatchWriteRequest(writes=claims))

    first, second = written.results
    assert (first.todo.id, first.todo.owner, list(first.todo.blocks), first.changed) == ("a", "w0", ["b"], True)
    assert (second.HasField("todo"), second.changed) == (False, False)

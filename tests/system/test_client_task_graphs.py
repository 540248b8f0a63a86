"""The typed client's task graph calls against a real server: typed results, the why of a refusal, filters."""

from __future__ import annotations

import pytest

from sessiontodo_client import (
    ClaimRefused,
    ClaimTodoWrite,
    FailedPrecondition,
    ReleaseTodoWrite,
    Todo,
    TodoClient,
    TodoStatus,
    UpdateTodoWrite,
)

GRAPH = [
    Todo(id="parser", content="Write the parser", description="LL(1)", active_form="Writing the parser"),
    Todo(id="tests", content="Write the tests", blocked_by=["parser"]),
    Todo(id="docs", content="Write the docs", blocked_by=["tests"]),
]


@pytest.fixture
async def graph(client: TodoClient) -> str:
    """A session whose list is parser ← tests ← docs (each waits for the one before)."""
    await client.create_session("graph")
    await client.replace_todos("graph", GRAPH)
    return "graph"


async def test_the_graph_fields_round_trip_and_blocks_is_derived(client: TodoClient, graph: str) -> None:
    parser, tests, _docs = (await client.get_todos(graph)).todos
    assert (parser.description, parser.active_form, parser.blocks) == ("LL(1)", "Writing the parser", ["tests"])
    assert tests.blocked_by == ["parser"]


async def test_a_claim_without_a_todo_takes_the_first_ready_one_with_its_lease(client: TodoClient, graph: str) -> None:
    claim = await client.claim_todo(graph, "w1", lease=60)
    assert claim.todo is not None
    assert (claim.todo.id, claim.todo.owner, claim.todo.status, claim.changed) == (
        "parser",
        "w1",
        TodoStatus.IN_PROGRESS,
        True,
    )
    assert claim.todo.lease_duration == 60
    assert claim.todo.lease_expires_at is not None


async def test_nothing_ready_is_a_claim_without_a_todo(client: TodoClient, graph: str) -> None:
    await client.claim_todo(graph, "w1")
    claim = await client.claim_todo(graph, "w2")
    assert (claim.nothing_ready, claim.changed) == (True, False)


async def test_a_taken_todo_is_refused_naming_its_owner(client: TodoClient, graph: str) -> None:
    await client.claim_todo(graph, "w1", "parser")
    with pytest.raises(ClaimRefused) as refused:
        await client.claim_todo(graph, "w2", "parser")
    assert isinstance(refused.value, FailedPrecondition)
    assert (refused.value.reason, refused.value.owner) == ("TODO_TAKEN", "w1")


async def test_a_blocked_todo_is_refused_naming_its_unfinished_blockers(client: TodoClient, graph: str) -> None:
    with pytest.raises(ClaimRefused) as refused:
        await client.claim_todo(graph, "w1", "tests")
    assert (refused.value.reason, refused.value.blocked_by) == ("TODO_BLOCKED", ["parser"])


async def test_a_release_by_someone_else_is_refused_and_by_the_owner_frees_the_todo(
    client: TodoClient, graph: str
) -> None:
    await client.claim_todo(graph, "w1")
    with pytest.raises(ClaimRefused) as refused:
        await client.release_todo(graph, "parser", "w2")
    assert (refused.value.reason, refused.value.owner) == ("CLAIM_NOT_HELD", "w1")
    released = await client.release_todo(graph, "parser", "w1")
    assert (released.todo.status, released.todo.owner) == (TodoStatus.PENDING, "")


async def test_reads_select_ready_todos_and_an_owners_todos(client: TodoClient, graph: str) -> None:
    await client.update_todo(graph, "tests", remove_blocked_by=["parser"])
    await client.claim_todo(graph, "w1", "parser")
    assert [todo.id for todo in (await client.get_todos(graph, ready=True)).todos] == ["tests"]
    assert [todo.id for todo in (await client.get_todos(graph, owner="w1")).todos] == ["parser"]
    assert [todo.id for todo in (await client.get_todos(graph, owner="")).todos] == ["tests", "docs"]


async def test_a_batch_carries_claims_and_releases(client: TodoClient, graph: str) -> None:
    claimed, released, linked = await client.batch_write(
        [
            ClaimTodoWrite(session_id=graph, owner="w1"),
            ReleaseTodoWrite(session_id=graph, todo_id="parser", owner="w1"),
            UpdateTodoWrite(session_id=graph, todo_id="docs", add_blocked_by=["parser"]),
        ]
    )
    assert claimed.todo is not None
    assert claimed.todo.owner == "w1"
    assert released.todo is not None
    assert released.todo.owner == ""
    assert linked.todo is not None
    assert linked.todo.blocked_by == ["tests", "parser"]

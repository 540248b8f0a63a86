"""The task-graph part of the TodoStore contract, on every storage engine alike (no gRPC): claims
and their refusals, leases that lapse only when they have run out at the moment of lapsing (an
acknowledged renewal always wins), the lease rules of other writes, and the dependency rules that
depend on the stored list (unknown blockers, cycles, removal stripping blockers in one change)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.errors import (
    ClaimNotHeld,
    InvalidArgument,
    TodoBlocked,
    TodoNotPending,
    TodoTaken,
)
from sessiontodo_server.domain.mutations import (
    AddTodo,
    ClaimTodo,
    LapseLease,
    Mutation,
    ReleaseTodo,
    RemoveTodo,
    RenewClaim,
    ReplaceTodos,
    UpdateTodo,
)
from sessiontodo_server.domain.store import SessionState, TodoStore, Written
from sessiontodo_server.domain.values import GraphChanges, Limits, SessionInfo, Todo, TodoStatus
from tests.contract.test_store_contract import ENGINES, _opened

PENDING, WORKING, DONE = TodoStatus.PENDING, TodoStatus.IN_PROGRESS, TodoStatus.COMPLETED


@pytest.fixture(params=ENGINES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TodoStore]:
    async with _opened(request.param, tmp_path) as opened:
        await opened.create_session("s", SessionInfo(), 10, "test")
        yield opened


async def _write(store: TodoStore, mutation: Mutation, now: float = 100.0, request_id: str = "") -> Written:
    return await store.write(Write("s", mutation), WriteContext(request_id, "test", now, Limits()))


async def _plan(store: TodoStore, *todos: Todo) -> None:
    await _write(store, ReplaceTodos(todos))


async def _state(store: TodoStore) -> SessionState:
    state = await store.get("s")
    assert state is not None
    return state


def _todo(todo_id: str, *blocked_by: str, status: TodoStatus = PENDING, owner: str = "") -> Todo:
    return Todo(todo_id, f"do {todo_id}", status, owner=owner, blocked_by=blocked_by)


async def test_a_claim_without_an_id_takes_the_first_ready_todo_in_list_order(store: TodoStore) -> None:
    await _plan(store, _todo("a", status=DONE), _todo("b", "c"), _todo("c"), _todo("d", "a"))

    written = await _write(store, ClaimTodo("", "w1", 30.0, 100.0))

    assert written.change is not None
    assert written.change.todo_id == "c"
    assert written.result is not None
    assert (written.result.todo.owner, written.result.todo.status) == ("w1", WORKING)
    assert written.result.todo.lease_expires_at == 130.0


async def test_a_claim_with_nothing_ready_changes_nothing(store: TodoStore) -> None:
    await _plan(store, _todo("a", status=WORKING, owner="w1"), _todo("b", "a"))

    written = await _write(store, ClaimTodo("", "w2", None, 100.0))

    assert (written.change, written.state.revision) == (None, 1)


async def test_claim_refusals_name_the_owner_the_blockers_and_the_status(store: TodoStore) -> None:
    await _plan(store, _todo("held", status=WORKING, owner="w1"), _todo("waiting", "held"), _todo("x", status=DONE))

    with pytest.raises(TodoTaken) as taken:
        await _write(store, ClaimTodo("held", "w2", None, 100.0))
    with pytest.raises(TodoBlocked) as blocked:
        await _write(store, ClaimTodo("waiting", "w2", None, 100.0))
    with pytest.raises(TodoNotPending) as finished:
        await _write(store, ClaimTodo("x", "w2", None, 100.0))

    assert (taken.value.owner, blocked.value.blocked_by, finished.value.status) == ("w1", "held", "completed")
    assert (await _state(store)).revision == 1


async def test_a_retried_claim_request_id_returns_the_first_claim_and_claims_nothing_more(store: TodoStore) -> None:
    await _plan(store, _todo("a"), _todo("b"))
    claim = ClaimTodo("", "w1", None, 100.0, "fingerprint")

    first = await _write(store, claim, request_id="r1")
    again = await _write(store, claim, request_id="r1")

    assert again.change is None
    assert again.result is not None
    assert first.result is not None
    assert (again.result.todo.id, again.result.fingerprint) == (first.result.todo.id, "fingerprint")
    assert [todo.owner for todo in (await _state(store)).todos] == ["w1", ""]


async def test_renewing_or_releasing_a_claim_one_does_not_hold_is_refused(store: TodoStore) -> None:
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))

    with pytest.raises(ClaimNotHeld) as renewal:
        await _write(store, RenewClaim("a", "w2", None, 110.0))
    with pytest.raises(ClaimNotHeld):
        await _write(store, ReleaseTodo("a", "w2"))

    assert (renewal.value.owner, renewal.value.status) == ("w1", "in_progress")


async def test_a_release_makes_the_todo_pending_unowned_and_unleased(store: TodoStore) -> None:
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))

    written = await _write(store, ReleaseTodo("a", "w1"))

    assert written.state.todos == (_todo("a"),)


async def test_a_lease_lapses_once_it_has_run_out(store: TodoStore) -> None:
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))

    early = await _write(store, LapseLease("a", 129.0))
    lapsed = await _write(store, LapseLease("a", 130.0))

    assert early.change is None
    assert lapsed.change is not None
    assert lapsed.state.todos == (_todo("a"),)


async def test_a_lapse_of_a_todo_removed_after_its_claim_changes_nothing(store: TodoStore) -> None:
    """The lease index still hands out a removed todo's lease when it comes due; its lapse is then
    nothing to do, never an error that would stop the lapses due after it."""
    await _plan(store, _todo("a"), _todo("b"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))
    await _write(store, RemoveTodo("a"))

    written = await _write(store, LapseLease("a", 130.0), now=130.0)

    assert written.change is None
    assert written.state.todos == (_todo("b"),)


async def test_a_lapse_found_due_before_a_renewal_changes_nothing_after_it(store: TodoStore) -> None:
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))
    await _write(store, RenewClaim("a", "w1", None, 125.0), now=125.0)

    written = await _write(store, LapseLease("a", 131.0), now=131.0)

    assert written.change is None
    assert (await _state(store)).todos[0].owner == "w1"


async def test_a_renewal_in_flight_when_its_lease_lapses_is_never_lost_once_acknowledged(store: TodoStore) -> None:
    """The renewal is accepted first; a store behind a network may still apply the lapse first:
    then the renewal is refused (ClaimNotHeld), never acknowledged."""
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))
    renewal = asyncio.create_task(_write(store, RenewClaim("a", "w1", None, 129.5), now=129.5))
    await asyncio.sleep(0)

    lapse = await _write(store, LapseLease("a", 130.5), now=130.5)
    try:
        await renewal
    except ClaimNotHeld:
        assert lapse.change is not None
        return
    assert lapse.change is None
    assert (await _state(store)).todos[0].lease_expires_at == 159.5


async def test_completing_a_leased_todo_ends_its_lease(store: TodoStore) -> None:
    await _plan(store, _todo("a"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))

    written = await _write(store, UpdateTodo("a", status=DONE))

    assert [(t.status, t.owner, t.lease_expires_at) for t in written.state.todos] == [(DONE, "w1", 0.0)]


async def test_a_replace_keeps_the_lease_of_a_todo_that_stays_in_progress_with_its_owner(store: TodoStore) -> None:
    await _plan(store, _todo("a"), _todo("b"))
    await _write(store, ClaimTodo("a", "w1", 30.0, 100.0))

    written = await _write(store, ReplaceTodos((_todo("a", status=WORKING, owner="w1"), _todo("c"))))

    assert [(t.id, t.lease_expires_at) for t in written.state.todos] == [("a", 130.0), ("c", 0.0)]


async def test_an_added_todo_naming_no_todo_of_the_list_is_refused_with_its_field_path(store: TodoStore) -> None:
    await _plan(store, _todo("a"))

    with pytest.raises(InvalidArgument) as refused:
        await _write(store, AddTodo(_todo("b", "a", "nope"), None, True))

    assert [field for field, _ in refused.value.violations] == ["todo.blocked_by[1]"]


async def test_an_update_closing_a_cycle_is_refused_with_its_field_path(store: TodoStore) -> None:
    await _plan(store, _todo("a"), _todo("b", "a"), _todo("c", "b"))

    with pytest.raises(InvalidArgument) as refused:
        await _write(store, UpdateTodo("a", graph=GraphChanges(add_blocked_by=("b", "c"))))

    [(field, why)] = refused.value.violations
    assert field in {"add_blocked_by[0]", "add_blocked_by[1]"}
    assert why.startswith("closes a cycle")
    assert (await _state(store)).revision == 1


async def test_removing_a_todo_strips_it_from_every_blocked_by_in_one_change(store: TodoStore) -> None:
    await _plan(store, _todo("a"), _todo("b", "a"), _todo("c", "b", "a"))

    written = await _write(store, RemoveTodo("a"))

    assert written.change is not None
    assert written.change.revision == 2
    assert [(t.id, t.blocked_by) for t in written.change.todos] == [("b", ()), ("c", ("b",))]
    assert (await _state(store)).todos == written.change.todos

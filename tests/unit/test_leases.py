"""The lease index (``domain/leases.py``): deadlines learnt from changes, a renewed lease's old
deadline skipped, each due lease handed out once."""

from __future__ import annotations

from sessiontodo_server.domain.leases import LeaseIndex
from sessiontodo_server.domain.values import Change, ChangeKind, Todo, TodoStatus


def leased(todo_id: str, deadline: float) -> Todo:
    return Todo(todo_id, "x", TodoStatus.IN_PROGRESS, owner="w", lease_expires_at=deadline, lease_seconds=10.0)


def claimed(session_id: str, todo: Todo, *others: Todo) -> Change:
    return Change(session_id, ChangeKind.TODO_UPDATED, 1, (*others, todo), todo_id=todo.id)


def test_a_claims_lease_comes_due_at_its_deadline_once() -> None:
    index = LeaseIndex()
    index.note(claimed("s", leased("a", 110.0), Todo("b", "y")))

    assert index.due(109.0) == []
    assert index.due(110.0) == [("s", "a")]
    assert index.due(200.0) == []


def test_a_renewed_lease_comes_due_at_its_new_deadline_only() -> None:
    index = LeaseIndex()
    index.note(claimed("s", leased("a", 110.0)))
    index.note(claimed("s", leased("a", 130.0)))

    assert index.due(120.0) == []
    assert index.due(130.0) == [("s", "a")]


def test_a_reset_list_brings_every_lease_it_holds() -> None:
    index = LeaseIndex()
    index.note(Change("s", ChangeKind.RESET, 5, (leased("a", 110.0), leased("b", 105.0))))

    assert index.due(120.0) == [("s", "b"), ("s", "a")]


def test_an_update_without_a_lease_indexes_nothing() -> None:
    index = LeaseIndex()
    index.note(claimed("s", Todo("a", "x")))

    assert len(index) == 0


def test_a_lease_that_could_not_be_lapsed_comes_due_again() -> None:
    index = LeaseIndex()
    index.note(claimed("s", leased("a", 110.0)))
    assert index.due(110.0) == [("s", "a")]

    index.again("s", "a", 111.0)

    assert index.due(111.0) == [("s", "a")]

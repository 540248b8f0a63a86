"""Claims and leases as pure list operations (``domain/claims.py``): who may claim what, the
reasons for a refusal, and leases that lapse only when they have really run out."""

from __future__ import annotations

import pytest

from sessiontodo_server.domain import claims
from sessiontodo_server.domain.errors import ClaimNotHeld, InvalidArgument, TodoBlocked, TodoNotPending, TodoTaken
from sessiontodo_server.domain.values import Todo, TodoStatus

PENDING, WORKING, DONE = TodoStatus.PENDING, TodoStatus.IN_PROGRESS, TodoStatus.COMPLETED


def todo(todo_id: str, *blocked_by: str, status: TodoStatus = PENDING, owner: str = "") -> Todo:
    return Todo(todo_id, f"do {todo_id}", status, owner=owner, blocked_by=blocked_by)


LIST = (todo("a", status=DONE), todo("b", "c"), todo("c"), todo("d", "a"))


def test_claiming_without_a_todo_id_takes_the_first_ready_todo_in_list_order() -> None:
    claimed = claims.claim(LIST, "s", "", "w1", None, now=100.0)

    assert claimed.todo is not None
    assert (claimed.todo.id, claimed.todo.owner, claimed.todo.status) == ("c", "w1", WORKING)
    assert claimed.todos[claimed.position] is claimed.todo
    assert claimed.changed


def test_when_nothing_is_ready_the_claim_answers_none_and_changes_nothing() -> None:
    todos = (todo("a", status=WORKING, owner="w1"), todo("b", "a"))

    claimed = claims.claim(todos, "s", "", "w2", None, now=100.0)

    assert (claimed.todo, claimed.todos, claimed.changed) == (None, todos, False)


def test_a_named_blocked_todo_is_refused_with_its_unfinished_blockers() -> None:
    with pytest.raises(TodoBlocked) as refused:
        claims.claim(LIST, "s", "b", "w1", None, now=100.0)

    assert refused.value.blocked_by == "c"


def test_a_named_todo_another_owner_holds_is_refused_with_that_owner() -> None:
    todos = (todo("a", status=WORKING, owner="w1"),)

    with pytest.raises(TodoTaken) as refused:
        claims.claim(todos, "s", "a", "w2", None, now=100.0)

    assert refused.value.owner == "w1"


def test_a_named_finished_todo_is_refused_as_not_pending() -> None:
    with pytest.raises(TodoNotPending) as refused:
        claims.claim(LIST, "s", "a", "w1", None, now=100.0)

    assert refused.value.status == "completed"


def test_claiming_again_ones_own_todo_changes_nothing() -> None:
    todos = (todo("a", status=WORKING, owner="w1"),)

    claimed = claims.claim(todos, "s", "a", "w1", None, now=100.0)

    assert (claimed.todos, claimed.changed) == (todos, False)


def test_a_lease_runs_from_the_claim() -> None:
    claimed = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0)

    assert claimed.todo is not None
    assert (claimed.todo.lease_expires_at, claimed.todo.lease_seconds) == (130.0, 30.0)


def test_a_renewal_moves_the_deadline_by_the_claims_own_duration() -> None:
    todos = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos

    _, renewed = claims.renew(todos, "s", "c", "w1", None, now=120.0)

    assert renewed.lease_expires_at == 150.0


def test_renewing_a_claim_one_does_not_hold_is_refused_with_how_it_stands() -> None:
    todos = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos

    with pytest.raises(ClaimNotHeld) as refused:
        claims.renew(todos, "s", "c", "w2", None, now=120.0)

    assert (refused.value.owner, refused.value.status) == ("w1", "in_progress")


def test_a_release_makes_the_todo_pending_unowned_and_unleased() -> None:
    todos = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos

    _, released = claims.release(todos, "s", "c", "w1")

    assert released == todo("c")


def test_a_lease_that_ran_out_lapses_the_todo_back_to_pending() -> None:
    todos = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos

    lapsed = claims.lapse(todos, "c", now=130.0)

    assert lapsed is not None
    assert lapsed[1] == todo("c")


def test_a_lease_renewed_after_it_was_found_due_does_not_lapse() -> None:
    todos = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos
    due = claims.leases(todos)
    renewed, _ = claims.renew(todos, "s", "c", "w1", None, now=129.0)

    assert due == [(130.0, "c")]
    assert claims.lapse(renewed, "c", now=130.0) is None


def test_an_update_that_changes_the_owner_or_leaves_in_progress_ends_the_lease() -> None:
    leased = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todo
    assert leased is not None

    handed_over = claims.after_update(leased, leased._replace(owner="w2"), owner_given=True, now=110.0)
    finished = claims.after_update(leased, leased._replace(status=DONE), owner_given=False, now=110.0)

    assert (handed_over.lease_expires_at, finished.lease_expires_at) == (0.0, 0.0)


def test_an_update_naming_the_leases_owner_renews_it() -> None:
    leased = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todo
    assert leased is not None

    renewed = claims.after_update(leased, leased, owner_given=True, now=110.0)

    assert renewed.lease_expires_at == 140.0


def test_a_replace_keeps_the_lease_of_a_todo_that_keeps_its_owner_and_status() -> None:
    before = claims.claim(LIST, "s", "c", "w1", 30.0, now=100.0).todos
    replacing = tuple(t._replace(lease_expires_at=0.0, lease_seconds=0.0) for t in before)

    after = claims.carried_over(before, replacing)

    assert after == before


def test_an_owner_is_required_and_a_lease_between_a_second_and_a_day() -> None:
    with pytest.raises(InvalidArgument) as refused:
        claims.check_claim(" ", 0.5, max_owner_length=128)

    assert [field for field, _ in refused.value.violations] == ["owner", "lease_duration"]

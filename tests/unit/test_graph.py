"""The dependency rules of a task graph (``domain/graph.py``): field paths that name the culprit,
cycles found in linear time, readiness with cancelled blockers finished, the derived ``blocks``."""

from __future__ import annotations

import pytest

from sessiontodo_server.domain import graph
from sessiontodo_server.domain.errors import InvalidArgument
from sessiontodo_server.domain.todos import replace_all
from sessiontodo_server.domain.values import NO_ENTRIES, DraftFields, Limits, Todo, TodoStatus

DONE, CANCELLED, PENDING, WORKING = (
    TodoStatus.COMPLETED,
    TodoStatus.CANCELLED,
    TodoStatus.PENDING,
    TodoStatus.IN_PROGRESS,
)


def todo(todo_id: str, *blocked_by: str, status: TodoStatus = PENDING, owner: str = "") -> Todo:
    return Todo(todo_id, f"do {todo_id}", status, owner=owner, blocked_by=blocked_by)


def violations(*todos: Todo, max_blockers: int = 64) -> list[tuple[str, str]]:
    return graph.list_violations(todos, max_blockers)


def test_a_list_whose_blockers_come_earlier_is_valid() -> None:
    assert violations(todo("a"), todo("b", "a"), todo("c", "a", "b")) == []


def test_a_list_with_blockers_later_in_the_list_but_no_cycle_is_valid() -> None:
    assert violations(todo("c", "b"), todo("b", "a"), todo("a")) == []


def test_an_unknown_blocker_is_named_by_its_field_path() -> None:
    [(field, why)] = violations(todo("a"), todo("b", "a", "zz"))

    assert field == "todos[1].blocked_by[1]"
    assert "'zz' names no todo" in why


def test_a_todo_blocking_itself_is_named() -> None:
    [(field, why)] = violations(todo("a"), todo("b", "b"))

    assert (field, why) == ("todos[1].blocked_by[0]", "a todo cannot block itself")


def test_a_blocker_given_twice_is_named_at_its_second_place() -> None:
    [(field, _)] = violations(todo("a"), todo("b", "a", "a"))

    assert field == "todos[1].blocked_by[1]"


def test_too_many_blockers_are_refused_for_the_todo() -> None:
    [(field, why)] = violations(todo("a"), todo("b"), todo("c", "a", "b"), max_blockers=1)

    assert (field, why) == ("todos[2].blocked_by", "at most 1 blockers per todo")


def test_a_cycle_is_named_by_the_edge_that_closes_it() -> None:
    [(field, why)] = violations(todo("a", "c"), todo("b", "a"), todo("c", "b"))

    assert field in {"todos[0].blocked_by[0]", "todos[1].blocked_by[0]", "todos[2].blocked_by[0]"}
    assert why.startswith("closes a cycle: ")


def test_a_cycle_far_from_the_start_is_found() -> None:
    chain = [todo(f"t{n}", f"t{n + 1}") for n in range(999)] + [todo("t999", "t500")]

    [(field, _)] = violations(*chain)

    assert field == "todos[999].blocked_by[0]"


def test_the_prefix_starts_every_field_path() -> None:
    [(field, _)] = graph.list_violations((todo("a", "x"),), 64, "writes[2].replace_todos.")

    assert field == "writes[2].replace_todos.todos[0].blocked_by[0]"


def test_check_list_raises_invalid_argument_with_every_violation() -> None:
    with pytest.raises(InvalidArgument) as raised:
        graph.check_list((todo("a", "a"), todo("b", "q")), 64)

    assert [field for field, _ in raised.value.violations] == ["todos[0].blocked_by[0]", "todos[1].blocked_by[0]"]


def test_adding_a_blocker_that_waits_on_the_todo_closes_a_cycle() -> None:
    todos = (todo("a"), todo("b", "a"), todo("c", "b"))

    assert graph.cycle_through(todos, "a", ["c"]) == ["a", "c", "b", "a"]


def test_adding_an_independent_blocker_closes_no_cycle() -> None:
    todos = (todo("a"), todo("b", "a"), todo("c"))

    assert graph.cycle_through(todos, "b", ["c"]) is None


def test_a_pending_unowned_todo_whose_blockers_are_finished_is_ready() -> None:
    todos = (todo("a", status=DONE), todo("b", status=CANCELLED), todo("c", "a", "b"))

    assert graph.select(todos, ready=True) == (todos[2],)


def test_a_cancelled_blocker_counts_as_finished() -> None:
    todos = (todo("a", status=CANCELLED), todo("b", "a"))

    assert graph.unfinished_blockers(todos[1], todos) == []


def test_an_unfinished_blocker_an_owner_or_a_started_todo_is_not_ready() -> None:
    todos = (todo("a", status=WORKING, owner="w1"), todo("b", "a"), todo("c", owner="w2"), todo("d"))

    assert [t.id for t in graph.select(todos, ready=True)] == ["d"]


def test_an_owner_filter_keeps_that_owners_todos_and_the_empty_owner_the_unowned() -> None:
    todos = (todo("a", owner="w1"), todo("b"), todo("c", owner="w1"))

    assert [t.id for t in graph.select(todos, owner="w1")] == ["a", "c"]
    assert [t.id for t in graph.select(todos, owner="")] == ["b"]


def test_blocks_lists_the_waiting_todos_in_list_order() -> None:
    todos = (todo("a"), todo("c", "a"), todo("b", "a"))

    assert graph.blocks(todos) == {"a": ["c", "b"]}


def test_removing_a_todo_strips_it_from_every_blocked_by() -> None:
    todos = (todo("b", "a", "x"), todo("c", "x"), todo("d"))

    stripped = graph.without_blocker(todos, "x")

    assert [t.blocked_by for t in stripped] == [("a",), (), ()]
    assert stripped[2] is todos[2]


def drafts(*todos: tuple[str, tuple[str, ...]]) -> list[DraftFields]:
    return [(todo_id, f"do {todo_id}", None, None, NO_ENTRIES, "", "", "", blocked_by) for todo_id, blocked_by in todos]


def test_a_replace_keeps_blockers_named_later_in_the_list_when_they_close_no_cycle() -> None:
    todos = replace_all(drafts(("c", ("b",)), ("b", ("a",)), ("a", ())), Limits())

    assert [todo.blocked_by for todo in todos] == [("b",), ("a",), ()]


@pytest.mark.parametrize(
    ("listed", "field"),
    [
        ((("a", ("b",)), ("b", ("a",))), "todos[1].blocked_by[0]"),
        ((("a", ()), ("b", ("b",))), "todos[1].blocked_by[0]"),
        ((("a", ("zz",)), ("b", ())), "todos[0].blocked_by[0]"),
        ((("a", ()), ("b", ("a", "a"))), "todos[1].blocked_by[1]"),
    ],
    ids=["cycle", "itself", "unknown", "twice"],
)
def test_a_replace_breaking_a_dependency_rule_names_the_culprit(
    listed: tuple[tuple[str, tuple[str, ...]], ...], field: str
) -> None:
    with pytest.raises(InvalidArgument) as raised:
        replace_all(drafts(*listed), Limits())

    assert [culprit for culprit, _ in raised.value.violations] == [field]


def test_a_replace_with_more_blockers_than_the_limit_is_refused() -> None:
    with pytest.raises(InvalidArgument) as raised:
        replace_all(drafts(("a", ()), ("b", ()), ("c", ("a", "b"))), Limits(max_blockers_per_todo=1))

    assert [culprit for culprit, _ in raised.value.violations] == ["todos[2].blocked_by"]

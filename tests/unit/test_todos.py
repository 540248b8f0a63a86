"""The pure list operations, without storage or gRPC."""

from __future__ import annotations

import pytest

from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.errors import InvalidArgument, LimitExceeded, TodoNotFound
from sessiontodo_server.domain.values import Limits, Todo, TodoDraft, TodoPriority, TodoStatus

LIMITS = Limits(max_todos_per_session=3, max_content_length=10)
LIST = (Todo("a", "alpha"), Todo("b", "beta"))


def test_replace_all_materializes_defaults_and_generated_ids() -> None:
    (todo,) = ops.replace_all([TodoDraft(content="x")], LIMITS)
    assert todo.id.startswith("todo_")
    assert (todo.status, todo.priority) == (TodoStatus.PENDING, TodoPriority.MEDIUM)


def test_replace_all_reports_every_violation_at_once() -> None:
    drafts = [TodoDraft(id="d", content=""), TodoDraft(id="d", content="x" * 11, status="done", priority="urgent")]
    with pytest.raises(InvalidArgument) as raised:
        ops.replace_all(drafts, LIMITS)
    assert [field for field, _ in raised.value.violations] == [
        "todos[0].content",
        "todos[1].status",
        "todos[1].priority",
        "todos[1].content",
        "todos[1].id",
    ]


def test_insert_into_a_full_list_is_a_limit() -> None:
    full = (*LIST, Todo("c", "gamma"))
    with pytest.raises(LimitExceeded):
        ops.insert(full, TodoDraft(content="more"), None, LIMITS)


def test_update_returns_the_same_tuple_when_nothing_changes() -> None:
    todos, todo = ops.update(LIST, "s", "a", "alpha", "pending", None, LIMITS)
    assert todos is LIST
    assert todo == LIST[0]


def test_update_and_remove_of_an_unknown_todo_are_not_found() -> None:
    with pytest.raises(TodoNotFound):
        ops.update(LIST, "s", "zzz", "x", None, None, LIMITS)
    with pytest.raises(TodoNotFound):
        ops.remove(LIST, "s", "zzz")


def test_remove_keeps_the_order_of_the_rest() -> None:
    assert ops.remove((*LIST, Todo("c", "gamma")), "s", "b") == (LIST[0], Todo("c", "gamma"))


def test_the_list_limit_counts_utf8_bytes_and_an_update_may_not_outgrow_it() -> None:
    assert ops.todo_bytes(Todo("t", "abc")) == 1 + 3
    assert ops.todo_bytes(Todo("t", "é" * 10)) == 1 + 20  # two bytes each in UTF-8
    limits = Limits(max_list_bytes=30)
    todos = (Todo("a", "x" * 10), Todo("b", "y"))
    grown, _ = ops.update(todos, "s", "b", "é" * 9, None, None, limits)  # 1 + 18 bytes: 30 in all
    with pytest.raises(InvalidArgument):
        ops.update(grown, "s", "b", "é" * 10, None, None, limits)  # 32 in all
    shrunk, _ = ops.update(grown, "s", "a", "x", None, None, limits)
    assert [todo.content for todo in shrunk] == ["x", "é" * 9]

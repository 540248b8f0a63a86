"""``sessiontodo_claude.mapping`` and ``merge``: one shape for tasks and todos, merged field by field."""

from __future__ import annotations

from sessiontodo_claude.mapping import (
    changed_fields,
    item_from_task,
    item_from_todo,
    task_changes,
    task_from_item,
    todo_from_item,
)
from sessiontodo_claude.merge import merge
from sessiontodo_claude.tasks import Task, decode, encode
from sessiontodo_client import Todo, TodoStatus


def test_a_task_and_its_todo_are_the_same_item() -> None:
    task = Task(
        id="2",
        subject="Test parser",
        description="Edge cases",
        active_form="Testing parser",
        owner="bob",
        status="in_progress",
        blocked_by=("1",),
        metadata={"points": 3, "tag": "x", "sessiontodo.todo_id": "todo_b"},
    )
    todo = Todo(
        id="todo_b",
        content="Test parser",
        description="Edge cases",
        active_form="Testing parser",
        owner="bob",
        status=TodoStatus.IN_PROGRESS,
        blocked_by=["todo_a"],
        metadata={"points": "3", "tag": "x", "claude.task_id": "2", "claude.source": "host:/tasks"},
    )
    assert item_from_task(task, {"1": "todo_a"}) == item_from_todo(todo)


def test_a_cancelled_todo_is_a_completed_task_that_reads_back_cancelled() -> None:
    item = item_from_todo(Todo(id="t", content="Drop it", status=TodoStatus.CANCELLED))
    task = task_from_item(item, "t")
    assert (task.status, task.metadata["sessiontodo.status"]) == ("completed", "cancelled")
    assert item_from_task(task, {}) == item


def test_reopening_a_cancelled_task_clears_the_kept_status() -> None:
    task = Task(id="1", subject="Drop it", status="completed", metadata={"sessiontodo.status": "cancelled"})
    item = item_from_task(task, {}) | {"status": "pending"}
    top, metadata = task_changes(task, item, {"status"})
    assert (top, metadata) == ({"status": "pending"}, {"sessiontodo.status": None})


def test_claudes_own_json_values_are_not_rewritten_when_their_text_is_unchanged() -> None:
    task = Task(id="1", subject="S", metadata={"points": 3})
    item = item_from_task(task, {}) | {"metadata.points": "3", "metadata.new": "yes"}
    assert task_changes(task, item, {"metadata.points", "metadata.new"}) == ({}, {"new": "yes"})


def test_a_new_todo_names_its_task_and_where_the_task_lives() -> None:
    todo = todo_from_item(item_from_task(Task(id="4", subject="S"), {}), task_id="4", source="laptop:/h/tasks/x")
    assert todo.metadata == {"claude.task_id": "4", "claude.source": "laptop:/h/tasks/x"}


def test_a_field_changed_on_one_side_takes_that_sides_value() -> None:
    base = {"content": "A", "owner": "", "metadata.k": "1"}
    claude = {"content": "B", "owner": "", "metadata.k": "1"}
    service = {"content": "A", "owner": "carol"}
    assert merge(base, claude, service, prefer="claude") == {"content": "B", "owner": "carol"}


def test_a_field_both_sides_changed_takes_the_preferred_sides_value() -> None:
    base = {"content": "A"}
    assert merge(base, {"content": "B"}, {"content": "C"}, prefer="claude") == {"content": "B"}
    assert merge(base, {"content": "B"}, {"content": "C"}, prefer="sessiontodo") == {"content": "C"}


def test_without_a_last_agreement_every_difference_goes_to_the_preferred_side() -> None:
    assert merge(None, {"content": "B", "owner": "x"}, {"content": "C", "owner": "x"}, "sessiontodo") == {
        "content": "C",
        "owner": "x",
    }


def test_changed_fields_counts_a_missing_key_as_changed() -> None:
    assert changed_fields({"metadata.k": "1", "content": "A"}, {"content": "A"}) == {"metadata.k"}


def test_a_task_is_encoded_as_claude_writes_it() -> None:
    task = Task(id="1", subject="Ünïcode", owner="bob", blocked_by=("2",))
    text = encode(task.to_json())
    assert text.startswith('{\n  "id": "1",\n  "subject": "Ünïcode",\n  "description": "",\n  "owner": "bob"')
    assert decode(text) == task

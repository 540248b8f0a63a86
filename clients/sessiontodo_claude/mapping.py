"""Task ↔ todo, field by field, through one neutral shape both sides are compared in (pure).

An ``Item`` is a flat mapping of field names to values, the same whichever side it was read from:
``content`` (Claude's ``subject``), ``description``, ``active_form`` (``activeForm``), ``owner``,
``status``, ``blocked_by`` (sessiontodo's todo ids, sorted) and one ``metadata.<key>`` entry per
metadata key. Flat, so that two sides are merged field by field and metadata key by key.

- Status: Claude stores only ``pending`` / ``in_progress`` / ``completed``. A cancelled todo is a
  completed task with ``sessiontodo.status: "cancelled"`` in its metadata, read back as cancelled
  while the task stays completed.
- Metadata: sessiontodo's values are strings, Claude's any JSON. A non-string value is carried as
  its JSON text; written back, a key is only set when its text differs, so Claude's own values
  survive a round trip.
- Ids: the task's ``metadata["sessiontodo.todo_id"]`` names its todo; a todo made from a Claude task
  carries ``claude.task_id`` and ``claude.source`` (which machine's list) in its metadata. These keys
  are the bridge's: they are not carried across.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sessiontodo_claude.tasks import ClaudeStatus, Task
from sessiontodo_client import Todo, TodoStatus

Item = dict[str, Any]

TODO_ID_KEY = "sessiontodo.todo_id"
"""The task's metadata key naming its todo."""
STATUS_KEY = "sessiontodo.status"
"""The task's metadata key keeping a status Claude cannot store (``cancelled``)."""
TASK_ID_KEY = "claude.task_id"
SOURCE_KEY = "claude.source"
"""The todo's metadata keys naming the task it was made from: its id and the list it is in (``host:path``)."""
METADATA = "metadata."

_TASK_SIDE_KEYS = (TODO_ID_KEY, STATUS_KEY)
_TODO_SIDE_KEYS = (TASK_ID_KEY, SOURCE_KEY)

SCALARS = ("content", "description", "active_form", "owner", "status")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def todo_id_of(task: Task) -> str:
    """The todo a task is paired with ("" when it was never carried to sessiontodo)."""
    value = task.metadata.get(TODO_ID_KEY)
    return value if isinstance(value, str) else ""


def item_from_task(task: Task, todo_ids: Mapping[str, str]) -> Item:
    """A task as an item; ``todo_ids`` maps task ids to todo ids (blockers without a todo are left out)."""
    cancelled = task.status == "completed" and task.metadata.get(STATUS_KEY) == TodoStatus.CANCELLED.value
    item: Item = {
        "content": task.subject,
        "description": task.description,
        "active_form": task.active_form or "",
        "owner": task.owner or "",
        "status": TodoStatus.CANCELLED.value if cancelled else task.status,
        "blocked_by": tuple(sorted(todo_ids[blocker] for blocker in task.blocked_by if blocker in todo_ids)),
    }
    for key, value in task.metadata.items():
        if key not in _TASK_SIDE_KEYS:
            item[METADATA + key] = _text(value)
    return item


def item_from_todo(todo: Todo) -> Item:
    status = todo.status.value if isinstance(todo.status, TodoStatus) else TodoStatus.PENDING.value
    item: Item = {
        "content": todo.content,
        "description": todo.description,
        "active_form": todo.active_form,
        "owner": todo.owner,
        "status": status,
        "blocked_by": tuple(sorted(todo.blocked_by)),
    }
    for key, value in todo.metadata.items():
        if key not in _TODO_SIDE_KEYS:
            item[METADATA + key] = value
    return item


def claude_status(status: str) -> ClaudeStatus:
    """The status Claude stores for a sessiontodo status (cancelled: completed, kept in metadata)."""
    if status == TodoStatus.IN_PROGRESS.value:
        return "in_progress"
    if status in (TodoStatus.COMPLETED.value, TodoStatus.CANCELLED.value):
        return "completed"
    return "pending"


def metadata_of(item: Item) -> dict[str, str]:
    return {key[len(METADATA) :]: value for key, value in item.items() if key.startswith(METADATA)}


def changed_fields(before: Item, after: Item) -> set[str]:
    """The fields (``metadata.<key>`` entries included) whose values differ; a missing key counts as None."""
    return {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}


def task_changes(task: Task, item: Item, fields: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The top-level fields and metadata keys to write into ``task`` so that it shows ``fields`` of ``item``
    (``blocked_by`` is written apart: it touches other tasks too). None removes a field or key."""
    top: dict[str, Any] = {}
    metadata: dict[str, Any] = {}
    for field in fields:
        value = item.get(field)
        if field == "content":
            top["subject"] = value
        elif field == "description":
            top["description"] = value or ""
        elif field == "active_form":
            top["activeForm"] = value or None
        elif field == "owner":
            top["owner"] = value or None
        elif field == "status":
            top["status"] = claude_status(str(value))
            metadata[STATUS_KEY] = TodoStatus.CANCELLED.value if value == TodoStatus.CANCELLED.value else None
        elif field.startswith(METADATA):
            key = field[len(METADATA) :]
            if value is None:
                metadata[key] = None
            elif key not in task.metadata or _text(task.metadata[key]) != value:
                metadata[key] = value
    return top, metadata


def task_from_item(item: Item, todo_id: str) -> Task:
    """A new task showing ``item`` (without dependencies: those are linked once both ends exist)."""
    metadata: dict[str, Any] = {**metadata_of(item), TODO_ID_KEY: todo_id}
    if item["status"] == TodoStatus.CANCELLED.value:
        metadata[STATUS_KEY] = TodoStatus.CANCELLED.value
    return Task(
        id="",
        subject=item["content"],
        description=item["description"],
        active_form=item["active_form"] or None,
        owner=item["owner"] or None,
        status=claude_status(item["status"]),
        metadata=metadata,
    )


def todo_from_item(item: Item, *, task_id: str, source: str) -> Todo:
    """A new todo showing ``item`` (without blockers, linked afterwards), naming the task it comes from."""
    return Todo(
        content=item["content"],
        description=item["description"],
        active_form=item["active_form"],
        owner=item["owner"],
        status=TodoStatus(item["status"]),
        metadata={**metadata_of(item), TASK_ID_KEY: task_id, SOURCE_KEY: source},
    )

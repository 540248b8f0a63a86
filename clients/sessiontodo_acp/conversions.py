"""Pure conversions between sessiontodo todos and ACP v1 plan entries.

ACP v1 plan entries have no id and no ``cancelled`` status, and both official SDKs
silently drop an entry whose status or priority is outside ACP's sets. So:

- a todo's id travels in the entry's ``_meta`` as ``todoId``;
- a cancelled todo is sent as ``completed``, its content prefixed with ``[cancelled] ``
  (visible in every editor) and ``_meta.todoStatus = "cancelled"``; reading either
  marker back restores ``cancelled``;
- entries coming from agents are read leniently: statuses and priorities are matched
  case- and separator-insensitively (``inProgress``, ``IN-PROGRESS``), ``canceled`` /
  ``cancelled`` (ACP v2 draft) are kept as cancelled, any other unknown status is
  stored as ``pending`` and any unknown priority as ``medium``, and entries without
  text content are left out. Every such decision is reported as a problem so that
  callers can log it; invalid values never reach sessiontodo.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp.meta import CLIENT_METHODS
from acp.schema import AgentPlanUpdate, PlanEntry, SessionNotification

from sessiontodo_client import Todo, TodoPriority, TodoStatus

CANCELLED_PREFIX = "[cancelled] "
"""Shown before the content of a cancelled todo, which ACP v1 can only call ``completed``."""

META_TODO_ID = "todoId"
"""The ``_meta`` key of a plan entry that carries the sessiontodo todo id."""

META_TODO_STATUS = "todoStatus"
"""The ``_meta`` key that carries a status ACP v1 cannot express (only ``cancelled``)."""

_PLAN_STATUS: dict[TodoStatus, Literal["pending", "in_progress", "completed"]] = {
    TodoStatus.PENDING: "pending",
    TodoStatus.IN_PROGRESS: "in_progress",
    TodoStatus.COMPLETED: "completed",
    TodoStatus.CANCELLED: "completed",
}
_PLAN_PRIORITY: dict[TodoPriority, Literal["high", "medium", "low"]] = {
    TodoPriority.HIGH: "high",
    TodoPriority.MEDIUM: "medium",
    TodoPriority.LOW: "low",
}
_STATUS_WORDS = {
    "pending": TodoStatus.PENDING,
    "in_progress": TodoStatus.IN_PROGRESS,
    "completed": TodoStatus.COMPLETED,
    "cancelled": TodoStatus.CANCELLED,
    "canceled": TodoStatus.CANCELLED,
}
_PRIORITY_WORDS = {priority.value: priority for priority in TodoPriority}
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


# sessiontodo -> ACP


def plan_entry_from_todo(todo: Todo) -> PlanEntry:
    """The ACP entry that shows ``todo``; its id (and a cancelled status) ride in ``_meta``."""
    meta: dict[str, Any] = {META_TODO_ID: todo.id} if todo.id else {}
    content = todo.content
    if todo.status is TodoStatus.CANCELLED:
        content = CANCELLED_PREFIX + content
        meta[META_TODO_STATUS] = TodoStatus.CANCELLED.value
    return PlanEntry(
        content=content,
        status=_PLAN_STATUS[todo.status],
        priority=_PLAN_PRIORITY[todo.priority],
        field_meta=meta or None,
    )


def plan_update_from_todos(todos: Iterable[Todo]) -> AgentPlanUpdate:
    """A ``plan`` session update carrying the whole list, as ACP requires."""
    return AgentPlanUpdate(session_update="plan", entries=[plan_entry_from_todo(todo) for todo in todos])


def plan_notification(session_id: str, todos: Iterable[Todo]) -> dict[str, Any]:
    """The JSON-RPC ``session/update`` notification that shows ``todos`` to an editor."""
    params = SessionNotification(session_id=session_id, update=plan_update_from_todos(todos))
    return {
        "jsonrpc": "2.0",
        "method": CLIENT_METHODS["session_update"],
        "params": params.model_dump(mode="json", by_alias=True, exclude_none=True),
    }


# ACP -> sessiontodo


@dataclass(frozen=True)
class PlanReading:
    """The todos read from a plan, with ids only where the agent gave them, and what was adjusted."""

    todos: list[Todo]
    problems: list[str] = field(default_factory=list)


def _word(value: str) -> str:
    """``inProgress``, ``IN-PROGRESS`` and ``in progress`` all become ``in_progress``."""
    return re.sub(r"[\s-]+", "_", _CAMEL_BOUNDARY.sub("_", value.strip())).lower()


def _read_status(value: Any, where: str, problems: list[str]) -> TodoStatus:
    if isinstance(value, str) and (status := _STATUS_WORDS.get(_word(value))) is not None:
        return status
    problems.append(f"{where}: status {value!r} is not one of pending, in_progress, completed; stored as pending")
    return TodoStatus.PENDING


def _read_priority(value: Any, where: str, problems: list[str]) -> TodoPriority:
    if isinstance(value, str) and (priority := _PRIORITY_WORDS.get(_word(value))) is not None:
        return priority
    problems.append(f"{where}: priority {value!r} is not one of high, medium, low; stored as medium")
    return TodoPriority.MEDIUM


def _todo_from_plan_entry(entry: Mapping[str, Any], where: str, problems: list[str]) -> Todo | None:
    """The todo an entry stands for (no id unless ``_meta.todoId`` gives one), or None without content.

    ``entry`` is the entry's JSON object, as on the wire. Adjustments are appended to ``problems``.
    """
    content = entry.get("content")
    if not isinstance(content, str) or not content.strip():
        problems.append(f"{where}: no text content; left out")
        return None
    meta = entry.get("_meta")
    meta = meta if isinstance(meta, Mapping) else {}
    status = _read_status(entry.get("status"), where, problems)
    priority = _read_priority(entry.get("priority"), where, problems)
    marked_cancelled = meta.get(META_TODO_STATUS) == TodoStatus.CANCELLED.value
    if content.startswith(CANCELLED_PREFIX) and (marked_cancelled or status is TodoStatus.COMPLETED):
        content = content.removeprefix(CANCELLED_PREFIX)
        status = TodoStatus.CANCELLED
    elif marked_cancelled:
        status = TodoStatus.CANCELLED
    if not content.strip():
        problems.append(f"{where}: no text content after {CANCELLED_PREFIX!r}; left out")
        return None
    todo_id = meta.get(META_TODO_ID)
    return Todo(id=todo_id if isinstance(todo_id, str) else "", content=content, status=status, priority=priority)


def read_plan_entries(entries: Any) -> PlanReading:
    """Read a plan's ``entries`` (JSON, as on the wire) into todos; never raises.

    A todo id given twice is kept on its first entry only, since ids are unique per list.
    """
    problems: list[str] = []
    if not isinstance(entries, list):
        return PlanReading([], [f"entries is {type(entries).__name__}, not a list; read as empty"])
    todos: list[Todo] = []
    seen_ids: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: not an object; left out")
            continue
        todo = _todo_from_plan_entry(entry, where, problems)
        if todo is None:
            continue
        if todo.id in seen_ids:
            problems.append(f"{where}: todoId {todo.id!r} repeats an earlier entry's; a new id is generated")
            todo = todo.model_copy(update={"id": ""})
        elif todo.id:
            seen_ids.add(todo.id)
        todos.append(todo)
    return PlanReading(todos, problems)


def read_plan_update(update: AgentPlanUpdate) -> PlanReading:
    """Read a typed plan update (as the Python SDK delivers it) into todos."""
    return read_plan_entries([entry.model_dump(mode="json", by_alias=True) for entry in update.entries])


def keep_known_ids(todos: Sequence[Todo], current: Sequence[Todo]) -> list[Todo]:
    """Give entries without an id the id of the todo they most likely are in ``current``.

    First an unused current todo with the same content, then the unused current todo at the
    same position; otherwise the id stays empty and the server generates one. This keeps ids
    stable while an agent that sends no ids ticks its plan off or rewords an entry.
    """
    taken = {todo.id for todo in todos if todo.id}
    free = [todo for todo in current if todo.id not in taken]
    by_content: dict[str, list[str]] = {}
    for todo in free:
        by_content.setdefault(todo.content, []).append(todo.id)
    chosen: list[str] = []
    for todo in todos:
        candidates = by_content.get(todo.content) if not todo.id else None
        chosen_id = candidates.pop(0) if candidates else todo.id
        chosen.append(chosen_id)
        taken.add(chosen_id)
    for index, todo_id in enumerate(chosen):
        if not todo_id and index < len(current) and current[index].id not in taken:
            chosen[index] = current[index].id
            taken.add(current[index].id)
    return [todo.model_copy(update={"id": todo_id}) for todo, todo_id in zip(todos, chosen, strict=True)]


def same_plan(left: Sequence[Todo], right: Sequence[Todo]) -> bool:
    """Whether two lists show the same plan to an editor (ids aside)."""
    return [(t.content, t.status, t.priority) for t in left] == [(t.content, t.status, t.priority) for t in right]

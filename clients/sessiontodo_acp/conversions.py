"""Pure conversions between sessiontodo todos and ACP v1 plan entries.

ACP v1 plan entries have no id and no ``cancelled`` status, and both official SDKs
silently drop an entry whose status or priority is outside ACP's sets. So:

- a todo's id travels in the entry's ``_meta`` as ``sessiontodo/todoId`` (namespaced, as ACP's
  extensibility rules ask; an agent's own keys, ``todoId`` included, are never interpreted);
- a cancelled todo is sent as ``completed``, its content prefixed with ``[cancelled] ``
  (visible in every editor) and ``_meta["sessiontodo/todoStatus"] = "cancelled"``; reading
  either marker back restores ``cancelled``;
- a status or priority that a newer sessiontodo added (a number, see ``sessiontodo_client.Todo``)
  is shown as ``pending`` / ``medium``;
- every other ``_meta`` key round-trips untouched through the todo's metadata: the entry's
  ``_meta`` as JSON under ``acp/_meta``, the plan's own ``_meta`` under ``acp/plan._meta``
  (on every todo of the plan, so that it survives edits to any one of them);
- entries coming from agents are read leniently: statuses and priorities are matched
  case- and separator-insensitively (``inProgress``, ``IN-PROGRESS``), ``canceled`` /
  ``cancelled`` (ACP v2 draft) are kept as cancelled, any other unknown status is
  stored as ``pending`` and any unknown priority as ``medium``, and entries without
  text content are left out. Every such decision is reported as a problem so that
  callers can log it; invalid values never reach sessiontodo.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp.meta import CLIENT_METHODS
from acp.schema import AgentPlanUpdate, PlanEntry, SessionNotification

from sessiontodo_client import Todo, TodoPriority, TodoStatus

CANCELLED_PREFIX = "[cancelled] "
"""Shown before the content of a cancelled todo, which ACP v1 can only call ``completed``."""

META_PREFIX = "sessiontodo/"
"""The namespace of the proxy's own ``_meta`` keys; the proxy reads no other key."""

META_TODO_ID = META_PREFIX + "todoId"
"""The ``_meta`` key of a plan entry that carries the sessiontodo todo id."""

META_TODO_STATUS = META_PREFIX + "todoStatus"
"""The ``_meta`` key that carries a status ACP v1 cannot express (only ``cancelled``)."""

ENTRY_META = "acp/_meta"
"""The todo metadata key holding a plan entry's ``_meta`` (JSON, the proxy's own keys left out)."""

AGENT_METADATA_PREFIX = "acp/"
"""The todo metadata keys the proxy writes from what an agent sent; every other key belongs to others."""

PLAN_META = "acp/plan._meta"
"""The todo metadata key holding the plan's own ``_meta`` (JSON), repeated on every todo of the plan."""

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


def _json_object(text: str | None) -> dict[str, Any]:
    """The JSON object stored in a metadata value, or an empty one if absent or not an object."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def plan_entry_from_todo(todo: Todo) -> PlanEntry:
    """The ACP entry that shows ``todo``: its stored ``_meta``, plus its id (and a cancelled status)."""
    meta: dict[str, Any] = _json_object(todo.metadata.get(ENTRY_META))
    if todo.id:
        meta[META_TODO_ID] = todo.id
    content = todo.content
    if todo.status is TodoStatus.CANCELLED:
        content = CANCELLED_PREFIX + content
        meta[META_TODO_STATUS] = TodoStatus.CANCELLED.value
    return PlanEntry(
        content=content,
        status=_PLAN_STATUS[todo.status] if isinstance(todo.status, TodoStatus) else "pending",
        priority=_PLAN_PRIORITY[todo.priority] if isinstance(todo.priority, TodoPriority) else "medium",
        field_meta=meta or None,
    )


def plan_meta_of(todos: Iterable[Todo]) -> dict[str, Any]:
    """The plan-level ``_meta`` stored with a list (on its first todo that carries one)."""
    for todo in todos:
        if PLAN_META in todo.metadata:
            return _json_object(todo.metadata[PLAN_META])
    return {}


def plan_update_from_todos(todos: Iterable[Todo]) -> AgentPlanUpdate:
    """A ``plan`` session update carrying the whole list, as ACP requires, with its plan-level ``_meta``."""
    todos = list(todos)
    return AgentPlanUpdate(
        session_update="plan",
        entries=[plan_entry_from_todo(todo) for todo in todos],
        field_meta=plan_meta_of(todos) or None,
    )


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


def _stored_json(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _todo_from_plan_entry(
    entry: Mapping[str, Any], plan_meta: str | None, where: str, problems: list[str]
) -> Todo | None:
    """The todo an entry stands for (no id unless ``_meta["sessiontodo/todoId"]`` gives one), or None
    without content. The entry's other ``_meta`` keys, and the plan's (``plan_meta``, JSON), go to its metadata.

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
    metadata: dict[str, str] = {}
    if others := {key: value for key, value in meta.items() if not str(key).startswith(META_PREFIX)}:
        metadata[ENTRY_META] = _stored_json(others)
    if plan_meta is not None:
        metadata[PLAN_META] = plan_meta
    return Todo(
        id=todo_id if isinstance(todo_id, str) else "",
        content=content,
        status=status,
        priority=priority,
        metadata=metadata,
    )


def read_plan_entries(entries: Any, plan_meta: Any = None) -> PlanReading:
    """Read a plan's ``entries`` (JSON, as on the wire) and its own ``_meta`` into todos; never raises.

    A todo id given twice is kept on its first entry only, since ids are unique per list.
    """
    problems: list[str] = []
    if not isinstance(entries, list):
        return PlanReading([], [f"entries is {type(entries).__name__}, not a list; read as empty"])
    stored_plan_meta = _stored_json(plan_meta) if isinstance(plan_meta, Mapping) and plan_meta else None
    todos: list[Todo] = []
    seen_ids: set[str] = set()
    for index, entry in enumerate(entries):
        where = f"entries[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: not an object; left out")
            continue
        todo = _todo_from_plan_entry(entry, stored_plan_meta, where, problems)
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
    return read_plan_entries(
        [entry.model_dump(mode="json", by_alias=True) for entry in update.entries], update.field_meta
    )


def keep_known_ids(todos: Sequence[Todo], current: Sequence[Todo]) -> list[Todo]:
    """Give entries without an id the id of the todo they most likely are in ``current``.

    First an unused current todo with the same content, then the unused current todo at the
    same position; otherwise the id stays empty and the server generates one. This keeps ids
    stable while an agent that sends no ids ticks its plan off or rewords an entry. A todo that
    keeps an id also keeps the metadata other backends stored on it (keys outside ``acp/``).
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
    foreign = {todo.id: _foreign_metadata(todo) for todo in current}
    return [
        todo.model_copy(update={"id": todo_id, "metadata": {**foreign.get(todo_id, {}), **todo.metadata}})
        for todo, todo_id in zip(todos, chosen, strict=True)
    ]


def _foreign_metadata(todo: Todo) -> dict[str, str]:
    """A stored todo's metadata written by others (not ``acp/…``): kept when an agent's plan rewrites the todo."""
    return {key: value for key, value in todo.metadata.items() if not key.startswith(AGENT_METADATA_PREFIX)}


def same_plan(left: Sequence[Todo], right: Sequence[Todo]) -> bool:
    """Whether two lists show the same plan to an editor (ids and others' metadata aside)."""

    def shown(todos: Sequence[Todo]) -> list[tuple[Any, ...]]:
        return [(t.content, t.status, t.priority, t.metadata.get(ENTRY_META), t.metadata.get(PLAN_META)) for t in todos]

    return shown(left) == shown(right)

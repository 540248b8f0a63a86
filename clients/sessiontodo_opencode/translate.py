"""Pure conversions between sessiontodo's values and OpenCode's.

Status and priority use the same strings on both sides, so a todo crosses unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import sessiontodo_client as service
from sessiontodo_opencode.models import SessionInfo, Todo, TodoUpdated, TodoUpdatedProperties


def todo_from_service(todo: service.Todo) -> Todo:
    return Todo(id=todo.id, content=todo.content, status=todo.status.value, priority=todo.priority.value)


def todo_to_service(todo: Todo) -> service.Todo:
    return service.Todo(
        id=todo.id,
        content=todo.content,
        status=service.TodoStatus(todo.status),
        priority=service.TodoPriority(todo.priority),
    )


def todos_from_service(todos: Iterable[service.Todo]) -> list[Todo]:
    return [todo_from_service(todo) for todo in todos]


def todo_updated(session_id: str, todos: Iterable[service.Todo]) -> TodoUpdated:
    """The ``todo.updated`` event carrying one session's full list."""
    return TodoUpdated(properties=TodoUpdatedProperties(sessionID=session_id, todos=todos_from_service(todos)))


def session_info(session: service.Session) -> SessionInfo:
    return SessionInfo(id=session.session_id, parentID=session.parent_id or None)


def describe_violations(violations: Sequence[tuple[str, str]]) -> str:
    """``field: why; field: why`` — the message of a 400 answer."""
    return "; ".join(f"{field}: {why}" if field else why for field, why in violations)

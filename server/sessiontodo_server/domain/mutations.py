"""Writes as values: what one write does to one session, applied by the store in one atomic step.

The book checks everything a request says on its own (``todos.py``), then hands the store a
``Mutation``. The store applies it to the session's current state atomically — the in-process
stores with ``apply`` below, Redis with the same rules in a server-side script — so a write
never reads before it commits and never retries on contention. What depends on the current
state (duplicate ids, the count and byte limits, a missing todo, no change at all) is decided
here, identically for every store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.errors import InvalidArgument
from sessiontodo_server.domain.values import (
    NO_ENTRIES,
    ChangeKind,
    Limits,
    SessionInfo,
    Todo,
    TodoDraft,
    TodoPriority,
    TodoStatus,
)


def _no_entries() -> Mapping[str, str]:
    return NO_ENTRIES


@dataclass(frozen=True, slots=True)
class ReplaceTodos:
    todos: tuple[Todo, ...]
    """Validated, ids generated where none was given."""


@dataclass(frozen=True, slots=True)
class AddTodo:
    todo: Todo
    """Validated on its own, its id generated when none was given (then it cannot be a duplicate)."""
    index: int | None
    id_given: bool
    fingerprint: str = ""
    """What the request asked for, kept with its request id (see ``AddResult.fingerprint``)."""


@dataclass(frozen=True, slots=True)
class UpdateTodo:
    todo_id: str
    content: str | None = None
    status: TodoStatus | None = None
    priority: TodoPriority | None = None
    set_metadata: Mapping[str, str] = field(default_factory=_no_entries)
    remove_metadata: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RemoveTodo:
    todo_id: str


@dataclass(frozen=True, slots=True)
class UpdateSession:
    set_labels: Mapping[str, str] = field(default_factory=_no_entries)
    remove_labels: tuple[str, ...] = ()
    idle_ttl: float | None = None
    """None keeps the session's idle TTL; 0 never expires."""


Mutation = ReplaceTodos | AddTodo | UpdateTodo | RemoveTodo | UpdateSession


class Applied(NamedTuple):
    """A mutation's effect: the change's kind, the list and metadata after it."""

    kind: ChangeKind
    todos: tuple[Todo, ...]
    info: SessionInfo
    todo_id: str = ""
    position: int = 0
    """Where an AddTodo put its todo."""


def apply(
    session_id: str, todos: tuple[Todo, ...], info: SessionInfo, mutation: Mutation, limits: Limits
) -> Applied | None:
    """The effect of ``mutation`` on a session's state, or None when it changes nothing.

    Raises TodoNotFound, InvalidArgument or LimitExceeded, changing nothing."""
    match mutation:
        case ReplaceTodos(new):
            # Generated ids differ on every call, so only an all-ids-given list can be identical.
            return None if new == todos else Applied(ChangeKind.TODOS_REPLACED, new, info)
        case AddTodo(todo, index):
            draft = TodoDraft(todo.id, todo.content, todo.status, todo.priority, todo.metadata)
            added, _, position = ops.insert(todos, draft, index, limits)
            return Applied(ChangeKind.TODO_ADDED, added, info, todo.id, position)
        case UpdateTodo(todo_id, content, status, priority, set_metadata, remove_metadata):
            updated, _ = ops.update(
                todos, session_id, todo_id, content, status, priority, limits, set_metadata, remove_metadata
            )
            return None if updated is todos else Applied(ChangeKind.TODO_UPDATED, updated, info, todo_id)
        case RemoveTodo(todo_id):
            return Applied(ChangeKind.TODO_REMOVED, ops.remove(todos, session_id, todo_id), info, todo_id)
        case UpdateSession(set_labels, remove_labels, idle_ttl):
            labels = ops.with_changes(info.labels, set_labels, remove_labels)
            if len(labels) > limits.max_labels:
                raise InvalidArgument([("labels", f"at most {limits.max_labels} labels")])
            ttl = info.idle_ttl if idle_ttl is None else idle_ttl
            if labels == info.labels and ttl == info.idle_ttl:
                return None
            return Applied(ChangeKind.SESSION_UPDATED, todos, replace(info, labels=labels, idle_ttl=ttl))

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

from sessiontodo_server.domain import claims
from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.errors import InvalidArgument
from sessiontodo_server.domain.values import (
    NO_ENTRIES,
    NO_GRAPH_CHANGES,
    ChangeKind,
    GraphChanges,
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
    graph: GraphChanges = NO_GRAPH_CHANGES
    now: float = 0.0
    """When the update was asked for: an update naming a lease's owner renews it from then."""


@dataclass(frozen=True, slots=True)
class RemoveTodo:
    todo_id: str


@dataclass(frozen=True, slots=True)
class ClaimTodo:
    """Give ``todo_id`` (empty: the first ready todo) to ``owner``, IN_PROGRESS (``claims.claim``)."""

    todo_id: str
    owner: str
    lease_seconds: float | None
    now: float
    fingerprint: str = ""
    """What the request asked for, kept with its request id as an AddTodo's is."""


@dataclass(frozen=True, slots=True)
class RenewClaim:
    todo_id: str
    owner: str
    lease_seconds: float | None
    """None: the claim's own duration."""
    now: float


@dataclass(frozen=True, slots=True)
class ReleaseTodo:
    todo_id: str
    owner: str


@dataclass(frozen=True, slots=True)
class LapseLease:
    """The lease of ``todo_id``, if it has run out at ``now`` in the list as it is when applied."""

    todo_id: str
    now: float


@dataclass(frozen=True, slots=True)
class UpdateSession:
    set_labels: Mapping[str, str] = field(default_factory=_no_entries)
    remove_labels: tuple[str, ...] = ()
    idle_ttl: float | None = None
    """None keeps the session's idle TTL; 0 never expires."""


Mutation = (
    ReplaceTodos | AddTodo | UpdateTodo | RemoveTodo | UpdateSession | ClaimTodo | RenewClaim | ReleaseTodo | LapseLease
)

RemembersResult = AddTodo | ClaimTodo
"""Mutations whose result a request id keeps (``AddResult``), so that a retry gets the first one."""


class Applied(NamedTuple):
    """A mutation's effect: the change's kind, the list and metadata after it."""

    kind: ChangeKind
    todos: tuple[Todo, ...]
    info: SessionInfo
    todo_id: str = ""
    position: int = 0
    """Where an AddTodo put its todo (a claim: the todo it claimed)."""


def apply(
    session_id: str, todos: tuple[Todo, ...], info: SessionInfo, mutation: Mutation, limits: Limits
) -> Applied | None:
    """The effect of ``mutation`` on a session's state, or None when it changes nothing.

    Raises TodoNotFound, InvalidArgument or LimitExceeded, changing nothing."""
    match mutation:
        case ReplaceTodos(replacing):
            replacing = claims.carried_over(todos, replacing)
            # Generated ids differ on every call, so only an all-ids-given list can be identical.
            return None if replacing == todos else Applied(ChangeKind.TODOS_REPLACED, replacing, info)
        case AddTodo(todo, index):
            draft = TodoDraft(*todo[:9])
            added, _, position = ops.insert(todos, draft, index, limits)
            return Applied(ChangeKind.TODO_ADDED, added, info, todo.id, position)
        case UpdateTodo(todo_id, content, status, priority, set_metadata, remove_metadata, changes, now):
            updated, todo = ops.update(
                todos,
                session_id,
                todo_id,
                content,
                status,
                priority,
                limits,
                set_metadata,
                remove_metadata,
                graph_changes=changes,
            )
            updated = _with_lease_rules(todos, updated, todo, changes.owner is not None, now)
            return None if updated is todos else Applied(ChangeKind.TODO_UPDATED, updated, info, todo_id)
        case RemoveTodo(todo_id):
            return Applied(ChangeKind.TODO_REMOVED, ops.remove(todos, session_id, todo_id), info, todo_id)
        case ClaimTodo(todo_id, owner, lease_seconds, now):
            claimed = claims.claim(todos, session_id, todo_id, owner, lease_seconds, now)
            if not claimed.changed or claimed.todo is None:
                return None
            return Applied(ChangeKind.TODO_UPDATED, claimed.todos, info, claimed.todo.id, claimed.position)
        case RenewClaim(todo_id, owner, lease_seconds, now):
            renewed, _ = claims.renew(todos, session_id, todo_id, owner, lease_seconds, now)
            return None if renewed is todos else Applied(ChangeKind.TODO_UPDATED, renewed, info, todo_id)
        case ReleaseTodo(todo_id, owner):
            released, _ = claims.release(todos, session_id, todo_id, owner)
            return Applied(ChangeKind.TODO_UPDATED, released, info, todo_id)
        case LapseLease(todo_id, now):
            lapsed = claims.lapse(todos, todo_id, now)
            return None if lapsed is None else Applied(ChangeKind.TODO_UPDATED, lapsed[0], info, todo_id)
        case UpdateSession(set_labels, remove_labels, idle_ttl):
            labels = ops.with_changes(info.labels, set_labels, remove_labels)
            if len(labels) > limits.max_labels:
                raise InvalidArgument([("labels", f"at most {limits.max_labels} labels")])
            ttl = info.idle_ttl if idle_ttl is None else idle_ttl
            if labels == info.labels and ttl == info.idle_ttl:
                return None
            return Applied(ChangeKind.SESSION_UPDATED, todos, replace(info, labels=labels, idle_ttl=ttl))


def _with_lease_rules(
    before: tuple[Todo, ...], updated: tuple[Todo, ...], new: Todo, owner_given: bool, now: float
) -> tuple[Todo, ...]:
    """An updated list with its todo's lease ended or renewed as ``claims.after_update`` says
    (``new``: the todo as ``ops.update`` left it, its lease copied from before)."""
    if not new.lease_expires_at:
        return updated
    position = next(n for n, todo in enumerate(before) if todo.id == new.id)
    ruled = claims.after_update(before[position], new, owner_given, now)
    return updated if ruled == new else (*updated[:position], ruled, *updated[position + 1 :])

"""Claims and leases: who works on a todo, and for how long without a sign of life.

A claim gives a todo to an owner and sets it IN_PROGRESS. A lease, when the claim has one, is a
deadline (``lease_expires_at``, Unix seconds) and the duration each renewal sets it to from then
(``lease_seconds``); 0 means no lease. The lease belongs to the todo while it stays IN_PROGRESS
with the same owner: a write that changes either ends it, a write that sets the same owner again
renews it. A lease that runs out *lapses*: the owner is cleared and the todo is PENDING again.

Pure, like the rest of the domain: every operation takes a list and returns the new one, and the
store applies it atomically to the current state — so a lapse decided against an older state is
re-checked at the moment it is applied, and never undoes an acknowledged renewal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from sessiontodo_server.domain import graph
from sessiontodo_server.domain.errors import (
    ClaimNotHeld,
    InvalidArgument,
    TodoBlocked,
    TodoNotFound,
    TodoNotPending,
    TodoTaken,
)
from sessiontodo_server.domain.values import Todo, TodoStatus

LEASE_ORIGIN = "sessiontodo:lease"
"""The origin of the change a lapsing lease makes, so watchers tell a lapse from a person's write."""

MIN_LEASE_SECONDS = 1.0
MAX_LEASE_SECONDS = 86_400.0

_IN_PROGRESS, _PENDING = TodoStatus.IN_PROGRESS, TodoStatus.PENDING


class Claimed(NamedTuple):
    """A claim's effect: the list after it, the claimed todo (None: nothing was ready), its
    position, and whether the list changed (not for a todo already the owner's, lease unchanged)."""

    todos: tuple[Todo, ...]
    todo: Todo | None
    position: int = -1
    changed: bool = False


def owner_violations(owner: str, max_length: int, field: str = "owner") -> list[tuple[str, str]]:
    """A claim's owner: required, bounded."""
    if not owner.strip():
        return [(field, "is required: who claims")]
    if len(owner) > max_length:
        return [(field, f"must be at most {max_length} characters")]
    return []


def lease_violations(lease_seconds: float | None, field: str = "lease_duration") -> list[tuple[str, str]]:
    if lease_seconds is None or MIN_LEASE_SECONDS <= lease_seconds <= MAX_LEASE_SECONDS:
        return []
    return [(field, f"must be between {MIN_LEASE_SECONDS:g} second and {MAX_LEASE_SECONDS:g} seconds (1 day)")]


def check_claim(owner: str, lease_seconds: float | None, max_owner_length: int) -> None:
    if violations := owner_violations(owner, max_owner_length) + lease_violations(lease_seconds):
        raise InvalidArgument(violations)


def _position(todos: tuple[Todo, ...], session_id: str, todo_id: str) -> int:
    for position, todo in enumerate(todos):
        if todo.id == todo_id:
            return position
    raise TodoNotFound(session_id, todo_id)


def _leased(todo: Todo, lease_seconds: float, now: float) -> Todo:
    """``todo`` with a lease of ``lease_seconds`` from ``now`` (0: none), to the millisecond, as
    every store keeps it."""
    lease = round(lease_seconds, 3)
    return todo._replace(lease_expires_at=round(now + lease, 3) if lease else 0.0, lease_seconds=lease)


def _with(todos: tuple[Todo, ...], position: int, todo: Todo) -> tuple[Todo, ...]:
    return (*todos[:position], todo, *todos[position + 1 :])


def claim(
    todos: tuple[Todo, ...], session_id: str, todo_id: str, owner: str, lease_seconds: float | None, now: float
) -> Claimed:
    """Give ``todo_id`` (or, when empty, the first ready todo in list order) to ``owner``, IN_PROGRESS.

    A named todo must be PENDING, unowned or already ``owner``'s, and unblocked: else TodoNotPending,
    TodoTaken or TodoBlocked (TodoNotFound when it does not exist). A todo already IN_PROGRESS with
    ``owner`` is claimed again: unchanged, or with its lease renewed when ``lease_seconds`` is given.
    Nothing ready is no error: ``Claimed(todos, None)``."""
    if not todo_id:
        finished: set[str] | None = None  # read from the list only once a candidate has blockers
        for position, todo in enumerate(todos):
            if todo.status is not _PENDING or todo.owner:
                continue
            if todo.blocked_by:
                finished = graph.finished_ids(todos) if finished is None else finished
                if not finished.issuperset(todo.blocked_by):
                    continue
            taken = _taken(todo, owner, lease_seconds, now)
            return Claimed(_with(todos, position, taken), taken, position, changed=True)
        return Claimed(todos, None)
    position = _position(todos, session_id, todo_id)
    todo = todos[position]
    if todo.status is _IN_PROGRESS and todo.owner == owner:
        if lease_seconds is None:
            return Claimed(todos, todo, position)
        renewed = _leased(todo, lease_seconds, now)
        return Claimed(_with(todos, position, renewed), renewed, position, changed=True)
    if todo.status in graph.FINISHED:
        raise TodoNotPending(session_id, todo_id, todo.status.value)
    if todo.owner and todo.owner != owner:
        raise TodoTaken(session_id, todo_id, todo.owner)
    if todo.status is not _PENDING:
        raise TodoNotPending(session_id, todo_id, todo.status.value)
    if waiting := graph.unfinished_blockers(todo, todos):
        raise TodoBlocked(session_id, todo_id, ",".join(waiting))
    taken = _taken(todo, owner, lease_seconds, now)
    return Claimed(_with(todos, position, taken), taken, position, changed=True)


def _taken(todo: Todo, owner: str, lease_seconds: float | None, now: float) -> Todo:
    return _leased(todo._replace(status=_IN_PROGRESS, owner=owner), lease_seconds or 0.0, now)


def renew(
    todos: tuple[Todo, ...], session_id: str, todo_id: str, owner: str, lease_seconds: float | None, now: float
) -> tuple[tuple[Todo, ...], Todo]:
    """``owner``'s claim with its lease running ``lease_seconds`` (None: its own duration) from
    ``now``; unchanged when it has no lease and none is given. ClaimNotHeld unless the todo is
    IN_PROGRESS with ``owner``."""
    position = _held(todos, session_id, todo_id, owner)
    todo = todos[position]
    duration = todo.lease_seconds if lease_seconds is None else lease_seconds
    if not duration:
        return todos, todo
    renewed = _leased(todo, duration, now)
    return _with(todos, position, renewed), renewed


def release(todos: tuple[Todo, ...], session_id: str, todo_id: str, owner: str) -> tuple[tuple[Todo, ...], Todo]:
    """``owner``'s claim given back: unowned, PENDING, no lease. ClaimNotHeld unless the todo is
    IN_PROGRESS with ``owner``."""
    position = _held(todos, session_id, todo_id, owner)
    released = _lapsed(todos[position])
    return _with(todos, position, released), released


def _held(todos: tuple[Todo, ...], session_id: str, todo_id: str, owner: str) -> int:
    position = _position(todos, session_id, todo_id)
    todo = todos[position]
    if todo.status is not _IN_PROGRESS or todo.owner != owner:
        raise ClaimNotHeld(session_id, todo_id, todo.owner, todo.status.value)
    return position


def _lapsed(todo: Todo) -> Todo:
    return todo._replace(status=_PENDING, owner="", lease_expires_at=0.0, lease_seconds=0.0)


def lapse(todos: tuple[Todo, ...], todo_id: str, now: float) -> tuple[tuple[Todo, ...], Todo] | None:
    """The list with ``todo_id``'s lease lapsed, if it has run out at ``now`` — checked against this
    list, the current one, so a renewal that came first wins; None when there is nothing to lapse
    (renewed, released, changed, removed)."""
    for position, todo in enumerate(todos):
        if todo.id == todo_id:
            if todo.lease_expires_at and todo.lease_expires_at <= now:
                lapsed = _lapsed(todo)
                return _with(todos, position, lapsed), lapsed
            return None
    return None


def leases(todos: Iterable[Todo]) -> list[tuple[float, str]]:
    """Every lease of a list: (deadline, todo id), for a store's index of deadlines."""
    return [(todo.lease_expires_at, todo.id) for todo in todos if todo.lease_expires_at]


def after_update(old: Todo, new: Todo, owner_given: bool, now: float) -> Todo:
    """``new`` (an update of ``old``) with the lease rules applied: the lease ends when the owner
    changes or the todo leaves IN_PROGRESS; an update naming the lease's own owner renews it."""
    if not old.lease_expires_at:
        return new
    if new.status is not _IN_PROGRESS or new.owner != old.owner:
        return new._replace(lease_expires_at=0.0, lease_seconds=0.0)
    if owner_given:
        return _leased(new, old.lease_seconds, now)
    return new


def carried_over(old: tuple[Todo, ...], new: tuple[Todo, ...]) -> tuple[Todo, ...]:
    """A replacing list with the leases of ``old`` kept on the todos that keep their id, stay
    IN_PROGRESS and keep their owner (a replace never sets a lease of its own)."""
    held = {todo.id: todo for todo in old if todo.lease_expires_at}
    if not held:
        return new
    kept = []
    for todo in new:
        before = held.get(todo.id)
        if before is not None and todo.status is _IN_PROGRESS and todo.owner == before.owner:
            todo = todo._replace(lease_expires_at=before.lease_expires_at, lease_seconds=before.lease_seconds)
        kept.append(todo)
    return tuple(kept)

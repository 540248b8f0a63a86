"""The todo list's rules and operations: ids, what a valid list, todo, session id or label is,
and the pure operations that change a list (its values are ``values.py``'s).

Nothing here knows about sessions' storage, watchers or gRPC: every operation takes a
list (a tuple) and returns the new list plus a description of the change, or raises
``InvalidArgument`` / ``TodoNotFound`` without touching anything.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain

from sessiontodo_server.domain import graph, tenancy
from sessiontodo_server.domain.errors import InvalidArgument, LimitExceeded, TodoNotFound
from sessiontodo_server.domain.values import (
    GLOBAL_SESSION_ID,
    NO_ENTRIES,
    NO_GRAPH_CHANGES,
    DraftFields,
    GraphChanges,
    Limits,
    Todo,
    TodoDraft,
    TodoPriority,
    TodoStatus,
    frozen,
)

_new_tuple = tuple.__new__
"""``_new_tuple(Todo, fields)`` builds a todo without the named tuple's own ``__new__`` frame."""


SESSION_ID_PATTERN = re.compile(r"[A-Za-z0-9._:-]+")
_ID_PATTERN_TEXT = "letters, digits and . _ : -"
_TENANT_PATTERN = re.compile(tenancy.TENANT_PATTERN)


_ids = random.Random(os.urandom(16))
"""Ids need to be unique, not secret: a seeded generator is far cheaper than os.urandom per id."""

_ID_BLOCK = 64
"""Todo ids drawn at once, and made into strings by C loops (a hex string split into ids): 95 ns
an id where formatting each one cost 254 ns, and a ReplaceTodos makes one per todo."""

_fresh_ids: list[str] = []


def new_todo_id() -> str:
    """A random id such as ``todo_3f9a…`` (64 random bits)."""
    if not _fresh_ids:
        hexed = _ids.getrandbits(64 * _ID_BLOCK).to_bytes(8 * _ID_BLOCK, "little").hex(" ", 8)
        _fresh_ids.extend(("todo_" + hexed.replace(" ", " todo_")).split(" "))
    return _fresh_ids.pop()


def session_id_violations(session_id: str, limits: Limits, field: str = "session_id") -> list[tuple[str, str]]:
    """Empty ids, ids that are too long or use characters outside the documented set; the limits
    apply to the id a caller chose, after the tenant prefix the transport adds."""
    tenant, session_id = tenancy.tenant_of(session_id), tenancy.local(session_id)
    if tenant and not _TENANT_PATTERN.fullmatch(tenant):
        return [(field, f"may only contain {_ID_PATTERN_TEXT}")]
    if not session_id:
        return [(field, "is required")]
    if session_id == GLOBAL_SESSION_ID:
        return []
    if len(session_id) > limits.max_session_id_length:
        return [(field, f"must be at most {limits.max_session_id_length} characters")]
    if not SESSION_ID_PATTERN.fullmatch(session_id):
        return [(field, f"may only contain {_ID_PATTERN_TEXT}")]
    return []


def check_session_id(session_id: str, limits: Limits, field: str = "session_id") -> None:
    if violations := session_id_violations(session_id, limits, field):
        raise InvalidArgument(violations)


LABEL_KEY_PATTERN = re.compile(r"[A-Za-z0-9._/-]{1,128}")
METADATA_KEY_MAX_LENGTH = 128
MAX_ORIGIN_LENGTH = 128

MAX_IDLE_TTL = 315_576_000_000.0
"""The longest idle TTL: protobuf Duration's range (10,000 years), so a session always reads back."""


def idle_ttl_violations(idle_ttl: float | None, *, zero_allowed: bool) -> list[tuple[str, str]]:
    """What is wrong with an idle TTL: below a second (zero: never expire, where allowed) or past
    protobuf Duration's range."""
    if idle_ttl is None or (zero_allowed and idle_ttl == 0):
        return []
    if idle_ttl < 1:
        return [
            (
                "idle_ttl",
                "must be zero (never expire) or at least one second" if zero_allowed else "must be at least one second",
            )
        ]
    if idle_ttl > MAX_IDLE_TTL:
        return [("idle_ttl", f"must be at most {int(MAX_IDLE_TTL)} seconds (protobuf Duration's range)")]
    return []


def label_violations(labels: Mapping[str, str], limits: Limits, field: str = "labels") -> list[tuple[str, str]]:
    violations = []
    if len(labels) > limits.max_labels:
        violations.append((field, f"at most {limits.max_labels} labels"))
    for key, value in labels.items():
        if not LABEL_KEY_PATTERN.fullmatch(key):
            violations.append((f"{field}[{key[:64]!r}]", "keys are 1 to 128 letters, digits and . _ / -"))
        elif len(value) > limits.max_label_value_length:
            violations.append((f"{field}[{key!r}]", f"must be at most {limits.max_label_value_length} characters"))
    return violations


def check_origin(origin: str) -> None:
    if len(origin) > MAX_ORIGIN_LENGTH:
        raise InvalidArgument([("origin", f"must be at most {MAX_ORIGIN_LENGTH} characters")])


def check_key_changes(set_keys: Iterable[str], removed: Iterable[str], field: str) -> list[tuple[str, str]]:
    """A key both set and removed in one update is ambiguous."""
    both = sorted(set(set_keys) & set(removed))
    return [(field, f"{key[:64]!r} is both set and removed") for key in both[:10]]


def with_changes(
    entries: Mapping[str, str], set_entries: Mapping[str, str], removed: Iterable[str]
) -> Mapping[str, str]:
    updated = {**entries, **set_entries}
    for key in removed:
        updated.pop(key, None)
    return frozen(updated)


_STATUSES = {status.value: status for status in TodoStatus}
_PRIORITIES = {priority.value: priority for priority in TodoPriority}
_PENDING, _MEDIUM = TodoStatus.PENDING, TodoPriority.MEDIUM
"""The defaults, read once: an enum member read from its class costs a Python ``__getattr__`` call (3.11)."""


def _enum_violations(status: str | None, priority: str | None, field: str) -> list[tuple[str, str]]:
    violations = []
    if status is not None and status not in _STATUSES:
        violations.append((f"{field}status", f"{status!r} is not one of {', '.join(TodoStatus)}"))
    if priority is not None and priority not in _PRIORITIES:
        violations.append((f"{field}priority", f"{priority!r} is not one of {', '.join(TodoPriority)}"))
    return violations


def _draft_violations(draft: TodoDraft, prefix: str, limits: Limits) -> list[tuple[str, str]]:
    violations = _enum_violations(draft.status, draft.priority, prefix)
    if not draft.content.strip():
        violations.append((f"{prefix}content", "must not be empty"))
    elif len(draft.content) > limits.max_content_length:
        violations.append((f"{prefix}content", f"must be at most {limits.max_content_length} characters"))
    if len(draft.id) > limits.max_todo_id_length:
        violations.append((f"{prefix}id", f"must be at most {limits.max_todo_id_length} characters"))
    violations += _text_violations(draft.description, draft.active_form, draft.owner, prefix, limits)
    if draft.blocked_by:  # which ids exist is the list's business: ``graph.list_violations``
        field = f"{prefix}blocked_by"
        violations += graph.blocker_violations(draft.id, draft.blocked_by, None, limits.max_blockers_per_todo, field)
    return violations + _metadata_violations(draft.metadata, f"{prefix}metadata", limits)


def _text_violations(
    description: str | None, active_form: str | None, owner: str | None, prefix: str, limits: Limits
) -> list[tuple[str, str]]:
    """The task-graph texts, each None (not given) or bounded."""
    violations = []
    if description and len(description) > limits.max_description_length:
        violations.append((f"{prefix}description", f"must be at most {limits.max_description_length} characters"))
    if active_form and len(active_form) > limits.max_content_length:
        violations.append((f"{prefix}active_form", f"must be at most {limits.max_content_length} characters"))
    if owner and len(owner) > limits.max_owner_length:
        violations.append((f"{prefix}owner", f"must be at most {limits.max_owner_length} characters"))
    return violations


def _metadata_violations(metadata: Mapping[str, str], field: str, limits: Limits) -> list[tuple[str, str]]:
    if not metadata:  # the common case, once per todo on every write
        return []
    violations = [
        (field, f"keys are 1 to {METADATA_KEY_MAX_LENGTH} characters")
        for key in metadata
        if not 0 < len(key) <= METADATA_KEY_MAX_LENGTH
    ][:1]
    if _entries_bytes(metadata) > limits.max_metadata_bytes:
        violations.append((field, f"keys and values must total at most {limits.max_metadata_bytes} bytes"))
    return violations


def _entries_bytes(entries: Mapping[str, str]) -> int:
    return sum(len(key.encode()) + len(value.encode()) for key, value in entries.items())


def materialize(draft: TodoDraft, limits: Limits, prefix: str = "todo.") -> Todo:
    """Validate one todo on its own (not against a list) and build it, generating a missing id."""
    if violations := _draft_violations(draft, prefix, limits):
        raise InvalidArgument(violations)
    return _materialize(draft)


def _materialize(draft: TodoDraft) -> Todo:
    return Todo(
        id=draft.id or new_todo_id(),
        content=draft.content,
        status=_STATUSES[draft.status] if draft.status else _PENDING,
        priority=_PRIORITIES[draft.priority] if draft.priority else _MEDIUM,
        metadata=frozen(draft.metadata),
        description=draft.description,
        active_form=draft.active_form,
        owner=draft.owner,
        blocked_by=tuple(draft.blocked_by),
    )


def todo_bytes(todo: Todo) -> int:
    """What one todo counts towards ``max_list_bytes`` (UTF-8 bytes; ASCII text is counted without encoding it)."""
    content = todo.content
    text = len(content) if content.isascii() else len(content.encode())
    size = text + len(todo.id) + (_entries_bytes(todo.metadata) if todo.metadata else 0)
    if todo.description or todo.active_form or todo.owner or todo.blocked_by:
        size += _graph_bytes(todo)
    return size


def _graph_bytes(todo: Todo) -> int:
    """The task-graph fields' share of ``todo_bytes``: their texts' UTF-8 bytes and every blocker's id."""
    return _texts_bytes(todo.description, todo.active_form, todo.owner) + sum(map(len, todo.blocked_by))


def _texts_bytes(*texts: str) -> int:
    joined = "".join(texts)
    return len(joined) if joined.isascii() else len(joined.encode())


def _list_bytes(todos: tuple[Todo, ...]) -> int:
    return sum(map(todo_bytes, todos))


def _check_size(todos: tuple[Todo, ...], limits: Limits, field: str) -> None:
    if _list_bytes(todos) > limits.max_list_bytes:
        raise InvalidArgument([(field, f"the list must stay under {limits.max_list_bytes} bytes of text")])


def replace_all(drafts: Sequence[DraftFields], limits: Limits, prefix: str = "") -> tuple[Todo, ...]:
    """Validate a whole new list; keep given ids (which must be unique), generate the rest.

    One pass over the list checks, builds and counts it; only a list with a problem takes the
    second pass that names every problem (``prefix`` starts their field paths)."""
    if len(drafts) > limits.max_todos_per_session:
        return _replace_all_checked(drafts, limits, prefix)
    max_content, max_id = limits.max_content_length, limits.max_todo_id_length
    max_blockers = limits.max_blockers_per_todo
    todos: list[Todo] = []
    seen: set[str] = set()
    blockers: list[tuple[str, ...]] = []
    in_list_order = True
    text = 0
    for todo_id, content, status, priority, metadata, description, active_form, owner, blocked_by in drafts:
        if (
            metadata
            or not content
            or len(content) > max_content
            or content.isspace()
            or (status is not None and status not in _STATUSES)
            or (priority is not None and priority not in _PRIORITIES)
            or len(todo_id) > max_id
            or todo_id in seen
        ):
            break  # metadata has its own checks: the full pass
        if blocked_by:
            # Blockers all named earlier in the list (the usual plan) can close no cycle, nor name
            # the todo itself; others are checked once the whole list is known.
            # One or two blockers (most todos) are looked up by hand: ``seen.issuperset`` would
            # build a set from the tuple, and a loop costs more than the lookups.
            count = len(blocked_by)
            if count == 1:
                if in_list_order and blocked_by[0] not in seen:
                    in_list_order = False
            elif count == 2:
                first, second = blocked_by
                if first == second:
                    break
                if in_list_order and (first not in seen or second not in seen):
                    in_list_order = False
            else:
                if len(set(blocked_by)) < count:
                    break
                if in_list_order:
                    for blocker in blocked_by:
                        if blocker not in seen:
                            in_list_order = False
                            break
            blockers.append(blocked_by)
        if description or active_form or owner:
            if _text_violations(description, active_form, owner, "", limits):
                break
            text += _texts_bytes(description, active_form, owner)
        if todo_id:
            seen.add(todo_id)
        else:
            todo_id = new_todo_id()
        text += len(todo_id) + (len(content) if content.isascii() else len(content.encode()))
        todos.append(
            _new_tuple(
                Todo,
                (
                    todo_id,
                    content,
                    _STATUSES[status] if status else _PENDING,
                    _PRIORITIES[priority] if priority else _MEDIUM,
                    NO_ENTRIES,
                    description,
                    active_form,
                    owner,
                    blocked_by,
                    0.0,
                    0.0,
                ),
            )
        )
    else:
        if blockers:
            # Too many blockers, or blockers anywhere in the list: each must be there, and no cycle
            # (a linear search; a todo naming itself is one); a list breaking a rule takes the
            # full pass, which names the culprit.
            if max(map(len, blockers)) > max_blockers or (
                not in_list_order and not graph.known_and_acyclic(todos, chain.from_iterable(blockers))
            ):
                return _replace_all_checked(drafts, limits, prefix)
            edges = sum(map(len, blockers))
            if text + edges * max_id > limits.max_list_bytes:  # else the blockers' ids cannot matter
                text += sum(map(len, chain.from_iterable(blockers)))
        if text > limits.max_list_bytes:
            too_big = f"the list must stay under {limits.max_list_bytes} bytes of text"
            raise InvalidArgument([(f"{prefix}todos", too_big)])
        return tuple(todos)
    return _replace_all_checked(drafts, limits, prefix)


def _replace_all_checked(fields: Sequence[DraftFields], limits: Limits, prefix: str) -> tuple[Todo, ...]:
    """``replace_all`` for a list with metadata or a problem: every problem is named."""
    drafts = [TodoDraft._make(draft) for draft in fields]
    violations: list[tuple[str, str]] = []
    if len(drafts) > limits.max_todos_per_session:
        violations.append((f"{prefix}todos", f"at most {limits.max_todos_per_session} todos per session"))
    seen: set[str] = set()
    for index, draft in enumerate(drafts):
        violations += _draft_violations(draft, f"{prefix}todos[{index}].", limits)
        if draft.id:
            if draft.id in seen:
                violations.append((f"{prefix}todos[{index}].id", f"duplicate id {draft.id!r}"))
            seen.add(draft.id)
    if violations:
        raise InvalidArgument(violations)
    todos = tuple(_materialize(draft) for draft in drafts)
    graph.check_list(todos, limits.max_blockers_per_todo, prefix)
    _check_size(todos, limits, f"{prefix}todos")
    return todos


def insert(
    todos: tuple[Todo, ...], draft: TodoDraft, index: int | None, limits: Limits
) -> tuple[tuple[Todo, ...], Todo, int]:
    """Insert at ``index`` (negative: front; None or past the end: append)."""
    violations = _draft_violations(draft, "todo.", limits)
    if draft.id and any(t.id == draft.id for t in todos):
        violations.append(("todo.id", f"duplicate id {draft.id!r}"))
    if draft.blocked_by and not violations:  # it can close no cycle: nothing names a todo not yet there
        known = {todo.id for todo in todos}
        violations += graph.blocker_violations(
            draft.id, draft.blocked_by, known, limits.max_blockers_per_todo, "todo.blocked_by"
        )
    if violations:
        raise InvalidArgument(violations)
    if len(todos) >= limits.max_todos_per_session:
        raise LimitExceeded("todos per session", limits.max_todos_per_session)
    todo = _materialize(draft)
    position = len(todos) if index is None else min(max(index, 0), len(todos))
    new = (*todos[:position], todo, *todos[position:])
    if _list_bytes(new) > limits.max_list_bytes:  # the list is full, like the count limit above
        raise LimitExceeded("list bytes", limits.max_list_bytes)
    return new, todo, position


def _position(todos: tuple[Todo, ...], session_id: str, todo_id: str) -> int:
    for position, todo in enumerate(todos):
        if todo.id == todo_id:
            return position
    raise TodoNotFound(session_id, todo_id)


def update(
    todos: tuple[Todo, ...],
    session_id: str,
    todo_id: str,
    content: str | None,
    status: str | None,
    priority: str | None,
    limits: Limits,
    set_metadata: Mapping[str, str] = NO_ENTRIES,
    remove_metadata: Iterable[str] = (),
    *,
    graph_changes: GraphChanges | None = None,
) -> tuple[tuple[Todo, ...], Todo]:
    """Change the given fields of one todo; returns the same tuple object when nothing changes."""
    remove_metadata = tuple(remove_metadata)
    changes = graph_changes or NO_GRAPH_CHANGES
    check_update(content, status, priority, set_metadata, remove_metadata, limits, changes)
    position = _position(todos, session_id, todo_id)
    old = todos[position]
    metadata = with_changes(old.metadata, set_metadata, remove_metadata) if set_metadata or remove_metadata else None
    if metadata is not None and _entries_bytes(metadata) > limits.max_metadata_bytes:
        raise InvalidArgument([("metadata", f"keys and values must total at most {limits.max_metadata_bytes} bytes")])
    new = Todo(
        old.id,
        old.content if content is None else content,
        _STATUSES[status] if status else old.status,
        _PRIORITIES[priority] if priority else old.priority,
        old.metadata if metadata is None else metadata,
        old.description if changes.description is None else changes.description,
        old.active_form if changes.active_form is None else changes.active_form,
        old.owner if changes.owner is None else changes.owner,
        _blockers_after(todos, old, changes, limits) if changes.touch_blockers else old.blocked_by,
        old.lease_expires_at,
        old.lease_seconds,
    )
    if new == old:
        return todos, old
    updated = (*todos[:position], new, *todos[position + 1 :])
    if todo_bytes(new) > todo_bytes(old):  # else the list cannot have outgrown its limit
        _check_size(updated, limits, "content")
    return updated, new


def check_update(
    content: str | None,
    status: str | None,
    priority: str | None,
    set_metadata: Mapping[str, str],
    remove_metadata: Iterable[str],
    limits: Limits,
    graph_changes: GraphChanges | None = None,
) -> None:
    """What an update says on its own, checked before the todo it names is looked up."""
    violations = _enum_violations(status, priority, "")
    if content is not None:
        violations += _draft_violations(TodoDraft(content=content), "", limits)
    violations += _metadata_violations(set_metadata, "metadata", limits)
    violations += check_key_changes(set_metadata, remove_metadata, "remove_metadata_keys")
    if graph_changes is not None:
        changes = graph_changes
        violations += _text_violations(changes.description, changes.active_form, changes.owner, "", limits)
        violations += graph.blocker_violations(
            "", changes.add_blocked_by, None, limits.max_blockers_per_todo, "add_blocked_by"
        )
        violations += check_key_changes(changes.add_blocked_by, changes.remove_blocked_by, "remove_blocked_by")
        violations += [
            (f"{field}[{n}]", f"must be at most {limits.max_todo_id_length} characters")
            for field, ids in (
                ("add_blocked_by", changes.add_blocked_by),
                ("remove_blocked_by", changes.remove_blocked_by),
            )
            for n, todo_id in enumerate(ids)
            if len(todo_id) > limits.max_todo_id_length
        ]
    if violations:
        raise InvalidArgument(violations)


def _blockers_after(todos: tuple[Todo, ...], old: Todo, changes: GraphChanges, limits: Limits) -> tuple[str, ...]:
    """``old``'s blockers with ``changes``' removed and added (in that order, new ones last), each
    added one naming another todo of the list and closing no cycle."""
    removed = set(changes.remove_blocked_by)
    blockers = [blocker for blocker in old.blocked_by if blocker not in removed]
    known = {todo.id for todo in todos}
    added = [blocker for blocker in changes.add_blocked_by if blocker not in blockers]
    violations = [
        (f"add_blocked_by[{n}]", why)
        for n, blocker in enumerate(changes.add_blocked_by)
        for _, why in graph.blocker_violations(old.id, (blocker,), known, 1, "")
    ]
    if not violations and added and (cycle := graph.cycle_through(todos, old.id, added)) is not None:
        violations.append(graph.cycle_violation(f"add_blocked_by[{changes.add_blocked_by.index(cycle[1])}]", cycle))
    if len(blockers) + len(added) > limits.max_blockers_per_todo:
        violations.append(("add_blocked_by", f"at most {limits.max_blockers_per_todo} blockers per todo"))
    if violations:
        raise InvalidArgument(violations)
    return (*blockers, *added)


def remove(todos: tuple[Todo, ...], session_id: str, todo_id: str) -> tuple[Todo, ...]:
    """Remove the todo, and its id from every other todo's ``blocked_by``: one change."""
    position = _position(todos, session_id, todo_id)
    return graph.without_blocker((*todos[:position], *todos[position + 1 :]), todo_id)

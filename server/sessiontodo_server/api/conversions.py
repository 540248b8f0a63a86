"""Protobuf <-> domain, at the edge: every session id a caller sends is qualified with the caller's
tenant, and every id sent back is stripped of it (see ``tenancy``), so a tenant only ever names,
sees and counts its own sessions."""

from __future__ import annotations

import hashlib
import weakref
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from typing import Any

from google.protobuf import duration_pb2

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_server.domain import graph, tenancy
from sessiontodo_server.domain.batch import Outcome
from sessiontodo_server.domain.errors import InvalidArgument, TodoError
from sessiontodo_server.domain.store import SessionState
from sessiontodo_server.domain.values import (
    NO_ENTRIES,
    Change,
    ChangeKind,
    DraftFields,
    GraphChanges,
    Limits,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    TodoDraft,
    TodoPriority,
    TodoStatus,
)

_STATUS_TO_PB = {status: pb.TodoStatus.Value(f"TODO_STATUS_{status.name}") for status in TodoStatus}
_PRIORITY_TO_PB = {priority: pb.TodoPriority.Value(f"TODO_PRIORITY_{priority.name}") for priority in TodoPriority}
_KIND_TO_PB = {kind: pb.ChangeKind.Value(f"CHANGE_KIND_{kind.name}") for kind in ChangeKind}
_REASON_TO_PB = {reason: pb.RemovalReason.Value(f"REMOVAL_REASON_{reason.name}") for reason in RemovalReason}


class _EnumNames(dict[int, str | None]):
    """A protobuf enum number's domain name: None when unset, the number itself when unknown
    (proto3 enums are open), for the domain to report. A dict, so the common lookup is C."""

    def __missing__(self, number: int) -> str:
        return str(number)


def _names(numbers: Mapping[TodoStatus, int] | Mapping[TodoPriority, int]) -> _EnumNames:
    names = _EnumNames({0: None})
    names.update((number, member.value) for member, number in numbers.items())
    return names


STATUS_NAMES = _names(_STATUS_TO_PB)
PRIORITY_NAMES = _names(_PRIORITY_TO_PB)


def todo_to_pb(todo: Todo, whole: Sequence[Todo] = ()) -> pb.Todo:
    """One todo, its ``blocks`` read from ``whole``, the list it is in (none given: none)."""
    holder = pb.GetTodosResponse()
    add_todos(holder.todos, (todo,))
    todo_id = todo.id
    holder.todos[0].blocks.extend(waiting.id for waiting in whole if todo_id in waiting.blocked_by)
    return holder.todos[0]


def add_todos(field: Any, todos: Sequence[Todo], whole: Sequence[Todo] | None = None) -> None:
    """Build each todo in place in a repeated field: no intermediate message to copy in. Fields
    are set one by one, not as keyword arguments: upb takes keyword arguments at 1.4x the cost,
    and this runs for every todo of every list response and watch message. Each todo's derived
    ``blocks`` comes from ``whole``, the list ``todos`` were selected from (default: ``todos``)."""
    add, statuses, priorities = field.add, _STATUS_TO_PB, _PRIORITY_TO_PB
    first = len(field)
    edges = False
    for (
        todo_id,
        content,
        status,
        priority,
        metadata,
        description,
        active_form,
        owner,
        blocked_by,
        lease_expires_at,
        lease_seconds,
    ) in todos:
        message = add()
        message.id = todo_id
        message.content = content
        message.status = statuses[status]
        message.priority = priorities[priority]
        if metadata:
            message.metadata.update(metadata)
        if description:
            message.description = description
        if active_form:
            message.active_form = active_form
        if owner:
            message.owner = owner
        if blocked_by:
            message.blocked_by.extend(blocked_by)
            edges = True
        if lease_expires_at:  # kept to the millisecond (``claims``): sent without float noise
            expires_ms, lease_ms = round(lease_expires_at * 1000), round(lease_seconds * 1000)
            message.lease_expires_at.seconds, message.lease_expires_at.nanos = divmod(expires_ms, 1000)
            message.lease_expires_at.nanos *= 1_000_000
            message.lease_duration.seconds, message.lease_duration.nanos = divmod(lease_ms, 1000)
            message.lease_duration.nanos *= 1_000_000
    if edges or (whole is not None and whole is not todos):
        _add_blocks(field, first, todos, todos if whole is None else whole)


def _set_duration(duration: Any, seconds: float) -> None:
    duration.seconds = int(seconds)
    duration.nanos = round(seconds % 1 * 1e9)


def _add_blocks(field: Any, first: int, shown: Sequence[Todo], whole: Sequence[Todo]) -> None:
    waiting = graph.blocks(whole)
    if not waiting:
        return
    for n, todo in enumerate(shown):
        if (blocks := waiting.get(todo.id)) is not None:
            field[first + n].blocks.extend(blocks)


def draft_from_pb(todo: pb.Todo) -> TodoDraft:
    return TodoDraft(
        todo.id,
        todo.content,
        STATUS_NAMES[todo.status],
        PRIORITY_NAMES[todo.priority],
        dict(todo.metadata) if todo.metadata else NO_ENTRIES,  # copying an empty protobuf map costs 2.7 us
        todo.description,
        todo.active_form,
        todo.owner,
        tuple(todo.blocked_by),
    )


_DRAFT_FIELDS = attrgetter(
    "id", "content", "status", "priority", "metadata", "description", "active_form", "owner", "blocked_by"
)


def drafts_from_pb(todos: Iterable[pb.Todo]) -> list[DraftFields]:
    """A list's todos, read once from protobuf, each todo's fields in one C call (the domain then
    validates and builds them in one pass)."""
    statuses, priorities = STATUS_NAMES, PRIORITY_NAMES
    return [
        (
            todo_id,
            content,
            statuses[status],
            priorities[priority],
            dict(metadata) if metadata else NO_ENTRIES,
            description,
            active_form,
            owner,
            tuple(blocked_by) if blocked_by else (),
        )
        for todo_id, content, status, priority, metadata, description, active_form, owner, blocked_by in map(
            _DRAFT_FIELDS, todos
        )
    ]


def fill_session(message: pb.Session, session_id: str, revision: int, todo_count: int, info: SessionInfo) -> None:
    message.session_id = tenancy.local(session_id)
    message.parent_id = tenancy.local(info.parent_id)
    message.revision = revision
    message.todo_count = todo_count
    _set_time(message.created_at, info.created_at)
    _set_time(message.updated_at, info.updated_at)
    if info.labels:
        message.labels.update(info.labels)
    if info.idle_ttl:
        _set_duration(message.idle_ttl, info.idle_ttl)


def _set_time(timestamp: Any, seconds: float) -> None:
    timestamp.seconds = int(seconds)
    timestamp.nanos = min(round(seconds % 1 * 1e9), 999_999_999)


def session_to_pb(state: SessionState) -> pb.Session:
    message = pb.Session()
    fill_session(message, state.session_id, state.revision, len(state.todos), state.info)
    return message


def seconds(duration: duration_pb2.Duration) -> float:
    return duration.seconds + duration.nanos / 1e9


def _encode(change: Change) -> bytes:
    """A change as a WatchTodosResponse, which is also the start of its WatchChangesResponse."""
    message = pb.WatchTodosResponse(
        kind=_KIND_TO_PB[change.kind],
        revision=change.revision,
        todo_id=change.todo_id,
        session_id=tenancy.local(change.session_id),
        origin=change.origin,
        removal_reason=_REASON_TO_PB[change.reason] if change.reason else pb.REMOVAL_REASON_UNSPECIFIED,
    )
    add_todos(message.todos, change.todos)
    if change.info is not None:
        fill_session(message.session, change.session_id, change.revision, len(change.todos), change.info)
    return message.SerializeToString()


class _SharedEncodings:
    """One encoding per published change, shared by all its watchers and feeds, living exactly
    as long as the change does (in a history, a feed or a watcher's buffer): nothing outlives
    its watchers, and the memory budget counts it with the change (``budget.change_bytes``)."""

    def __init__(self) -> None:
        self._entries: weakref.WeakKeyDictionary[Change, bytes] = weakref.WeakKeyDictionary()

    def __call__(self, change: Change) -> bytes:
        encoded = self._entries.get(change)
        if encoded is None:
            encoded = self._entries[change] = _encode(change)
        return encoded


_encode_shared = _SharedEncodings()


def encode_change(change: Change) -> bytes:
    """Changes made for one watcher (cursor 0: snapshots, resets, progress) are not worth caching."""
    return _encode_shared(change) if change.cursor else _encode(change)


_CURSOR_FIELD = pb.WatchChangesResponse.DESCRIPTOR.fields_by_name["cursor"].number


def encode_feed_message(change: Change, cursor: str) -> bytes:
    """A WatchChangesResponse: the change's shared encoding with the cursor field appended
    (fields 1 to 8 of both messages are the same, and protobuf messages concatenate)."""
    if not cursor:
        return encode_change(change)
    return encode_change(change) + pb.WatchChangesResponse(cursor=cursor).SerializeToString()


def optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


def qualified(session_id: str, field: str = "session_id") -> str:
    """The caller's id as stored: qualified with the current call's tenant."""
    return tenancy.qualify(tenancy.current(), session_id, field)


def filter_from_pb(message: pb.SessionFilter) -> SessionFilter:
    session_ids = frozenset(qualified(sid, f"filter.session_ids[{i}]") for i, sid in enumerate(message.session_ids))
    parent_id = qualified(message.parent_id, "filter.parent_id")
    return SessionFilter(session_ids, parent_id, dict(message.labels), tenancy.current())


def add_results(field: Any, outcomes: Iterable[Outcome], lists: Iterable[Sequence[Todo]]) -> None:
    """A batch's outcomes as WriteResults, built in place; ``lists``: each write's list as it
    left it (for its todo's ``blocks``; empty when not known)."""
    add = field.add
    for outcome, whole in zip(outcomes, lists, strict=True):
        result = add(revision=outcome.revision, changed=outcome.changed, index=outcome.position)
        if outcome.todo is not None:
            result.todo.CopyFrom(todo_to_pb(outcome.todo, whole))
        if outcome.todo_ids:
            result.todo_ids.extend(outcome.todo_ids)
        if outcome.removed:
            result.removed_session_ids.extend(map(tenancy.local, outcome.removed))


def fingerprint(request: pb.BatchWriteRequest) -> str:
    """What a batch asks for, request id aside: a retry is byte for byte the same batch."""
    asked = pb.BatchWriteRequest()
    asked.CopyFrom(request)
    asked.request_id = ""
    return hashlib.blake2b(asked.SerializeToString(deterministic=True), digest_size=16).hexdigest()


def operation_name(request: pb.BatchWriteRequest, index: int) -> str:
    """The name of the operation set in the batch's ``index``-th write (``add_todo``...)."""
    return request.writes[index].WhichOneof("operation") or "operation"


def in_write(error: TodoError, prefix: str) -> TodoError:
    """A batch's error with its BadRequest field paths inside their write (``writes[3].add_todo.todo.content``)."""
    if isinstance(error, InvalidArgument):
        inside = InvalidArgument([(f"{prefix}{field}", why) for field, why in error.violations])
        inside.write_index, inside.args = error.write_index, error.args
        return inside
    return error


def selection(message: pb.TodoFilter, field: str = "filter") -> tuple[bool, str | None]:
    """A read's todo filter: only ready todos, and whose (None: anyone's; "": no one's)."""
    owner = message.owner if message.HasField("owner") else None
    if owner is not None and len(owner) > _MAX_OWNER_LENGTH:
        raise InvalidArgument([(f"{field}.owner", f"must be at most {_MAX_OWNER_LENGTH} characters")])
    return message.ready, owner


_MAX_OWNER_LENGTH = Limits().max_owner_length


def graph_changes(message: pb.UpdateTodoRequest) -> GraphChanges | None:
    """What an UpdateTodo asks of the task-graph fields, or None when it asks nothing of them."""
    if not (
        message.add_blocked_by
        or message.remove_blocked_by
        or message.HasField("description")
        or message.HasField("active_form")
        or message.HasField("owner")
    ):
        return None
    return GraphChanges(
        optional(message, "description"),
        optional(message, "active_form"),
        optional(message, "owner"),
        tuple(message.add_blocked_by),
        tuple(message.remove_blocked_by),
    )


def lease_seconds(message: pb.ClaimTodoRequest | pb.RenewClaimRequest) -> float | None:
    return seconds(message.lease_duration) if message.HasField("lease_duration") else None

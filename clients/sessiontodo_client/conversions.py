"""Pure translations between the wire messages (``sessiontodo.v1``) and the typed models.

Shared by the async client and ``sessiontodoctl``'s blocking calls, so the two can never
disagree about the wire. Proto3 enums are open: a status or priority this client has no name
for stays its number; a change kind it has no name for is skipped by the watches.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import duration_pb2, timestamp_pb2

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client.models import (
    AddedTodo,
    AddTodoWrite,
    ChangeKind,
    Claim,
    ClaimTodoWrite,
    CreateSessionWrite,
    FeedEvent,
    ReleaseTodoWrite,
    RemovalReason,
    RemoveSessionWrite,
    RemoveTodoWrite,
    RenewClaimWrite,
    ReplaceTodosWrite,
    Session,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    UpdateSessionWrite,
    UpdateTodoWrite,
    WatchEvent,
    Write,
    WriteResult,
)

STATUS_TO_PB = {status: pb.TodoStatus.Value(f"TODO_STATUS_{status.name}") for status in TodoStatus}
PRIORITY_TO_PB = {priority: pb.TodoPriority.Value(f"TODO_PRIORITY_{priority.name}") for priority in TodoPriority}
_STATUS_FROM_PB = {number: status for status, number in STATUS_TO_PB.items()}
_PRIORITY_FROM_PB = {number: priority for priority, number in PRIORITY_TO_PB.items()}
_KIND_FROM_PB = {pb.ChangeKind.Value(f"CHANGE_KIND_{kind.name}"): kind for kind in ChangeKind}
_REASON_FROM_PB = {pb.RemovalReason.Value(f"REMOVAL_REASON_{reason.name}"): reason for reason in RemovalReason}


def todo_to_pb(todo: Todo) -> pb.Todo:
    """The wire todo; a status or priority read as a number (a newer server's) goes back as that number.
    What the server derives (``blocks``, the lease) is not sent."""
    status, priority = todo.status, todo.priority
    return pb.Todo(
        id=todo.id,
        content=todo.content,
        status=STATUS_TO_PB[status] if isinstance(status, TodoStatus) else pb.TodoStatus.ValueType(status),
        priority=(
            PRIORITY_TO_PB[priority] if isinstance(priority, TodoPriority) else pb.TodoPriority.ValueType(priority)
        ),
        metadata=todo.metadata,
        description=todo.description,
        active_form=todo.active_form,
        owner=todo.owner,
        blocked_by=todo.blocked_by,
    )


def todo_from_pb(todo: pb.Todo) -> Todo:
    """The typed todo; a status or priority this client has no name for stays its number (see ``Todo``)."""
    return Todo(
        id=todo.id,
        content=todo.content,
        status=_STATUS_FROM_PB.get(todo.status, todo.status),
        priority=_PRIORITY_FROM_PB.get(todo.priority, todo.priority),
        metadata=dict(todo.metadata),
        description=todo.description,
        active_form=todo.active_form,
        owner=todo.owner,
        blocked_by=list(todo.blocked_by),
        blocks=list(todo.blocks),
        lease_expires_at=time_from_pb(todo.lease_expires_at),
        lease_duration=todo.lease_duration.ToNanoseconds() / 1e9 if todo.HasField("lease_duration") else None,
    )


def todo_filter_to_pb(*, ready: bool, owner: str | None) -> pb.TodoFilter | None:
    """A read's filter (only ready todos, only ``owner``'s; "" only unowned ones), or None for the whole list."""
    if not ready and owner is None:
        return None
    return pb.TodoFilter(ready=ready, owner=owner)


def claim_from_pb(response: pb.ClaimTodoResponse | pb.RenewClaimResponse) -> Claim:
    """A claim's answer; a renewal always changed its lease."""
    changed = response.changed if isinstance(response, pb.ClaimTodoResponse) else True
    todo = todo_from_pb(response.todo) if response.HasField("todo") else None
    return Claim(todo=todo, revision=response.revision, changed=changed)


def todo_list_from_pb(response: pb.GetTodosResponse | pb.ReplaceTodosResponse) -> TodoList:
    """A response's todos at its revision."""
    return TodoList(todos=[todo_from_pb(todo) for todo in response.todos], revision=response.revision)


def added_todo_from_pb(response: pb.AddTodoResponse) -> AddedTodo:
    return AddedTodo(todo=todo_from_pb(response.todo), index=response.index, revision=response.revision)


def updated_todo_from_pb(response: pb.UpdateTodoResponse | pb.ReleaseTodoResponse) -> UpdatedTodo:
    """An update's answer; a release always changed the todo."""
    changed = response.changed if isinstance(response, pb.UpdateTodoResponse) else True
    return UpdatedTodo(todo=todo_from_pb(response.todo), revision=response.revision, changed=changed)


def status_to_pb(status: TodoStatus | None) -> pb.TodoStatus.ValueType:
    """A status to set, or UNSPECIFIED (None: leave it as it is)."""
    return STATUS_TO_PB[status] if status else pb.TODO_STATUS_UNSPECIFIED


def priority_to_pb(priority: TodoPriority | None) -> pb.TodoPriority.ValueType:
    """A priority to set, or UNSPECIFIED (None: leave it as it is)."""
    return PRIORITY_TO_PB[priority] if priority else pb.TODO_PRIORITY_UNSPECIFIED


def time_from_pb(timestamp: timestamp_pb2.Timestamp) -> datetime | None:
    """An aware UTC time; the zero timestamp (unset) is None."""
    if not (timestamp.seconds or timestamp.nanos):
        return None
    return datetime.fromtimestamp(timestamp.seconds + timestamp.nanos / 1e9, UTC)


def duration_to_pb(seconds: float | None) -> duration_pb2.Duration | None:
    """A duration in whole nanoseconds; None (leave unset) stays None."""
    if seconds is None:
        return None
    duration = duration_pb2.Duration()
    duration.FromNanoseconds(round(seconds * 1e9))
    return duration


def session_from_pb(session: pb.Session) -> Session:
    return Session(
        session_id=session.session_id,
        parent_id=session.parent_id,
        revision=session.revision,
        todo_count=session.todo_count,
        labels=dict(session.labels),
        created_at=time_from_pb(session.created_at),
        updated_at=time_from_pb(session.updated_at),
        idle_ttl=session.idle_ttl.ToNanoseconds() / 1e9 if session.HasField("idle_ttl") else None,
    )


def is_known_kind(message: pb.WatchTodosResponse | pb.WatchChangesResponse) -> bool:
    """Whether this client knows the message's change kind; watches skip a newer server's kinds
    (proto3 enums are open), since the next change carries the whole list again."""
    return message.kind in _KIND_FROM_PB


def _event_fields(message: pb.WatchTodosResponse | pb.WatchChangesResponse) -> dict[str, Any]:
    """The fields a watch message and a feed message share, as model arguments."""
    return {
        "session_id": message.session_id,
        "kind": _KIND_FROM_PB[message.kind],
        "revision": message.revision,
        "todo_id": message.todo_id,
        "todos": [todo_from_pb(todo) for todo in message.todos],
        "origin": message.origin,
        "removal_reason": _REASON_FROM_PB.get(message.removal_reason),
        "session": session_from_pb(message.session) if message.HasField("session") else None,
    }


def event_from_pb(message: pb.WatchTodosResponse) -> WatchEvent:
    return WatchEvent(**_event_fields(message))


def feed_event_from_pb(message: pb.WatchChangesResponse) -> FeedEvent:
    return FeedEvent(**_event_fields(message), cursor=message.cursor)


def write_to_pb(write: Write) -> pb.Write:
    """One write of a batch as its rpc's request."""
    match write:
        case ReplaceTodosWrite():
            todos = [todo_to_pb(todo) for todo in write.todos]
            return pb.Write(
                replace_todos=pb.ReplaceTodosRequest(
                    session_id=write.session_id, todos=todos, expected_revision=write.expected_revision
                )
            )
        case AddTodoWrite():
            return pb.Write(
                add_todo=pb.AddTodoRequest(
                    session_id=write.session_id,
                    todo=todo_to_pb(write.todo),
                    index=write.index,
                    expected_revision=write.expected_revision,
                )
            )
        case UpdateTodoWrite():
            return pb.Write(
                update_todo=pb.UpdateTodoRequest(
                    session_id=write.session_id,
                    todo_id=write.todo_id,
                    content=write.content,
                    status=status_to_pb(write.status),
                    priority=priority_to_pb(write.priority),
                    metadata=write.metadata,
                    remove_metadata_keys=write.remove_metadata,
                    description=write.description,
                    active_form=write.active_form,
                    owner=write.owner,
                    add_blocked_by=write.add_blocked_by,
                    remove_blocked_by=write.remove_blocked_by,
                    expected_revision=write.expected_revision,
                )
            )
        case RemoveTodoWrite():
            return pb.Write(
                remove_todo=pb.RemoveTodoRequest(
                    session_id=write.session_id, todo_id=write.todo_id, expected_revision=write.expected_revision
                )
            )
        case ClaimTodoWrite():
            return pb.Write(
                claim_todo=pb.ClaimTodoRequest(
                    session_id=write.session_id,
                    todo_id=write.todo_id,
                    owner=write.owner,
                    lease_duration=duration_to_pb(write.lease),
                    expected_revision=write.expected_revision,
                )
            )
        case RenewClaimWrite():
            return pb.Write(
                renew_claim=pb.RenewClaimRequest(
                    session_id=write.session_id,
                    todo_id=write.todo_id,
                    owner=write.owner,
                    lease_duration=duration_to_pb(write.lease),
                    expected_revision=write.expected_revision,
                )
            )
        case ReleaseTodoWrite():
            return pb.Write(
                release_todo=pb.ReleaseTodoRequest(
                    session_id=write.session_id,
                    todo_id=write.todo_id,
                    owner=write.owner,
                    expected_revision=write.expected_revision,
                )
            )
        case CreateSessionWrite():
            return pb.Write(
                create_session=pb.CreateSessionRequest(
                    session_id=write.session_id,
                    parent_id=write.parent_id,
                    labels=write.labels,
                    idle_ttl=duration_to_pb(write.idle_ttl),
                )
            )
        case UpdateSessionWrite():
            return pb.Write(
                update_session=pb.UpdateSessionRequest(
                    session_id=write.session_id,
                    labels=write.labels,
                    remove_label_keys=write.remove_labels,
                    idle_ttl=duration_to_pb(write.idle_ttl),
                    expected_revision=write.expected_revision,
                )
            )
        case RemoveSessionWrite():
            return pb.Write(remove_session=pb.RemoveSessionRequest(session_id=write.session_id))


def write_result_from_pb(result: pb.WriteResult) -> WriteResult:
    return WriteResult(
        revision=result.revision,
        changed=result.changed,
        todo=todo_from_pb(result.todo) if result.HasField("todo") else None,
        index=result.index,
        todo_ids=list(result.todo_ids),
        removed_session_ids=list(result.removed_session_ids),
    )

"""gRPC transport: protobuf <-> domain conversions, the one error table, the servicer.

Servicer methods stay thin: convert the request, call the ``TodoBook``, convert the
result. Domain errors become gRPC statuses with google.rpc details (BadRequest field
violations, ErrorInfo) that grpcurl and every gRPC client can read. Every session id a
caller sends is qualified with the caller's tenant, and every id sent back is stripped of
it (see ``tenancy``), so a tenant only ever names, sees and counts its own sessions.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import aclosing
from typing import Any, NoReturn, TypeVar

import grpc
from google.protobuf import message_factory
from google.protobuf.descriptor import ServiceDescriptor
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_server.api import request_guard
from sessiontodo_server.api.status_trailers import fit_status
from sessiontodo_server.domain import errors, tenancy
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.store import SessionState
from sessiontodo_server.domain.todos import (
    NO_ENTRIES,
    Change,
    ChangeKind,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    TodoDraft,
    TodoPriority,
    TodoStatus,
)

ERROR_DOMAIN = "sessiontodo.v1"

_STATUS_TO_PB = {status: pb.TodoStatus.Value(f"TODO_STATUS_{status.name}") for status in TodoStatus}
_PRIORITY_TO_PB = {priority: pb.TodoPriority.Value(f"TODO_PRIORITY_{priority.name}") for priority in TodoPriority}
_KIND_TO_PB = {kind: pb.ChangeKind.Value(f"CHANGE_KIND_{kind.name}") for kind in ChangeKind}
_REASON_TO_PB = {reason: pb.RemovalReason.Value(f"REMOVAL_REASON_{reason.name}") for reason in RemovalReason}
_STATUS_FROM_PB: dict[int, TodoStatus] = {number: status for status, number in _STATUS_TO_PB.items()}
_PRIORITY_FROM_PB: dict[int, TodoPriority] = {number: priority for priority, number in _PRIORITY_TO_PB.items()}

# The one table from domain errors to gRPC codes, with the ErrorInfo reason sent along.
_ERROR_TABLE: dict[type[errors.TodoError], tuple[int, str]] = {
    errors.InvalidArgument: (code_pb2.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    errors.SessionNotFound: (code_pb2.NOT_FOUND, "SESSION_NOT_FOUND"),
    errors.TodoNotFound: (code_pb2.NOT_FOUND, "TODO_NOT_FOUND"),
    errors.RevisionMismatch: (code_pb2.ABORTED, "REVISION_MISMATCH"),
    errors.ParentMismatch: (code_pb2.FAILED_PRECONDITION, "PARENT_MISMATCH"),
    errors.LimitExceeded: (code_pb2.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED"),
    errors.RequestIdReused: (code_pb2.FAILED_PRECONDITION, "REQUEST_ID_REUSED"),
    errors.Unavailable: (code_pb2.UNAVAILABLE, "UNAVAILABLE"),
}

# Error attributes as AIP-193 ErrorInfo metadata keys (lowerCamel).
_ERROR_METADATA = {
    "session_id": "sessionId",
    "todo_id": "todoId",
    "request_id": "requestId",
    "expected": "expectedRevision",
    "actual": "actualRevision",
    "parent_id": "parentId",
    "limit": "limit",
    "value": "value",
}


def to_status(error: errors.TodoError) -> status_pb2.Status:
    """The google.rpc.Status for a domain error, with its AIP-193 details."""
    code, reason = _ERROR_TABLE[type(error)]
    message = str(error)
    for attribute in ("session_id", "parent_id"):  # ids in the caller's own terms
        if (qualified := getattr(error, attribute, None)) and qualified != tenancy.local(qualified):
            message = message.replace(repr(qualified), repr(tenancy.local(qualified)))
    status = status_pb2.Status(code=code, message=message)
    if isinstance(error, errors.InvalidArgument):
        violations = [
            error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
            for field, description in error.violations
        ]
        status.details.add().Pack(error_details_pb2.BadRequest(field_violations=violations))
    elif isinstance(error, errors.LimitExceeded):
        violation = error_details_pb2.QuotaFailure.Violation(subject=error.limit, description=str(error))
        status.details.add().Pack(error_details_pb2.QuotaFailure(violations=[violation]))
    elif isinstance(error, errors.Unavailable):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(int(error.retry_after * 1000))
        status.details.add().Pack(retry)
    metadata = {
        key: tenancy.local(value) if attribute in ("session_id", "parent_id") else str(value)
        for attribute, key in _ERROR_METADATA.items()
        if (value := getattr(error, attribute, None)) is not None
    }
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=metadata))
    return status


# Conversions


def _todo_fields(todo: Todo) -> dict[str, Any]:
    fields = {
        "id": todo.id,
        "content": todo.content,
        "status": _STATUS_TO_PB[todo.status],
        "priority": _PRIORITY_TO_PB[todo.priority],
    }
    if todo.metadata:
        fields["metadata"] = todo.metadata
    return fields


def todo_to_pb(todo: Todo) -> pb.Todo:
    return pb.Todo(**_todo_fields(todo))


def _add_todos(field: Any, todos: Iterable[Todo]) -> None:
    """Build each todo in place in a repeated field: no intermediate message to copy in."""
    add = field.add
    for todo in todos:
        add(**_todo_fields(todo))


def _enum_name(number: int, table: dict[int, Any]) -> str | None:
    """The domain name of a protobuf enum number: None when unset, the number itself when
    unknown (proto3 enums are open), for the domain to report."""
    if number == 0:
        return None
    known = table.get(number)
    return str(number) if known is None else known.value


def draft_from_pb(todo: pb.Todo) -> TodoDraft:
    return TodoDraft(
        todo.id,
        todo.content,
        _enum_name(todo.status, _STATUS_FROM_PB),
        _enum_name(todo.priority, _PRIORITY_FROM_PB),
        dict(todo.metadata) if todo.metadata else NO_ENTRIES,  # copying an empty protobuf map costs 2.7 us
    )


def _fill_session(message: pb.Session, session_id: str, revision: int, todo_count: int, info: SessionInfo) -> None:
    message.session_id = tenancy.local(session_id)
    message.parent_id = tenancy.local(info.parent_id)
    message.revision = revision
    message.todo_count = todo_count
    _set_time(message.created_at, info.created_at)
    _set_time(message.updated_at, info.updated_at)
    if info.labels:
        message.labels.update(info.labels)
    if info.idle_ttl:
        message.idle_ttl.seconds = int(info.idle_ttl)
        message.idle_ttl.nanos = round(info.idle_ttl % 1 * 1e9)


def _set_time(timestamp: Any, seconds: float) -> None:
    timestamp.seconds = int(seconds)
    timestamp.nanos = min(round(seconds % 1 * 1e9), 999_999_999)


def session_to_pb(state: SessionState) -> pb.Session:
    message = pb.Session()
    _fill_session(message, state.session_id, state.revision, len(state.todos), state.info)
    return message


def _seconds(duration: Any) -> float:
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
    _add_todos(message.todos, change.todos)
    if change.info is not None:
        _fill_session(message.session, change.session_id, change.revision, len(change.todos), change.info)
    return message.SerializeToString()


WATCH_ACCEPTED = (("sessiontodo-watch", "accepted"),)
"""Headers a watch stream sends as soon as it is taken, before any message: a client can tell a quiet
stream from one still connecting (the typed client's ``resume.ACCEPTED_HEADER``)."""


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


def _optional(message: Any, field: str) -> Any:
    return getattr(message, field) if message.HasField(field) else None


def _qualified(session_id: str, field: str = "session_id") -> str:
    """The caller's id as stored: qualified with the current call's tenant."""
    return tenancy.qualify(tenancy.current(), session_id, field)


def _filter_from_pb(message: pb.SessionFilter) -> SessionFilter:
    session_ids = frozenset(_qualified(sid, f"filter.session_ids[{i}]") for i, sid in enumerate(message.session_ids))
    parent_id = _qualified(message.parent_id, "filter.parent_id")
    return SessionFilter(session_ids, parent_id, dict(message.labels), tenancy.current())


# Servicer

Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


async def abort(context: grpc.aio.ServicerContext, error: errors.TodoError) -> NoReturn:
    """End the call with the error's status, trimmed to fit the client's metadata limit."""
    await context.abort_with_status(rpc_status.to_status(fit_status(to_status(error))))
    raise AssertionError("abort_with_status returned")  # it always raises


def _translating_errors(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await handler(self, request, context)
        except errors.TodoError as error:
            await abort(context, error)

    return wrapper  # type: ignore[return-value]


class TodoServicer:
    """``sessiontodo.v1.TodoService`` over a ``TodoBook``."""

    def __init__(self, book: TodoBook) -> None:
        self._book = book

    @_translating_errors
    async def CreateSession(self, request: pb.CreateSessionRequest, context: Any) -> pb.CreateSessionResponse:
        state, created = await self._book.create_session(
            _qualified(request.session_id),
            _qualified(request.parent_id, "parent_id"),
            dict(request.labels),
            _seconds(request.idle_ttl) if request.HasField("idle_ttl") else None,
            request.origin,
        )
        return pb.CreateSessionResponse(session=session_to_pb(state), created=created)

    @_translating_errors
    async def GetSession(self, request: pb.GetSessionRequest, context: Any) -> pb.GetSessionResponse:
        return pb.GetSessionResponse(session=session_to_pb(await self._book.get(_qualified(request.session_id))))

    @_translating_errors
    async def UpdateSession(self, request: pb.UpdateSessionRequest, context: Any) -> pb.UpdateSessionResponse:
        state, changed = await self._book.update_session(
            _qualified(request.session_id),
            dict(request.labels),
            list(request.remove_label_keys),
            _seconds(request.idle_ttl) if request.HasField("idle_ttl") else None,
            _optional(request, "expected_revision"),
            request.origin,
        )
        return pb.UpdateSessionResponse(session=session_to_pb(state), changed=changed)

    @_translating_errors
    async def RemoveSession(self, request: pb.RemoveSessionRequest, context: Any) -> pb.RemoveSessionResponse:
        removed = await self._book.remove_session(_qualified(request.session_id), request.origin)
        return pb.RemoveSessionResponse(existed=bool(removed), removed_session_ids=map(tenancy.local, removed))

    @_translating_errors
    async def RemoveAllSessions(
        self, request: pb.RemoveAllSessionsRequest, context: Any
    ) -> pb.RemoveAllSessionsResponse:
        removed = await self._book.remove_all_sessions(request.origin, tenancy.current())
        return pb.RemoveAllSessionsResponse(removed_count=removed)

    @_translating_errors
    async def ListSessions(self, request: pb.ListSessionsRequest, context: Any) -> pb.ListSessionsResponse:
        sessions, token = await self._book.list_sessions(
            request.page_size,
            request.page_token,
            _qualified(request.parent_id, "parent_id"),
            dict(request.labels),
            tenancy.current(),
        )
        return pb.ListSessionsResponse(sessions=[session_to_pb(s) for s in sessions], next_page_token=token)

    @_translating_errors
    async def GetTodos(self, request: pb.GetTodosRequest, context: Any) -> pb.GetTodosResponse:
        state = await self._book.get(_qualified(request.session_id))
        response = pb.GetTodosResponse(revision=state.revision)
        _add_todos(response.todos, state.todos)
        return response

    @_translating_errors
    async def BatchGetTodos(self, request: pb.BatchGetTodosRequest, context: Any) -> pb.BatchGetTodosResponse:
        session_ids = [_qualified(sid, f"session_ids[{i}]") for i, sid in enumerate(request.session_ids)]
        found, missing = await self._book.batch_get(session_ids)
        response = pb.BatchGetTodosResponse(missing_session_ids=map(tenancy.local, missing))
        for state in found:
            entry = response.sessions.add()
            _fill_session(entry.session, state.session_id, state.revision, len(state.todos), state.info)
            _add_todos(entry.todos, state.todos)
        return response

    @_translating_errors
    async def ReplaceTodos(self, request: pb.ReplaceTodosRequest, context: Any) -> pb.ReplaceTodosResponse:
        drafts = [draft_from_pb(todo) for todo in request.todos]
        state = await self._book.replace(
            _qualified(request.session_id), drafts, _optional(request, "expected_revision"), request.origin
        )
        response = pb.ReplaceTodosResponse(revision=state.revision)
        _add_todos(response.todos, state.todos)
        return response

    @_translating_errors
    async def AddTodo(self, request: pb.AddTodoRequest, context: Any) -> pb.AddTodoResponse:
        result = await self._book.add(
            _qualified(request.session_id),
            draft_from_pb(request.todo),
            _optional(request, "index"),
            _optional(request, "expected_revision"),
            request.request_id,
            request.origin,
        )
        return pb.AddTodoResponse(todo=todo_to_pb(result.todo), index=result.index, revision=result.revision)

    @_translating_errors
    async def UpdateTodo(self, request: pb.UpdateTodoRequest, context: Any) -> pb.UpdateTodoResponse:
        todo, revision, changed = await self._book.update(
            _qualified(request.session_id),
            request.todo_id,
            _optional(request, "content"),
            _enum_name(request.status, _STATUS_FROM_PB),
            _enum_name(request.priority, _PRIORITY_FROM_PB),
            _optional(request, "expected_revision"),
            dict(request.metadata),
            list(request.remove_metadata_keys),
            request.origin,
        )
        return pb.UpdateTodoResponse(todo=todo_to_pb(todo), revision=revision, changed=changed)

    @_translating_errors
    async def RemoveTodo(self, request: pb.RemoveTodoRequest, context: Any) -> pb.RemoveTodoResponse:
        revision = await self._book.remove_todo(
            _qualified(request.session_id), request.todo_id, _optional(request, "expected_revision"), request.origin
        )
        return pb.RemoveTodoResponse(revision=revision)

    async def WatchTodos(
        self, request: pb.WatchTodosRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """Yields pre-encoded messages; a client cancel lands here as CancelledError and propagates
        (swallowing it leaks native memory per stream: grpc/grpc#43360)."""
        await context.send_initial_metadata(WATCH_ACCEPTED)
        try:
            watch = self._book.watch(_qualified(request.session_id), _optional(request, "after_revision"))
            async with aclosing(watch) as changes:
                async for change in changes:
                    yield encode_change(change)
        except errors.TodoError as error:
            await abort(context, error)

    async def WatchChanges(
        self, request: pb.WatchChangesRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        """The feed, pre-encoded like WatchTodos (and cancelled the same way)."""
        await context.send_initial_metadata(WATCH_ACCEPTED)
        try:
            feed = self._book.feed(request.after_cursor, request.include_snapshot, _filter_from_pb(request.filter))
            async with aclosing(feed) as messages:
                async for message in messages:
                    yield encode_feed_message(message.change, message.cursor)
        except errors.TodoError as error:
            await abort(context, error)


def add_todo_service(
    server: grpc.aio.Server, servicer: object, request_timeout: float = request_guard.DEFAULT_REQUEST_TIMEOUT
) -> None:
    """Register every rpc of the service on ``servicer``'s methods of the same names (the
    bench's echo baseline registers the same way); the streams send bytes already encoded."""
    _add_guarded(server, pb.DESCRIPTOR.services_by_name["TodoService"], servicer, request_timeout, encoded=True)


def add_health_service(
    server: grpc.aio.Server, servicer: object, request_timeout: float = request_guard.DEFAULT_REQUEST_TIMEOUT
) -> None:
    """grpc.health.v1 behind the same guard (its generated registration waits for a request
    message forever)."""
    _add_guarded(server, health_pb2.DESCRIPTOR.services_by_name["Health"], servicer, request_timeout, encoded=False)


def _add_guarded(
    server: grpc.aio.Server, service: ServiceDescriptor, servicer: object, request_timeout: float, encoded: bool
) -> None:
    """Each rpc behind the wire guard: a request message that does not arrive within
    ``request_timeout`` seconds or does not parse ends the call."""
    deadlines = request_guard.Deadlines(request_timeout)
    handlers = {}
    for method in service.methods:
        parse = message_factory.GetMessageClass(method.input_type).FromString
        serialize = message_factory.GetMessageClass(method.output_type).SerializeToString
        behaviour = getattr(servicer, method.name)
        if method.server_streaming:
            stream_serialize = None if encoded else serialize
            handlers[method.name] = request_guard.server_streaming_handler(
                method.full_name, behaviour, parse, stream_serialize, deadlines, abort
            )
        else:
            handlers[method.name] = request_guard.unary_handler(
                method.full_name, behaviour, parse, serialize, deadlines, abort
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
    server.add_registered_method_handlers(service.full_name, handlers)

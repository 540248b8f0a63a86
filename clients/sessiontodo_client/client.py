"""The typed async client of ``sessiontodo.v1.TodoService``.

The channel is injected (``TodoClient(channel)``) or made by ``TodoClient.connect``.
Calls whose repetition is harmless are retried while the service is UNAVAILABLE, by the
client's ``RetryPolicy`` (``sessiontodo_client.retry``: full jitter, attempts, a deadline);
``add_todo`` sends a request id so that its retry can never add twice.
``replace_todos`` and ``remove_todo`` are not retried (UNAVAILABLE may come after the write
was applied): they raise ``Unavailable`` for the caller to decide. ``create_session`` generates
the id when the caller gives none, so its retry can never create two sessions. ``watch`` and
``watch_changes`` reconnect on their own and resume after the last revision (cursor) they
delivered, so their consumer sees every change exactly once, in order, or a RESET where
history was lost.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import grpc
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client.models import (
    AddedTodo,
    ChangeKind,
    FeedEvent,
    RemovalReason,
    Session,
    SessionTodos,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    WatchEvent,
)
from sessiontodo_client.retry import DEFAULT_RETRY, RetryPolicy
from sessiontodo_client.security import ChannelSecurity

log = logging.getLogger(__name__)

T = TypeVar("T")

_STATUS_TO_PB = {status: pb.TodoStatus.Value(f"TODO_STATUS_{status.name}") for status in TodoStatus}
_PRIORITY_TO_PB = {priority: pb.TodoPriority.Value(f"TODO_PRIORITY_{priority.name}") for priority in TodoPriority}
_STATUS_FROM_PB = {number: status for status, number in _STATUS_TO_PB.items()}
_PRIORITY_FROM_PB = {number: priority for priority, number in _PRIORITY_TO_PB.items()}
_KIND_FROM_PB = {pb.ChangeKind.Value(f"CHANGE_KIND_{kind.name}"): kind for kind in ChangeKind}
_REASON_FROM_PB = {pb.RemovalReason.Value(f"REMOVAL_REASON_{reason.name}"): reason for reason in RemovalReason}


# Errors


class ServiceError(Exception):
    """A call failed: ``code`` is the gRPC status; the google.rpc details are unpacked into
    ``reason`` and ``metadata`` (ErrorInfo: e.g. ``sessionId``, ``actualRevision``),
    ``violations`` (BadRequest ``(field, description)``), ``quota_violations`` (QuotaFailure
    ``(subject, description)``) and ``retry_delay`` (RetryInfo, seconds)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        violations: Sequence[tuple[str, str]] = (),
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        quota_violations: Sequence[tuple[str, str]] = (),
        retry_delay: float | None = None,
    ):
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.quota_violations = list(quota_violations)
        self.retry_delay = retry_delay
        super().__init__(f"{code.name}: {message}")


class InvalidArgument(ServiceError):
    pass


class NotFound(ServiceError):
    pass


class Aborted(ServiceError):
    """The expected revision did not match: re-read, then retry the read-modify-write."""


class FailedPrecondition(ServiceError):
    pass


class ResourceExhausted(ServiceError):
    pass


class Unavailable(ServiceError):
    pass


class Unauthenticated(ServiceError):
    """No bearer token, or one the server does not know."""


class PermissionDenied(ServiceError):
    """The token's role may not make this call."""


_ERRORS: dict[grpc.StatusCode, type[ServiceError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def service_error(error: grpc.aio.AioRpcError) -> ServiceError:
    """The typed error for a failed call, with its google.rpc details unpacked."""
    found: dict[str, Any] = {}
    status = rpc_status.from_call(error)
    for detail in status.details if status else ():
        for name, kind in _DETAILS.items():
            if detail.Is(kind.DESCRIPTOR):
                found[name] = kind()
                detail.Unpack(found[name])
    info, bad_request = found.get("info"), found.get("bad_request")
    quota, retry = found.get("quota"), found.get("retry")
    return _ERRORS.get(error.code(), ServiceError)(
        error.code(),
        error.details() or "",
        [(v.field, v.description) for v in bad_request.field_violations] if bad_request else (),
        info.reason if info else "",
        dict(info.metadata) if info else None,
        [(v.subject, v.description) for v in quota.violations] if quota else (),
        retry.retry_delay.ToTimedelta().total_seconds() if retry else None,
    )


_DETAILS: dict[str, Any] = {
    "info": error_details_pb2.ErrorInfo,
    "bad_request": error_details_pb2.BadRequest,
    "quota": error_details_pb2.QuotaFailure,
    "retry": error_details_pb2.RetryInfo,
}


# Conversions


def todo_to_pb(todo: Todo) -> pb.Todo:
    """The wire todo; a status or priority read as a number (a newer server's) goes back as that number."""
    status, priority = todo.status, todo.priority
    return pb.Todo(
        id=todo.id,
        content=todo.content,
        status=_STATUS_TO_PB[status] if isinstance(status, TodoStatus) else pb.TodoStatus.ValueType(status),
        priority=(
            _PRIORITY_TO_PB[priority] if isinstance(priority, TodoPriority) else pb.TodoPriority.ValueType(priority)
        ),
        metadata=todo.metadata,
    )


def todo_from_pb(todo: pb.Todo) -> Todo:
    """The typed todo; a status or priority this client has no name for stays its number (see ``Todo``)."""
    return Todo(
        id=todo.id,
        content=todo.content,
        status=_STATUS_FROM_PB.get(todo.status, todo.status),
        priority=_PRIORITY_FROM_PB.get(todo.priority, todo.priority),
        metadata=dict(todo.metadata),
    )


def _time_from_pb(timestamp: Any) -> datetime | None:
    if not (timestamp.seconds or timestamp.nanos):
        return None
    return datetime.fromtimestamp(timestamp.seconds + timestamp.nanos / 1e9, UTC)


def _duration_to_pb(seconds: float | None) -> Any:
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
        created_at=_time_from_pb(session.created_at),
        updated_at=_time_from_pb(session.updated_at),
        idle_ttl=session.idle_ttl.ToNanoseconds() / 1e9 if session.HasField("idle_ttl") else None,
    )


def _event_fields(message: pb.WatchTodosResponse | pb.WatchChangesResponse) -> dict[str, Any]:
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


def is_known_kind(message: pb.WatchTodosResponse | pb.WatchChangesResponse) -> bool:
    """Whether this client knows the message's change kind; watches skip a newer server's kinds
    (proto3 enums are open), since the next change carries the whole list again."""
    return message.kind in _KIND_FROM_PB


def event_from_pb(message: pb.WatchTodosResponse) -> WatchEvent:
    return WatchEvent(**_event_fields(message))


def feed_event_from_pb(message: pb.WatchChangesResponse) -> FeedEvent:
    return FeedEvent(**_event_fields(message), cursor=message.cursor)


KEEPALIVE_TIME_MS = 30_000
"""How often an idle connection is pinged: well above the 10 s sessiontodo servers accept."""


class TodoClient:
    """Every rpc of ``TodoService`` with typed arguments and results."""

    def __init__(self, channel: grpc.aio.Channel, retry: RetryPolicy = DEFAULT_RETRY, timeout: float = 10.0) -> None:
        self._stub = pb_grpc.TodoServiceStub(channel)
        self._channel = channel
        self._retry = retry
        self._timeout = timeout

    @classmethod
    def connect(
        cls,
        target: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 10.0,
        *,
        security: ChannelSecurity = ChannelSecurity(),
    ) -> TodoClient:
        """A client on a new channel to ``target`` (``host:port``), pinging idle connections; TLS,
        client certificate and bearer token as ``security`` says (default: plaintext, anonymous).
        Raises ``ValueError`` for a token in plaintext to anything but a loopback address.

        The channel reconnects with the retry policy's backoff: gRPC's default grows to 120 s,
        so a long-lived client that outlived a server restart could wait minutes otherwise.
        """
        options = [
            ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.initial_reconnect_backoff_ms", int(retry.initial * 1000)),
            ("grpc.min_reconnect_backoff_ms", int(retry.initial * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(retry.maximum * 1000)),
        ]
        credentials = security.credentials(target)
        if credentials is None:
            channel = grpc.aio.insecure_channel(target, options=options)
        else:
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        return cls(channel, retry, timeout)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> TodoClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _call(self, rpc: Callable[..., Awaitable[T]], request: Any, *, retry: bool = True) -> T:
        """One call, retried by the client's ``RetryPolicy`` while UNAVAILABLE when ``retry``: only for
        calls whose repetition is harmless, since UNAVAILABLE can also come after the server applied a write."""

        def on_retry(error: BaseException, delay: float) -> None:
            log.debug("%s unavailable, retrying in %.2fs", type(request).__name__, delay)

        try:
            if not retry:
                return await rpc(request, timeout=self._timeout)
            return await self._retry.run(lambda: rpc(request, timeout=self._timeout), on_retry=on_retry)
        except grpc.aio.AioRpcError as error:
            raise service_error(error) from None

    async def create_session(
        self,
        session_id: str = "",
        parent_id: str = "",
        *,
        labels: Mapping[str, str] | None = None,
        idle_ttl: float | None = None,
        origin: str = "",
    ) -> tuple[Session, bool]:
        """Get or create; without ``session_id`` a fresh id is generated here, once, so that a
        retried call still creates exactly one session."""
        request = pb.CreateSessionRequest(
            session_id=session_id or f"ses_{uuid.uuid4().hex}",
            parent_id=parent_id,
            labels=labels,
            idle_ttl=_duration_to_pb(idle_ttl),
            origin=origin,
        )
        response = await self._call(self._stub.CreateSession, request)
        return session_from_pb(response.session), response.created

    async def get_session(self, session_id: str) -> Session:
        response = await self._call(self._stub.GetSession, pb.GetSessionRequest(session_id=session_id))
        return session_from_pb(response.session)

    async def update_session(
        self,
        session_id: str,
        *,
        labels: Mapping[str, str] | None = None,
        remove_labels: Iterable[str] = (),
        idle_ttl: float | None = None,
        expected_revision: int | None = None,
        origin: str = "",
    ) -> tuple[Session, bool]:
        """Set and remove labels and/or change the idle TTL (0: never expire); returns the
        session and whether anything changed (a repeat changes nothing, so it is retried)."""
        request = pb.UpdateSessionRequest(
            session_id=session_id,
            labels=labels,
            remove_label_keys=list(remove_labels),
            idle_ttl=_duration_to_pb(idle_ttl),
            expected_revision=expected_revision,
            origin=origin,
        )
        response = await self._call(self._stub.UpdateSession, request)
        return session_from_pb(response.session), response.changed

    async def remove_session(self, session_id: str, *, origin: str = "") -> list[str]:
        """Remove a session and its descendants; returns their ids (empty if it did not exist)."""
        request = pb.RemoveSessionRequest(session_id=session_id, origin=origin)
        response = await self._call(self._stub.RemoveSession, request)
        return list(response.removed_session_ids)

    async def remove_all_sessions(self, *, origin: str = "") -> int:
        response = await self._call(self._stub.RemoveAllSessions, pb.RemoveAllSessionsRequest(origin=origin))
        return response.removed_count

    async def list_sessions(self, *, parent_id: str = "", labels: Mapping[str, str] | None = None) -> list[Session]:
        """Every session (or the children of ``parent_id``, those carrying ``labels``), following pages."""
        sessions: list[Session] = []
        token = ""
        while True:
            request = pb.ListSessionsRequest(page_token=token, parent_id=parent_id, labels=labels)
            response = await self._call(self._stub.ListSessions, request)
            sessions += [session_from_pb(s) for s in response.sessions]
            if not (token := response.next_page_token):
                return sessions

    async def get_todos(self, session_id: str) -> TodoList:
        response = await self._call(self._stub.GetTodos, pb.GetTodosRequest(session_id=session_id))
        return TodoList(todos=[todo_from_pb(t) for t in response.todos], revision=response.revision)

    async def batch_get_todos(self, session_ids: Sequence[str]) -> tuple[list[SessionTodos], list[str]]:
        """The lists of the sessions that exist, in request order, and the ids that name none (asking
        again for those a response had no room for)."""
        found: list[SessionTodos] = []
        missing: list[str] = []
        while True:
            response = await self._call(self._stub.BatchGetTodos, pb.BatchGetTodosRequest(session_ids=session_ids))
            found += [
                SessionTodos(session=session_from_pb(entry.session), todos=[todo_from_pb(t) for t in entry.todos])
                for entry in response.sessions
            ]
            missing += response.missing_session_ids
            if not (session_ids := list(response.unread_session_ids)):
                return found, missing

    async def replace_todos(
        self, session_id: str, todos: Sequence[Todo], expected_revision: int | None = None, *, origin: str = ""
    ) -> TodoList:
        response = await self._call(
            self._stub.ReplaceTodos,
            pb.ReplaceTodosRequest(
                session_id=session_id,
                todos=[todo_to_pb(t) for t in todos],
                expected_revision=expected_revision,
                origin=origin,
            ),
            retry=False,  # todos without ids would be added twice
        )
        return TodoList(todos=[todo_from_pb(t) for t in response.todos], revision=response.revision)

    async def add_todo(
        self,
        session_id: str,
        todo: Todo,
        index: int | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
        *,
        origin: str = "",
    ) -> AddedTodo:
        request = pb.AddTodoRequest(
            session_id=session_id,
            todo=todo_to_pb(todo),
            index=index,
            expected_revision=expected_revision,
            request_id=request_id or uuid.uuid4().hex,
            origin=origin,
        )
        response = await self._call(self._stub.AddTodo, request)
        return AddedTodo(todo=todo_from_pb(response.todo), index=response.index, revision=response.revision)

    async def update_todo(
        self,
        session_id: str,
        todo_id: str,
        *,
        content: str | None = None,
        status: TodoStatus | None = None,
        priority: TodoPriority | None = None,
        metadata: Mapping[str, str] | None = None,
        remove_metadata: Iterable[str] = (),
        expected_revision: int | None = None,
        origin: str = "",
    ) -> UpdatedTodo:
        request = pb.UpdateTodoRequest(
            session_id=session_id,
            todo_id=todo_id,
            content=content,
            status=_STATUS_TO_PB[status] if status else pb.TODO_STATUS_UNSPECIFIED,
            priority=_PRIORITY_TO_PB[priority] if priority else pb.TODO_PRIORITY_UNSPECIFIED,
            metadata=metadata,
            remove_metadata_keys=list(remove_metadata),
            expected_revision=expected_revision,
            origin=origin,
        )
        response = await self._call(self._stub.UpdateTodo, request)
        return UpdatedTodo(todo=todo_from_pb(response.todo), revision=response.revision, changed=response.changed)

    async def remove_todo(
        self, session_id: str, todo_id: str, expected_revision: int | None = None, *, origin: str = ""
    ) -> int:
        response = await self._call(
            self._stub.RemoveTodo,
            pb.RemoveTodoRequest(
                session_id=session_id, todo_id=todo_id, expected_revision=expected_revision, origin=origin
            ),
            retry=False,  # a repeat of a removal that happened would be NOT_FOUND
        )
        return response.revision

    async def watch(
        self, session_id: str, after_revision: int | None = None, *, include_progress: bool = False
    ) -> AsyncGenerator[WatchEvent, None]:
        """Every change of one session, across reconnects, until the session is removed.

        While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and
        resumes after the last revision it yielded. Ends after yielding SESSION_REMOVED;
        raises the ``ServiceError`` of any other failure (NOT_FOUND for an unknown
        session). Breaking out of the loop cancels the underlying call.
        """
        attempt = 0
        while True:
            call = self._stub.WatchTodos(pb.WatchTodosRequest(session_id=session_id, after_revision=after_revision))
            try:
                async for message in call:
                    attempt = 0
                    if not is_known_kind(message):
                        continue
                    event = event_from_pb(message)
                    if event.kind is not ChangeKind.PROGRESS:
                        after_revision = event.revision
                    elif not include_progress:
                        continue
                    yield event
                    if event.kind is ChangeKind.SESSION_REMOVED:
                        return
                return
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise service_error(error) from None
                log.debug("watch of %s interrupted, resuming after %s", session_id, after_revision)
                await asyncio.sleep(self._retry.delay(attempt))
                attempt += 1
            finally:
                call.cancel()

    async def watch_changes(
        self,
        after_cursor: str | None = None,
        *,
        include_snapshot: bool = False,
        session_ids: Sequence[str] = (),
        parent_id: str = "",
        labels: Mapping[str, str] | None = None,
        include_progress: bool = False,
    ) -> AsyncGenerator[FeedEvent, None]:
        """The server-wide feed (``WatchChanges``), across reconnects, for as long as it is read.

        While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and
        resumes after the last cursor it received. A snapshot cut short by a disconnect is
        started again, announced by a RESET (empty session id) as the server would. PROGRESS
        messages (the end-of-snapshot bookmark among them) are yielded only with
        ``include_progress``. Breaking out of the loop cancels the underlying call.
        """
        only = pb.SessionFilter(session_ids=session_ids, parent_id=parent_id, labels=labels)
        cursor = after_cursor or ""
        snapshot = include_snapshot and not cursor
        in_snapshot = False
        attempt = 0
        while True:
            request = pb.WatchChangesRequest(after_cursor=cursor, include_snapshot=snapshot, filter=only)
            call = self._stub.WatchChanges(request)
            try:
                if in_snapshot:
                    yield FeedEvent(session_id="", kind=ChangeKind.RESET, revision=0)
                async for message in call:
                    attempt = 0
                    if not is_known_kind(message):  # skipped, its cursor kept
                        cursor, snapshot = message.cursor or cursor, snapshot and not message.cursor
                        continue
                    event = feed_event_from_pb(message)
                    starts = event.kind in (ChangeKind.SNAPSHOT, ChangeKind.RESET)
                    in_snapshot = starts or (in_snapshot and not event.cursor)
                    if event.cursor:
                        cursor, snapshot = event.cursor, False
                    if event.kind is not ChangeKind.PROGRESS or include_progress:
                        yield event
                return
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.UNAVAILABLE:
                    raise service_error(error) from None
                if in_snapshot:  # a partial snapshot cannot be resumed: ask for a whole one
                    cursor, snapshot = "", True
                log.debug("feed interrupted, resuming after %r", cursor)
                await asyncio.sleep(self._retry.delay(attempt))
                attempt += 1
            finally:
                call.cancel()

"""The typed async client of ``sessiontodo.v1.TodoService``.

The channel is injected (``TodoClient(channel)``) or made by ``TodoClient.connect``.
Calls whose repetition is harmless are retried while the service is UNAVAILABLE, by the
client's ``RetryPolicy`` (``sessiontodo_client.retry``: full jitter, attempts, a deadline);
``add_todo`` and ``claim_todo`` send a request id (generated once per call) so that a retry can
never add or claim twice: it returns the first call's result. Updates and ``renew_claim`` are retried with
or without ``expected_revision``: a conditional repeat applies only while nothing was written
since, so it never writes over a later change (the repeat of one that was applied, its reply
lost, raises ``Aborted``).
``replace_todos``, ``remove_todo`` and ``release_todo`` are not retried (UNAVAILABLE may come after
the write was applied): they raise ``Unavailable`` for the caller to decide. ``create_session`` generates
the id when the caller gives none, so its retry can never create two sessions. ``watch`` and
``watch_changes`` reconnect on their own and resume after the last revision (cursor) they
delivered (``sessiontodo_client.resume``), so their consumer sees every change exactly once, in
order, or a RESET where history was lost. Failures raise the ``sessiontodo_client.errors`` class
of their status code.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client.conversions import (
    added_todo_from_pb,
    claim_from_pb,
    duration_to_pb,
    priority_to_pb,
    session_from_pb,
    status_to_pb,
    todo_filter_to_pb,
    todo_from_pb,
    todo_list_from_pb,
    todo_to_pb,
    updated_todo_from_pb,
    write_result_from_pb,
    write_to_pb,
)
from sessiontodo_client.errors import service_error
from sessiontodo_client.models import (
    AddedTodo,
    Claim,
    FeedEvent,
    Session,
    SessionTodos,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    WatchEvent,
    Write,
    WriteResult,
)
from sessiontodo_client.readiness import ChannelReadiness, NotReady
from sessiontodo_client.resume import ConnectionListener, FeedResume, TodosResume, WatchResume
from sessiontodo_client.retry import DEFAULT_RETRY, RetryPolicy, is_transient
from sessiontodo_client.security import ChannelSecurity
from sessiontodo_client.target import service_target

log = logging.getLogger(__name__)

T = TypeVar("T")
Event = TypeVar("Event", WatchEvent, FeedEvent)

SERVICE_NAME = pb.DESCRIPTOR.services_by_name["TodoService"].full_name
"""``sessiontodo.v1.TodoService``: the name gRPC health checking reports the service under."""

MAX_BATCH_WRITES = 1000
"""The most writes one ``batch_write`` takes (``BatchWriteRequest.writes``: 1 to 1000, todo_service.proto)."""

KEEPALIVE_TIME_MS = 30_000
"""How often an idle connection is pinged: well above the 10 s sessiontodo servers accept."""


def _worth_another_try(error: BaseException) -> bool:
    """Transient, and not a wait for readiness that already took the call's whole timeout."""
    return is_transient(error) and not isinstance(error, NotReady)


class TodoClient:
    """Every rpc of ``TodoService`` with typed arguments and results.

    Each unary call first waits for the channel to be ready, within its ``timeout``
    (``sessiontodo_client.readiness``): a server that is starting or restarting costs a wait, told
    once on the log, not an error. ``target`` only names the server in that line. ``ready_timeout``
    caps that wait below the call's timeout, for a caller that retries on its own schedule (the ACP
    proxy's write queues): past it the call fails at once with ``NotReady``, having sent nothing.
    """

    def __init__(
        self,
        channel: grpc.aio.Channel,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 10.0,
        *,
        target: str = "",
        ready_timeout: float | None = None,
    ) -> None:
        self._stub = pb_grpc.TodoServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)
        self._channel = channel
        self._readiness = ChannelReadiness(channel, target)
        self._retry = retry
        self._timeout = timeout
        self._ready_timeout = timeout if ready_timeout is None else min(ready_timeout, timeout)

    @classmethod
    def connect(
        cls,
        target: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        timeout: float = 10.0,
        *,
        security: ChannelSecurity = ChannelSecurity(),
        ready_timeout: float | None = None,
    ) -> TodoClient:
        """A client on a new channel to ``target`` (``host:port``; a host alone: port 50051), pinging idle
        connections; TLS, client certificate and bearer token as ``security`` says (default: plaintext, anonymous).
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
        target = service_target(target)
        credentials = security.credentials(target)
        if credentials is None:
            channel = grpc.aio.insecure_channel(target, options=options)
        else:
            channel = grpc.aio.secure_channel(target, credentials, options=options)
        return cls(channel, retry, timeout, target=target, ready_timeout=ready_timeout)

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> TodoClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _call(
        self, rpc: Callable[..., Awaitable[T]], request: Any, *, retry: bool = True, wait: bool = True
    ) -> T:
        """One call, once the channel is ready (within the call's timeout) when ``wait``; retried by the
        client's ``RetryPolicy`` while UNAVAILABLE when ``retry``: only for calls whose repetition is
        harmless, since UNAVAILABLE can also come after the server applied a write."""

        async def once() -> T:
            timeout = self._timeout
            if wait:
                timeout -= self._ready_timeout - await self._readiness.wait(self._ready_timeout)
            return await rpc(request, timeout=timeout)

        def on_retry(error: BaseException, delay: float) -> None:
            log.debug("%s unavailable, retrying in %.2fs", type(request).__name__, delay)

        try:
            if not retry:
                return await once()
            return await self._retry.run(once, retry_if=_worth_another_try, on_retry=on_retry)
        except grpc.aio.AioRpcError as error:
            raise service_error(error) from None

    async def serving(self) -> bool:
        """Whether the TodoService reports SERVING to gRPC health checking, asked once over this client's
        channel (so with its TLS and token), at once: it raises the status code's ``ServiceError`` when
        unanswered, without waiting for a server that is not there."""
        request = health_pb2.HealthCheckRequest(service=SERVICE_NAME)
        response = await self._call(self._health.Check, request, retry=False, wait=False)
        return bool(response.status == health_pb2.HealthCheckResponse.SERVING)

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
            idle_ttl=duration_to_pb(idle_ttl),
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
            idle_ttl=duration_to_pb(idle_ttl),
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
        return int(response.removed_count)

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

    async def get_todos(self, session_id: str, *, ready: bool = False, owner: str | None = None) -> TodoList:
        """The session's list at its revision; with ``ready`` only the todos free to take (pending,
        unowned, every blocker finished), with ``owner`` only that owner's ("" only unowned ones)."""
        request = pb.GetTodosRequest(session_id=session_id, filter=todo_filter_to_pb(ready=ready, owner=owner))
        response = await self._call(self._stub.GetTodos, request)
        return todo_list_from_pb(response)

    async def batch_get_todos(
        self, session_ids: Sequence[str], *, ready: bool = False, owner: str | None = None
    ) -> tuple[list[SessionTodos], list[str]]:
        """The lists of the sessions that exist, in request order, and the ids that name none (asking
        again for those a response had no room for); ``ready`` and ``owner`` select todos as ``get_todos``'s."""
        found: list[SessionTodos] = []
        missing: list[str] = []
        todo_filter = todo_filter_to_pb(ready=ready, owner=owner)
        while True:
            request = pb.BatchGetTodosRequest(session_ids=session_ids, filter=todo_filter)
            response = await self._call(self._stub.BatchGetTodos, request)
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
        return todo_list_from_pb(response)

    async def add_todo(
        self,
        session_id: str,
        todo: Todo,
        *,
        index: int | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
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
        return added_todo_from_pb(response)

    async def batch_write(
        self, writes: Sequence[Write], *, request_id: str | None = None, origin: str = ""
    ) -> list[WriteResult]:
        """Up to ``MAX_BATCH_WRITES`` writes, to any sessions, applied in order and atomically (all or
        none): one call instead of one per write. A failing write fails the batch with its error,
        naming it (``writes[i]``, ``error.write_index``). Retried while UNAVAILABLE under one request
        id (generated once unless given), so a retry returns the first call's results and never
        writes twice."""
        request = pb.BatchWriteRequest(
            writes=[write_to_pb(write) for write in writes], request_id=request_id or uuid.uuid4().hex, origin=origin
        )
        response = await self._call(self._stub.BatchWrite, request)
        return [write_result_from_pb(result) for result in response.results]

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
        description: str | None = None,
        active_form: str | None = None,
        owner: str | None = None,
        add_blocked_by: Iterable[str] = (),
        remove_blocked_by: Iterable[str] = (),
        expected_revision: int | None = None,
        origin: str = "",
    ) -> UpdatedTodo:
        """Change what is given of one todo; ``owner=""`` clears the owner, ``add_blocked_by`` /
        ``remove_blocked_by`` link it to (unlink it from) todos of the same list it waits for."""
        request = pb.UpdateTodoRequest(
            session_id=session_id,
            todo_id=todo_id,
            content=content,
            status=status_to_pb(status),
            priority=priority_to_pb(priority),
            metadata=metadata,
            remove_metadata_keys=list(remove_metadata),
            description=description,
            active_form=active_form,
            owner=owner,
            add_blocked_by=list(add_blocked_by),
            remove_blocked_by=list(remove_blocked_by),
            expected_revision=expected_revision,
            origin=origin,
        )
        response = await self._call(self._stub.UpdateTodo, request)
        return updated_todo_from_pb(response)

    async def claim_todo(
        self,
        session_id: str,
        owner: str,
        todo_id: str = "",
        *,
        lease: float | None = None,
        expected_revision: int | None = None,
        request_id: str | None = None,
        origin: str = "",
    ) -> Claim:
        """Give ``todo_id`` — or, without it, the first ready todo — to ``owner``, in progress, atomically.

        Nothing ready is an answer (``Claim.nothing_ready``); a named todo that cannot be taken raises
        ``ClaimRefused`` saying why (taken by whom, blocked by which, not pending). With ``lease``
        (seconds) the claim lapses unless renewed in time (``renew_claim``). Retried while UNAVAILABLE
        under one request id (generated once unless given), so a retry returns the first claim and
        never claims a second todo.
        """
        request = pb.ClaimTodoRequest(
            session_id=session_id,
            todo_id=todo_id,
            owner=owner,
            lease_duration=duration_to_pb(lease),
            expected_revision=expected_revision,
            request_id=request_id or uuid.uuid4().hex,
            origin=origin,
        )
        response = await self._call(self._stub.ClaimTodo, request)
        return claim_from_pb(response)

    async def renew_claim(
        self,
        session_id: str,
        todo_id: str,
        owner: str,
        *,
        lease: float | None = None,
        expected_revision: int | None = None,
        origin: str = "",
    ) -> Claim:
        """Push the claim's lease back (by ``lease`` seconds from now, else its own duration); raises
        ``ClaimRefused`` (``CLAIM_NOT_HELD``) once the claim is not ``owner``'s, a lapsed lease among
        the reasons. Retried while UNAVAILABLE: renewing again only renews again."""
        request = pb.RenewClaimRequest(
            session_id=session_id,
            todo_id=todo_id,
            owner=owner,
            lease_duration=duration_to_pb(lease),
            expected_revision=expected_revision,
            origin=origin,
        )
        response = await self._call(self._stub.RenewClaim, request)
        return claim_from_pb(response)

    async def release_todo(
        self, session_id: str, todo_id: str, owner: str, *, expected_revision: int | None = None, origin: str = ""
    ) -> UpdatedTodo:
        """Give a claimed todo back (pending, unowned, no lease); raises ``ClaimRefused``
        (``CLAIM_NOT_HELD``) when ``owner`` does not hold it. Complete a todo with ``update_todo``."""
        request = pb.ReleaseTodoRequest(
            session_id=session_id, todo_id=todo_id, owner=owner, expected_revision=expected_revision, origin=origin
        )
        # Not retried: the repeat of a release that happened would be refused (CLAIM_NOT_HELD).
        response = await self._call(self._stub.ReleaseTodo, request, retry=False)
        return updated_todo_from_pb(response)

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
        return int(response.revision)

    async def watch(
        self,
        session_id: str,
        after_revision: int | None = None,
        *,
        include_progress: bool = False,
        on_connection: ConnectionListener | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Every change of one session, across reconnects, until the session is removed.

        While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and
        resumes after the last revision it yielded. Ends after yielding SESSION_REMOVED;
        raises the ``ServiceError`` of any other failure (NOT_FOUND for an unknown
        session). ``on_connection`` hears of each connection change. Breaking out of the loop
        cancels the underlying call.
        """
        resume = TodosResume(
            session_id,
            after_revision,
            include_progress=include_progress,
            retry=self._retry,
            on_connection=on_connection,
        )
        async for event in self._follow(self._stub.WatchTodos, resume):
            yield event

    async def watch_changes(
        self,
        after_cursor: str | None = None,
        *,
        include_snapshot: bool = False,
        session_ids: Sequence[str] = (),
        parent_id: str = "",
        labels: Mapping[str, str] | None = None,
        include_progress: bool = False,
        on_connection: ConnectionListener | None = None,
    ) -> AsyncGenerator[FeedEvent, None]:
        """The server-wide feed (``WatchChanges``), across reconnects, for as long as it is read.

        While the service is UNAVAILABLE it reconnects for ever (with capped backoff) and
        resumes after the last cursor it received. A snapshot cut short by a disconnect is
        started again, announced by a RESET (empty session id) as the server would. PROGRESS
        messages (the end-of-snapshot bookmark among them) are yielded only with
        ``include_progress``. ``on_connection`` hears of each connection change. Breaking out of
        the loop cancels the underlying call.
        """
        resume = FeedResume(
            after_cursor or "",
            include_snapshot=include_snapshot,
            session_ids=session_ids,
            parent_id=parent_id,
            labels=labels,
            include_progress=include_progress,
            retry=self._retry,
            on_connection=on_connection,
        )
        async for event in self._follow(self._stub.WatchChanges, resume):
            yield event

    async def _follow(self, rpc: Callable[..., Any], resume: WatchResume[Any, Event]) -> AsyncGenerator[Event, None]:
        """Drive ``resume`` over calls of the stream ``rpc``: the async side of ``sessiontodo_client.resume``."""
        while True:
            call = rpc(resume.request())
            try:
                for restart in resume.opened():
                    yield restart
                resume.answered(await call.initial_metadata())
                async for message in call:
                    if (event := resume.received(message)) is not None:
                        yield event
                    if resume.finished:
                        return
                return
            except grpc.aio.AioRpcError as error:
                delay = resume.failed(error.code(), error.details() or "")
                if delay is None:
                    raise service_error(error) from None
                log.debug("watch interrupted (%s), reconnecting in %.2fs", error.code().name, delay)
                await asyncio.sleep(delay)
            finally:
                call.cancel()

"""The service's calls over grpcio's synchronous API, in the typed client's values and errors.

A command line has no event loop to share, so blocking calls are the simple choice, and they let
``grpc_testing.channel`` stand in for the server in tests. Conversions and typed errors are the
typed client's own, so the CLI and the library can never disagree about the wire.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import (
    AddedTodo,
    ChannelSecurity,
    Claim,
    FeedEvent,
    RetryPolicy,
    Session,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    Unavailable,
    UpdatedTodo,
    WatchEvent,
)
from sessiontodo_client.client import SERVICE_NAME
from sessiontodo_client.conversions import (
    added_todo_from_pb,
    claim_from_pb,
    duration_to_pb,
    priority_to_pb,
    session_from_pb,
    status_to_pb,
    todo_filter_to_pb,
    todo_list_from_pb,
    todo_to_pb,
    updated_todo_from_pb,
)
from sessiontodo_client.errors import service_error
from sessiontodo_client.resume import ConnectionListener, FeedResume, TodosResume, WatchResume

T = TypeVar("T")
Event = TypeVar("Event", WatchEvent, FeedEvent)

ORIGIN = "sessiontodoctl"
"""Every write says it came from here, so gateways and feeds can tell an operator's hand."""


RECONNECT_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
"""Try a refused connection again within half a second: gRPC's own backoff grows to 120 s, and a command
waiting for a starting server would see it late."""


def open_channel(address: str, security: ChannelSecurity) -> grpc.Channel:
    """Plaintext by default (the server listens on loopback); TLS, client certificate and token as
    ``security`` says, by the typed client's rules. Raises ``ValueError`` for a token that would
    travel in plaintext to anything but a loopback address."""
    credentials = security.credentials(address)
    if credentials is None:
        return grpc.insecure_channel(address, options=RECONNECT_OPTIONS)
    return grpc.secure_channel(address, credentials, options=RECONNECT_OPTIONS)


class ServerWait:
    """Repeats a call that could not be sent because nothing accepted the connection, until the call's
    deadline, so a command run while sessiontodo starts or restarts waits for it rather than failing;
    ``tell`` hears once that it waits. Only a call that never left is repeated (gRPC fails those at
    once with "failed to connect"), so a write is never sent twice."""

    POLL = 0.1
    """Seconds between two tries while nothing listens (the channel reconnects at least as often)."""

    def __init__(self, target: str, tell: Callable[[str], None]) -> None:
        self._target = target
        self._tell = tell
        self._told = False

    def again(self, error: grpc.RpcError, deadline: float, timeout: float) -> bool:
        """Whether to send the failed call again (after a pause); raises ``Unavailable`` when the deadline
        is over while nothing accepts the connection."""
        if error.code() is not grpc.StatusCode.UNAVAILABLE or "failed to connect" not in (error.details() or ""):
            return False
        if not self._told:
            self._told = True
            self._tell(f"waiting for sessiontodo at {self._target} to accept connections (up to {timeout:g}s)")
        if time.monotonic() + self.POLL >= deadline:
            raise Unavailable(
                grpc.StatusCode.UNAVAILABLE,
                f"nothing accepted a connection at {self._target} within {timeout:g}s: is sessiontodo running "
                "there? (-a HOST:PORT or SESSIONTODO_ADDRESS names the server, --timeout the wait)",
            )
        time.sleep(self.POLL)
        return True


class TodoCalls:
    """Every rpc the CLI makes; raises the typed client's ``ServiceError`` subclasses. With ``wait``, each
    call first waits for a server that is not ready yet, within its timeout."""

    def __init__(self, channel: grpc.Channel, timeout: float = 10.0, *, wait: ServerWait | None = None) -> None:
        self._stub = pb_grpc.TodoServiceStub(channel)
        self._health = health_pb2_grpc.HealthStub(channel)
        self._timeout = timeout
        self._wait = wait

    def _call(self, rpc: Callable[..., T], request: Any) -> T:
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return rpc(request, timeout=max(deadline - time.monotonic(), 0.001))
            except grpc.RpcError as error:
                if self._wait is None or not self._wait.again(error, deadline, self._timeout):
                    raise service_error(error) from None

    def health(self) -> dict[str, str]:
        """The serving status of the server (``""``) and of the TodoService."""
        statuses = {}
        for service in ("", SERVICE_NAME):
            response = self._call(self._health.Check, health_pb2.HealthCheckRequest(service=service))
            statuses[service] = health_pb2.HealthCheckResponse.ServingStatus.Name(response.status)
        return statuses

    def list_sessions(self, parent_id: str = "", labels: Mapping[str, str] | None = None) -> list[Session]:
        """Every session (or the children of ``parent_id``, those carrying ``labels``), following pages."""
        sessions: list[Session] = []
        token = ""
        while True:
            request = pb.ListSessionsRequest(page_token=token, parent_id=parent_id, labels=labels)
            response = self._call(self._stub.ListSessions, request)
            sessions += [session_from_pb(session) for session in response.sessions]
            if not (token := response.next_page_token):
                return sessions

    def get_todos(self, session_id: str, *, ready: bool = False) -> TodoList:
        """The list; with ``ready`` only the todos free to take (pending, unowned, every blocker finished)."""
        request = pb.GetTodosRequest(session_id=session_id, filter=todo_filter_to_pb(ready=ready, owner=None))
        return todo_list_from_pb(self._call(self._stub.GetTodos, request))

    def create_session(
        self, session_id: str, parent_id: str, labels: Mapping[str, str] | None = None
    ) -> tuple[Session, bool]:
        """Get or create; without ``session_id`` a fresh id is generated, as the typed client does."""
        request = pb.CreateSessionRequest(
            session_id=session_id or f"ses_{uuid.uuid4().hex}", parent_id=parent_id, labels=labels, origin=ORIGIN
        )
        response = self._call(self._stub.CreateSession, request)
        return session_from_pb(response.session), response.created

    def remove_session(self, session_id: str) -> list[str]:
        request = pb.RemoveSessionRequest(session_id=session_id, origin=ORIGIN)
        response = self._call(self._stub.RemoveSession, request)
        return list(response.removed_session_ids)

    def replace_todos(self, session_id: str, todos: Sequence[Todo], expected_revision: int | None) -> TodoList:
        request = pb.ReplaceTodosRequest(
            session_id=session_id,
            todos=[todo_to_pb(todo) for todo in todos],
            expected_revision=expected_revision,
            origin=ORIGIN,
        )
        response = self._call(self._stub.ReplaceTodos, request)
        return todo_list_from_pb(response)

    def add_todo(self, session_id: str, todo: Todo, index: int | None) -> AddedTodo:
        request = pb.AddTodoRequest(
            session_id=session_id, todo=todo_to_pb(todo), index=index, request_id=uuid.uuid4().hex, origin=ORIGIN
        )
        response = self._call(self._stub.AddTodo, request)
        return added_todo_from_pb(response)

    def update_todo(
        self,
        session_id: str,
        todo_id: str,
        *,
        content: str | None = None,
        status: TodoStatus | None = None,
        priority: TodoPriority | None = None,
        add_blocked_by: Sequence[str] = (),
        remove_blocked_by: Sequence[str] = (),
        expected_revision: int | None = None,
    ) -> UpdatedTodo:
        """Change what is given of one todo (content, status, priority, blockers); the rest stays."""
        request = pb.UpdateTodoRequest(
            session_id=session_id,
            todo_id=todo_id,
            content=content,
            status=status_to_pb(status),
            priority=priority_to_pb(priority),
            add_blocked_by=add_blocked_by,
            remove_blocked_by=remove_blocked_by,
            expected_revision=expected_revision,
            origin=ORIGIN,
        )
        response = self._call(self._stub.UpdateTodo, request)
        return updated_todo_from_pb(response)

    def claim_todo(self, session_id: str, owner: str, todo_id: str = "", *, lease: float | None = None) -> Claim:
        """Give ``todo_id``, or the first ready todo, to ``owner`` (in progress); one request id, as the typed
        client's, so that a repeat of this call never claims a second todo."""
        request = pb.ClaimTodoRequest(
            session_id=session_id,
            todo_id=todo_id,
            owner=owner,
            lease_duration=duration_to_pb(lease),
            request_id=uuid.uuid4().hex,
            origin=ORIGIN,
        )
        return claim_from_pb(self._call(self._stub.ClaimTodo, request))

    def renew_claim(self, session_id: str, todo_id: str, owner: str, *, lease: float | None = None) -> Claim:
        request = pb.RenewClaimRequest(
            session_id=session_id, todo_id=todo_id, owner=owner, lease_duration=duration_to_pb(lease), origin=ORIGIN
        )
        return claim_from_pb(self._call(self._stub.RenewClaim, request))

    def release_todo(self, session_id: str, todo_id: str, owner: str) -> UpdatedTodo:
        request = pb.ReleaseTodoRequest(session_id=session_id, todo_id=todo_id, owner=owner, origin=ORIGIN)
        return updated_todo_from_pb(self._call(self._stub.ReleaseTodo, request))

    def remove_todo(self, session_id: str, todo_id: str, *, expected_revision: int | None = None) -> int:
        """Remove one todo; returns the list's new revision."""
        request = pb.RemoveTodoRequest(
            session_id=session_id, todo_id=todo_id, expected_revision=expected_revision, origin=ORIGIN
        )
        return int(self._call(self._stub.RemoveTodo, request).revision)

    def watch(
        self,
        session_id: str,
        *,
        retry: RetryPolicy = RetryPolicy(),
        on_connection: ConnectionListener | None = None,
    ) -> Generator[WatchEvent, None, None]:
        """A snapshot, then every change, until the session is removed. While the server is
        UNAVAILABLE (restarting) it reconnects and resumes after the last revision it yielded,
        as the typed client's ``watch`` does (one state machine: ``sessiontodo_client.resume``)."""
        resume = TodosResume(session_id, retry=retry, on_connection=on_connection)
        yield from self._follow(self._stub.WatchTodos, resume)

    def feed(
        self,
        after_cursor: str = "",
        *,
        include_snapshot: bool = False,
        session_ids: Sequence[str] = (),
        parent_id: str = "",
        labels: Mapping[str, str] | None = None,
        retry: RetryPolicy = RetryPolicy(),
        on_connection: ConnectionListener | None = None,
    ) -> Generator[FeedEvent, None, None]:
        """Every change of every matching session (``WatchChanges``), for as long as it is read.

        While the server is UNAVAILABLE it reconnects and resumes after the last cursor, as the
        typed client's ``watch_changes`` does; a snapshot cut short starts again after a RESET.
        PROGRESS messages (bookmarks) move the cursor and are not yielded.
        """
        resume = FeedResume(
            after_cursor,
            include_snapshot=include_snapshot,
            session_ids=session_ids,
            parent_id=parent_id,
            labels=labels,
            retry=retry,
            on_connection=on_connection,
        )
        yield from self._follow(self._stub.WatchChanges, resume)

    @staticmethod
    def _follow(rpc: Callable[..., Any], resume: WatchResume[Any, Event]) -> Generator[Event, None, None]:
        """Drive ``resume`` over blocking calls of the stream ``rpc``: ``sessiontodo_client.resume``, synchronously."""
        while True:
            call = rpc(resume.request())
            try:
                yield from resume.opened()
                resume.answered(call.initial_metadata())  # blocks until the server answers, or the call fails
                for message in call:
                    if (event := resume.received(message)) is not None:
                        yield event
                    if resume.finished:
                        return
                return
            except grpc.RpcError as error:
                delay = resume.failed(error.code(), error.details() or "")
                if delay is None:
                    raise service_error(error) from None
                time.sleep(delay)
            finally:
                call.cancel()

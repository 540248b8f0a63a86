"""The OpenCode-compatible HTTP surface of the sidecar: session and todo routes, event streams.

Every answer is JSON (OpenCode's v2 client throws on ``text/html``), errors use
OpenCode's ``{"name", "data": {"message"}}`` bodies, and SSE frames are written by hand
as ``data: <json>\\n\\n`` with LF only, which the default SDK client requires.
OpenCode's ``directory`` query parameter (or ``x-opencode-directory`` header) picks the
instance, as upstream: new sessions get it as their directory, ``/event`` and ``GET /session``
carry only its sessions. ``workspace`` is accepted and ignored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote

import grpc
from pydantic import BaseModel, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sessiontodo_client import InvalidArgument, NotFound, ServiceError
from sessiontodo_opencode.bridge import TodoBridge
from sessiontodo_opencode.fanout import Subscription
from sessiontodo_opencode.metrics import MetricsMiddleware, SidecarMetrics
from sessiontodo_opencode.models import (
    BusEvent,
    CreateSessionBody,
    ErrorBody,
    ErrorData,
    GlobalEvent,
    Health,
    Paths,
    ServerConnected,
    ServerHeartbeat,
    SyncPayload,
    TaggedErrorBody,
    Todo,
    TodoUpdated,
    UpdateSessionBody,
    sync_event,
)
from sessiontodo_opencode.queries import QueryProblem, SessionQuery
from sessiontodo_opencode.translate import describe_violations

log = logging.getLogger(__name__)

_TODO_LIST = TypeAdapter(list[Todo])
_CREATE_SESSION = TypeAdapter(CreateSessionBody)
_UPDATE_SESSION = TypeAdapter(UpdateSessionBody)
T = TypeVar("T")

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]
NOSNIFF = (b"x-content-type-options", b"nosniff")

# The one table from service errors to HTTP answers: status and OpenCode error name.
_ERROR_TABLE: dict[grpc.StatusCode, tuple[int, str]] = {
    grpc.StatusCode.INVALID_ARGUMENT: (400, "BadRequest"),
    grpc.StatusCode.NOT_FOUND: (404, "NotFoundError"),
    grpc.StatusCode.FAILED_PRECONDITION: (409, "ConflictError"),
    grpc.StatusCode.ABORTED: (409, "ConflictError"),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (429, "TooManyRequestsError"),
    grpc.StatusCode.UNAVAILABLE: (503, "ServiceUnavailableError"),
}


def error_response(status: int, name: str, message: str, kind: str | None = None) -> Response:
    body = ErrorBody(name=name, data=ErrorData(message=message, kind=kind))
    return Response(body.model_dump_json(), status_code=status, media_type="application/json")


def service_error_response(error: ServiceError, session_id: str) -> Response:
    """The OpenCode answer for a failed call about ``session_id``."""
    status, name = _ERROR_TABLE.get(error.code, (502, "UnknownError"))
    if isinstance(error, NotFound):
        message = f"Session not found: {session_id}"
    elif error.violations:
        message = describe_violations(error.violations)
    else:
        message = error.message
    return error_response(status, name, message)


def bad_request(message: str, kind: str | None = None) -> Response:
    return error_response(400, "BadRequest", message, kind)


def tagged_bad_request(message: str) -> Response:
    """Upstream's ``{"_tag": "BadRequest"}`` (what its ``POST /session`` answers), saying what was wrong."""
    body = TaggedErrorBody(_tag="BadRequest", message=message)
    return Response(body.model_dump_json(), status_code=400, media_type="application/json")


@dataclass(frozen=True)
class BodyProblem:
    """Why a request body was refused (each route answers it in upstream's form for that route)."""

    message: str


class BodyTooLarge(Exception):
    """A request body over the sidecar's limit: answered 413 before it is all read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"request body over {limit} bytes")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused (``BodyTooLarge``) as soon as it is known to exceed ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge(limit)
    return bytes(body)


def validation_message(error: ValidationError, subject: str) -> str:
    """``todos[0].status: Input should be …`` for each problem of a request body."""

    def where(location: tuple[int | str, ...]) -> str:
        return subject + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in location)

    return describe_violations([(where(problem["loc"]), problem["msg"]) for problem in error.errors()])


def json_response(value: BaseModel | Sequence[BaseModel] | bool) -> Response:
    """A JSON answer; absent optional fields (``parentID`` of a root session) are left out, as upstream."""
    if isinstance(value, BaseModel):
        content = value.model_dump_json(exclude_none=True)
    elif isinstance(value, bool):
        content = "true" if value else "false"
    else:
        content = "[" + ",".join(item.model_dump_json(exclude_none=True) for item in value) + "]"
    return Response(content, media_type="application/json")


def frame(event: BaseModel) -> bytes:
    """One SSE frame, LF only, with no ``event:``/``id:`` lines (what OpenCode clients parse)."""
    return b"data: " + event.model_dump_json(exclude_none=True).encode() + b"\n\n"


Handler = Callable[[Any, Request], Awaitable[Response]]


def _answering_service_errors(handler: Handler) -> Handler:
    """Turn the service's errors (about the path's session, if any) into OpenCode error answers."""

    @functools.wraps(handler)
    async def wrapper(self: Any, request: Request) -> Response:
        try:
            return await handler(self, request)
        except ServiceError as error:
            return service_error_response(error, request.path_params.get("session_id", ""))

    return wrapper


class EventStream:
    """An event stream answer: ``server.connected``, then live events and heartbeats.

    The subscription is taken before the first byte is sent, so ``server.connected`` means
    "every later event reaches you"; it closes as soon as the client disconnects.
    """

    def __init__(
        self,
        bridge: TodoBridge,
        heartbeat_interval: float,
        frame: Callable[[BusEvent | ServerConnected | ServerHeartbeat], bytes],
        *,
        directory: str | None,
        session_id: str | None = None,
    ) -> None:
        self._bridge = bridge
        self._heartbeat_interval = heartbeat_interval
        self._frame = frame
        self._directory = directory
        self._session_id = session_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self._bridge.subscribe(self._directory, self._session_id) as subscription:
            async with asyncio.TaskGroup() as tasks:
                streaming = tasks.create_task(self._stream(subscription, send))
                listening = tasks.create_task(_until_disconnected(receive))
                listening.add_done_callback(lambda _: streaming.cancel())
                streaming.add_done_callback(lambda _: listening.cancel())

    async def _stream(self, subscription: Subscription[BusEvent], send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await send({"type": "http.response.body", "body": self._frame(ServerConnected()), "more_body": True})
        loop = asyncio.get_running_loop()
        next_heartbeat = loop.time() + self._heartbeat_interval
        while True:
            event: BusEvent | ServerHeartbeat | None
            try:
                async with asyncio.timeout_at(next_heartbeat):
                    event = await subscription.receive()
            except TimeoutError:
                event = ServerHeartbeat()
                next_heartbeat = loop.time() + self._heartbeat_interval
            if event is None:  # the bridge closed: end the stream cleanly
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await send({"type": "http.response.body", "body": self._frame(event), "more_body": True})


def global_frame(event: BusEvent | ServerConnected | ServerHeartbeat) -> bytes:
    """A ``/global/event`` frame: the event in upstream's envelope with its directory and project.

    A session event is followed by its ``sync`` frame, as upstream's sync engine sends one.
    """
    if isinstance(event, ServerConnected | ServerHeartbeat):
        return frame(GlobalEvent(payload=event))
    framed = frame(GlobalEvent(directory=event.directory, project=event.project, payload=event))
    if isinstance(event, TodoUpdated):
        return framed
    sync = SyncPayload(id=event.id, syncEvent=sync_event(event))
    return framed + frame(GlobalEvent(directory=event.directory, project=event.project, payload=sync))


async def _until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class OpenCodeRoutes:
    """OpenCode's session and todo routes over one ``TodoBridge``."""

    def __init__(self, bridge: TodoBridge, heartbeat_interval: float, max_body_bytes: int) -> None:
        self._bridge = bridge
        self._heartbeat_interval = heartbeat_interval
        self._max_body_bytes = max_body_bytes

    def routes(self) -> list[Route]:
        return [
            Route("/event", self.events, methods=["GET"]),
            Route("/global/event", self.global_events, methods=["GET"]),
            Route("/global/health", self.health, methods=["GET"]),
            Route("/path", self.paths, methods=["GET"]),
            Route("/project", self.projects, methods=["GET"]),
            Route("/project/current", self.current_project, methods=["GET"]),
            Route("/session", self.list_sessions, methods=["GET"]),
            Route("/session", self.create_session, methods=["POST"]),
            Route("/session/status", self.session_status, methods=["GET"]),
            Route("/session/{session_id}", self.get_session, methods=["GET"]),
            Route("/session/{session_id}", self.update_session, methods=["PATCH"]),
            Route("/session/{session_id}", self.delete_session, methods=["DELETE"]),
            Route("/session/{session_id}/children", self.children, methods=["GET"]),
            Route("/session/{session_id}/todo", self.get_todos, methods=["GET"]),
            Route("/session/{session_id}/todo", self.put_todos, methods=["PUT"]),
        ]

    def _directory(self, request: Request) -> str:
        """The instance a request is for: ``?directory=``, the ``x-opencode-directory`` header, or ours."""
        directory = request.query_params.get("directory") or unquote(request.headers.get("x-opencode-directory", ""))
        return directory or self._bridge.directory

    async def _body(self, request: Request, adapter: TypeAdapter[T], subject: str) -> T | BodyProblem:
        try:
            return adapter.validate_json(await read_body(request, self._max_body_bytes) or b"{}")
        except ValidationError as error:
            return BodyProblem(validation_message(error, subject))

    async def events(self, request: Request) -> Response | EventStream:
        session_id = request.query_params.get("sessionID")
        if session_id == "":
            return bad_request("sessionID: must not be empty; leave it out to follow every session")
        if session_id is not None:
            try:
                await self._bridge.get_session(session_id)
            except ServiceError as error:
                return service_error_response(error, session_id)
        directory = None if session_id else self._directory(request)
        return EventStream(self._bridge, self._heartbeat_interval, frame, directory=directory, session_id=session_id)

    async def global_events(self, request: Request) -> EventStream:
        return EventStream(self._bridge, self._heartbeat_interval, global_frame, directory=None)

    async def health(self, request: Request) -> Response:
        return json_response(Health(version=self._bridge.version))

    async def paths(self, request: Request) -> Response:
        directory = self._directory(request)
        return json_response(Paths(home=str(Path.home()), worktree=directory, directory=directory))

    @_answering_service_errors
    async def projects(self, request: Request) -> Response:
        return json_response(await self._bridge.projects())

    @_answering_service_errors
    async def current_project(self, request: Request) -> Response:
        return json_response(await self._bridge.project_of_directory(self._directory(request)))

    @_answering_service_errors
    async def list_sessions(self, request: Request) -> Response:
        query = SessionQuery.read(request.query_params)
        if isinstance(query, QueryProblem):
            return bad_request(query.message, kind="Query")
        directory = self._directory(request)
        if query.whole_project:
            sessions = await self._bridge.list_project_sessions(directory)
        else:
            sessions = await self._bridge.list_sessions(directory)
        return json_response(query.select(sessions))

    async def session_status(self, request: Request) -> Response:
        """No session is ever busy: the sidecar runs no prompt (upstream lists only busy or retrying ones)."""
        return Response("{}", media_type="application/json")

    async def create_session(self, request: Request) -> Response:
        body = await self._body(request, _CREATE_SESSION, "body")
        if isinstance(body, BodyProblem):
            return tagged_bad_request(body.message)
        try:
            session = await self._bridge.create_session(
                body.id or "",
                body.parent_id or "",
                title=body.title,
                directory=self._directory(request),
                agent=body.agent,
                model=body.model,
            )
        except ServiceError as error:  # NOT_FOUND here is about the parent
            if isinstance(error, InvalidArgument):
                return tagged_bad_request(describe_violations(error.violations) or error.message)
            return service_error_response(error, body.parent_id or "")
        return json_response(session)

    @_answering_service_errors
    async def get_session(self, request: Request) -> Response:
        return json_response(await self._bridge.get_session(request.path_params["session_id"]))

    @_answering_service_errors
    async def update_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        body = await self._body(request, _UPDATE_SESSION, "body")
        if isinstance(body, BodyProblem):
            return bad_request(body.message, kind="Payload")
        if body.title is None:
            return json_response(await self._bridge.get_session(session_id))
        return json_response(await self._bridge.rename_session(session_id, body.title))

    @_answering_service_errors
    async def delete_session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        if not await self._bridge.delete_session(session_id):
            return error_response(404, "NotFoundError", f"Session not found: {session_id}")
        return json_response(True)

    @_answering_service_errors
    async def children(self, request: Request) -> Response:
        return json_response(await self._bridge.children(request.path_params["session_id"]))

    @_answering_service_errors
    async def get_todos(self, request: Request) -> Response:
        return json_response(await self._bridge.get_todos(request.path_params["session_id"]))

    @_answering_service_errors
    async def put_todos(self, request: Request) -> Response:
        todos = await self._body(request, _TODO_LIST, "todos")
        if isinstance(todos, BodyProblem):
            return bad_request(todos.message, kind="Payload")
        return json_response(await self._bridge.write_todos(request.path_params["session_id"], todos))


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        return error_response(404, "NotFoundError", f"Route not found: {request.method} {request.url.path}")
    if error.status_code == 405:
        response = error_response(405, "MethodNotAllowed", f"Method not allowed: {request.method} {request.url.path}")
        response.headers.update(error.headers or {})
        return response
    return error_response(error.status_code, "BadRequest" if error.status_code == 400 else "UnknownError", error.detail)


async def _body_too_large(request: Request, error: Exception) -> Response:
    return error_response(413, "PayloadTooLargeError", str(error))


async def _unexpected_error(request: Request, error: Exception) -> Response:
    log.exception("unexpected error in %s %s", request.method, request.url.path, exc_info=error)
    return error_response(500, "UnknownError", f"{type(error).__name__}: {error}")


class _NoSniff:
    """``X-Content-Type-Options: nosniff`` on every answer but an unexpected 500 (OpenCode: on ``/event``)."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), NOSNIFF]}
            await send(message)

        await self._app(scope, receive, sending)


def create_app(
    bridge: TodoBridge,
    *,
    heartbeat_interval: float = 10.0,
    max_body_bytes: int = 4 * 1024 * 1024,
    metrics: SidecarMetrics | None = None,
) -> Starlette:
    """The sidecar's ASGI app; the bridge (and so the service connection) is injected. With ``metrics``,
    requests are counted and timed, and ``GET /metrics`` serves them."""
    routes = OpenCodeRoutes(bridge, heartbeat_interval, max_body_bytes).routes()
    middleware = [Middleware(_NoSniff)]
    if metrics is not None:
        routes.append(metrics.route())
        middleware.append(Middleware(MetricsMiddleware, metrics=metrics, routes=routes))
    return Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers={
            HTTPException: _http_error,
            BodyTooLarge: _body_too_large,
            Exception: _unexpected_error,
        },
    )

"""The board's HTTP surface: the page and its assets, sign-in, the JSON API and the event stream.

Every answer carries a strict Content-Security-Policy (scripts and styles only from the board
itself, no inline code, Trusted Types required so that no script can write markup into the page),
and is refused before any route runs unless signed in (``SignedInOnly``), with a CSRF token on
writes. ``HttpGuard`` (the OpenCode sidecar's) checks Host and Origin in front of it all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from string import Template
from typing import TypeVar
from urllib.parse import parse_qs

from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sessiontodo_client import PermissionDenied, ServiceError, Unauthenticated
from sessiontodo_opencode.app import SSE_HEADERS, BodyTooLarge, error_response, read_body, service_error_response
from sessiontodo_opencode.app import validation_message as describe_invalid_body
from sessiontodo_opencode.models import ErrorData
from sessiontodo_web.auth import SignIn, SignInThrottle, Viewers, retry_after_header
from sessiontodo_web.board import Board
from sessiontodo_web.edits import BadOrder, Conflict, Editor, Refused, UnknownSession
from sessiontodo_web.models import (
    AddTodoBody,
    ClaimBody,
    FeedStatus,
    Me,
    RemoveTodoBody,
    ReorderBody,
    SessionDetail,
    UpdateTodoBody,
)
from sessiontodo_web.pages import frame

log = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types 'none'",
    ]
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
PUBLIC_PATHS = ("/login", "/assets/")
"""What a browser may fetch before signing in: the sign-in page and the static assets (no data)."""
SAFE_METHODS = ("GET", "HEAD")
CSRF_HEADER = "x-csrf-token"
SIGN_IN_BODY_BYTES = 16 * 1024
RECONNECT_MILLISECONDS = 1000
"""How soon a browser's EventSource reconnects after the stream drops (SSE ``retry:``)."""

Body = TypeVar("Body", bound=BaseModel)


class ConflictBody(BaseModel):
    """A 409: someone else changed the list (``ConflictError``), or a claim or release was refused
    (``ClaimRefusedError``, the message says why); ``current`` is the list now."""

    name: str = "ConflictError"
    data: ErrorData
    current: SessionDetail


class SecurityHeaders:
    """The Content-Security-Policy and its companions on every answer, ``no-store`` on data."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        data = not scope["path"].startswith("/assets/")

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                if data:  # answers about sessions are never kept by a cache; assets revalidate by ETag
                    headers = [(name, value) for name, value in headers if name != b"cache-control"]
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        await self._app(scope, receive, sending)


class SignedInOnly:
    """Refuse what needs a sign-in without one, and writes without the sign-in's CSRF token."""

    def __init__(self, app: ASGIApp, viewers: Viewers) -> None:
        self._app = app
        self._viewers = viewers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(PUBLIC_PATHS):
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        sign_in = self._viewers.read(_cookie(headers, self._viewers.cookie_name))
        if sign_in is None:
            if scope["path"] == "/" and scope["method"] in SAFE_METHODS:
                response: Response = RedirectResponse("/login", status_code=303)
            else:
                response = error_response(401, "Unauthorized", "sign in first: POST /login with the viewer token")
            await response(scope, receive, send)
            return
        if scope["method"] not in SAFE_METHODS and not self._viewers.accepts_csrf(
            sign_in, headers.get(CSRF_HEADER, "")
        ):
            log.warning("refused %s %s: missing or wrong CSRF token", scope["method"], scope["path"])
            await error_response(403, "Forbidden", f"missing or wrong {CSRF_HEADER} header (GET /api/me)")(
                scope, receive, send
            )
            return
        scope.setdefault("state", {})["sign_in"] = sign_in
        await self._app(scope, receive, send)


def _cookie(headers: Headers, name: str) -> str | None:
    """A cookie's value, read without Starlette's lenient parser (a forged duplicate never wins)."""
    values = [
        value
        for header in headers.getlist("cookie")
        for pair in header.split(";")
        for key, _, value in [pair.strip().partition("=")]
        if key == name
    ]
    return values[0] if len(values) == 1 else None


class EventStream:
    """``GET /api/events``: the board's frames for one page, after the cursor it last received.

    The browser's EventSource sends that cursor as ``Last-Event-ID`` when it reconnects (a page that
    opens a new EventSource passes it as ``?after=``). Comments keep idle connections open.
    """

    def __init__(self, board: Board, heartbeat_interval: float, last_event_id: str | None) -> None:
        self._board = board
        self._heartbeat_interval = heartbeat_interval
        self._last_event_id = last_event_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with asyncio.TaskGroup() as tasks:
            streaming = tasks.create_task(self._stream(send))
            listening = tasks.create_task(_until_disconnected(receive))
            listening.add_done_callback(lambda _: streaming.cancel())
            streaming.add_done_callback(lambda _: listening.cancel())

    async def _stream(self, send: Send) -> None:
        async def write(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        await write(f"retry: {RECONNECT_MILLISECONDS}\n\n".encode())
        if self._board.state == "loading":
            await write(frame("feed", FeedStatus(state="loading")))
            await self._board.loaded()
        loop = asyncio.get_running_loop()
        with self._board.subscribe(self._last_event_id) as page:
            while True:
                data: bytes | None
                try:
                    async with asyncio.timeout(self._heartbeat_interval):
                        data = await page.receive()
                except TimeoutError:
                    data = b": " + str(int(loop.time())).encode() + b"\n\n"
                if data is None:  # the board closed: end the stream (the page reconnects)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    return
                await write(data)


async def _until_disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


class BoardRoutes:
    """The routes of the board over one ``Board`` and its ``Editor``."""

    def __init__(
        self, board: Board, editor: Editor, viewers: Viewers, *, heartbeat_interval: float, max_body_bytes: int
    ) -> None:
        self._board = board
        self._editor = editor
        self._viewers = viewers
        self._heartbeat_interval = heartbeat_interval
        self._max_body_bytes = max_body_bytes
        self._login_page = Template((STATIC / "login.html").read_text())
        self._throttle = SignInThrottle()

    def routes(self) -> list[Route | Mount]:
        return [
            Route("/", self.index, methods=["GET"]),
            Route("/login", self.login_page, methods=["GET"]),
            Route("/login", self.sign_in, methods=["POST"]),
            Route("/logout", self.sign_out, methods=["POST"]),
            Route("/api/me", self.me, methods=["GET"]),
            Route("/api/events", self.events, methods=["GET"]),
            Route("/api/sessions", self.sessions, methods=["GET"]),
            Route("/api/sessions/{session_id}", self.session, methods=["GET"]),
            Route("/api/sessions/{session_id}/todos", self.add_todo, methods=["POST"]),
            Route("/api/sessions/{session_id}/todos/{todo_id}", self.update_todo, methods=["PATCH"]),
            Route("/api/sessions/{session_id}/todos/{todo_id}", self.remove_todo, methods=["DELETE"]),
            Route("/api/sessions/{session_id}/order", self.reorder, methods=["PUT"]),
            Route("/api/sessions/{session_id}/todos/{todo_id}/claim", self.claim, methods=["POST"]),
            Route("/api/sessions/{session_id}/todos/{todo_id}/release", self.release, methods=["POST"]),
            Mount("/assets", StaticFiles(directory=STATIC / "assets"), name="assets"),
        ]

    # The page and signing in

    async def index(self, request: Request) -> Response:
        return FileResponse(STATIC / "index.html")

    async def login_page(self, request: Request) -> Response:
        if self._viewers.read(request.cookies.get(self._viewers.cookie_name)) is not None:
            return RedirectResponse("/", status_code=303)
        return self._sign_in_page(status_code=200)

    async def sign_in(self, request: Request) -> Response:
        form = parse_qs((await read_body(request, SIGN_IN_BODY_BYTES)).decode("utf-8", "replace"))
        client = request.client.host if request.client else "?"
        if wait := self._throttle.wait(client):  # the secrets are not even checked
            log.warning("refused a sign-in from %s: too many failed sign-ins, %.1f s to wait", client, wait)
            response = self._sign_in_page(status_code=429)
            response.headers["retry-after"] = retry_after_header(wait)
            return response
        token = form.get("token", [""])[0]
        username, password = form.get("username", [""])[0], form.get("password", [""])[0]
        accepted = (
            (token and self._viewers.accepts_token(token))
            or (password and self._viewers.accepts_password(username, password))
            or self._viewers.accepts_basic(request.headers.get("authorization", ""))
        )
        if not accepted:
            self._throttle.failed(client)
            log.warning("refused a sign-in from %s", client)
            return self._sign_in_page(status_code=401)
        self._throttle.succeeded(client)
        response = RedirectResponse("/", status_code=303)
        response.headers["set-cookie"] = self._viewers.set_cookie(self._viewers.issue())
        return response

    async def sign_out(self, request: Request) -> Response:
        return Response(status_code=204, headers={"set-cookie": self._viewers.clear_cookie()})

    def _sign_in_page(self, *, status_code: int) -> Response:
        """The sign-in page: 200 as asked for, 401 after a refused sign-in, 429 to a client that must wait."""
        page = self._login_page.substitute(
            error_hidden="" if status_code == 401 else " hidden",
            throttled_hidden="" if status_code == 429 else " hidden",
            basic_hidden="" if self._viewers.basic_auth else " hidden",
        )
        return HTMLResponse(page, status_code=status_code)

    # Reading

    async def me(self, request: Request) -> Response:
        sign_in: SignIn = request.state.sign_in
        return _json(Me(csrf_token=self._viewers.csrf_token(sign_in)))

    async def events(self, request: Request) -> EventStream:
        last_event_id = request.headers.get("last-event-id") or request.query_params.get("after")
        return EventStream(self._board, self._heartbeat_interval, last_event_id)

    async def sessions(self, request: Request) -> Response:
        return _json(self._board.board_view())

    async def session(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        try:
            detail = await self._board.read(session_id)
        except ServiceError as error:
            return service_error_response(error, session_id)
        if detail is None:
            return error_response(404, "NotFoundError", f"Session not found: {session_id}")
        return _json(detail)

    # Writing

    async def add_todo(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        return await self._edit(request, AddTodoBody, lambda body: self._editor.add(session_id, body))

    async def update_todo(self, request: Request) -> Response:
        session_id, todo_id = request.path_params["session_id"], request.path_params["todo_id"]
        return await self._edit(request, UpdateTodoBody, lambda body: self._editor.update(session_id, todo_id, body))

    async def remove_todo(self, request: Request) -> Response:
        session_id, todo_id = request.path_params["session_id"], request.path_params["todo_id"]
        return await self._edit(request, RemoveTodoBody, lambda body: self._editor.remove(session_id, todo_id, body))

    async def reorder(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        return await self._edit(request, ReorderBody, lambda body: self._editor.reorder(session_id, body))

    async def claim(self, request: Request) -> Response:
        session_id, todo_id = request.path_params["session_id"], request.path_params["todo_id"]
        return await self._edit(request, ClaimBody, lambda body: self._editor.claim(session_id, todo_id, body))

    async def release(self, request: Request) -> Response:
        session_id, todo_id = request.path_params["session_id"], request.path_params["todo_id"]
        return await self._edit(request, ClaimBody, lambda body: self._editor.release(session_id, todo_id, body))

    async def _edit(
        self, request: Request, model: type[Body], edit: Callable[[Body], Awaitable[SessionDetail]]
    ) -> Response:
        """Validate the body, make the edit, and answer with the session as it is after it (or why not)."""
        session_id = request.path_params["session_id"]
        try:
            body = model.model_validate_json(await read_body(request, self._max_body_bytes) or b"{}")
        except ValidationError as error:
            return error_response(400, "BadRequest", describe_invalid_body(error, "body"), "Payload")
        try:
            return _json(await edit(body))
        except Conflict as conflict:
            answer = ConflictBody(data=ErrorData(message=str(conflict)), current=conflict.current)
            return _json(answer, status_code=409)
        except Refused as refused:
            answer = ConflictBody(
                name="ClaimRefusedError", data=ErrorData(message=str(refused)), current=refused.current
            )
            return _json(answer, status_code=409)
        except BadOrder as error:
            return error_response(400, "BadRequest", str(error), "Payload")
        except UnknownSession as error:
            return error_response(404, "NotFoundError", str(error))
        except PermissionDenied as error:
            return error_response(403, "Forbidden", f"the board's sessiontodo token may not do this: {error.message}")
        except Unauthenticated as error:
            return error_response(502, "BadGateway", f"sessiontodo refused the board's token: {error.message}")
        except ServiceError as error:
            return service_error_response(error, session_id)


def _json(value: BaseModel, status_code: int = 200) -> Response:
    return Response(value.model_dump_json(), status_code=status_code, media_type="application/json")


async def _http_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, HTTPException)
    if error.status_code == 404:
        return error_response(404, "NotFoundError", f"Route not found: {request.method} {request.url.path}")
    response = error_response(error.status_code, "BadRequest" if error.status_code < 500 else "Error", error.detail)
    response.headers.update(error.headers or {})
    return response


async def _body_too_large(request: Request, error: Exception) -> Response:
    return error_response(413, "PayloadTooLargeError", str(error))


def create_app(
    board: Board,
    editor: Editor,
    viewers: Viewers,
    *,
    heartbeat_interval: float = 15.0,
    max_body_bytes: int = 1024 * 1024,
) -> ASGIApp:
    """The board's ASGI app, signed-in only (wrap it in ``HttpGuard`` for the Host and Origin checks)."""
    routes = BoardRoutes(
        board, editor, viewers, heartbeat_interval=heartbeat_interval, max_body_bytes=max_body_bytes
    ).routes()
    app = Starlette(
        routes=routes,
        exception_handlers={HTTPException: _http_error, BodyTooLarge: _body_too_large},
    )
    return SecurityHeaders(SignedInOnly(app, viewers))

"""Streamable HTTP: the MCP endpoint at ``/mcp``, behind the OpenCode sidecar's front door (``RequestGuard``).

- **Host** and **Origin** (DNS rebinding, cross-site requests): IP literals, ``localhost`` and
  ``--allowed-hosts`` are served; a request with an Origin must come from the server's own origin
  or ``--allowed-origins`` (which also get CORS headers). Clients without an Origin (agents) pass.
- **A client token**: with ``--http-token`` set, every request needs ``Authorization: Bearer
  <token>`` (what MCP clients' ``headers`` settings send). Without one, ``Settings.refusal`` keeps
  the server on loopback unless ``--insecure``.

Every MCP session (``Mcp-Session-Id``) gets its own ``McpSession``; the SDK closes one after 30
minutes without a request or open stream, and refuses a new one past ``--max-sessions`` (503).

A body the SDK would fail on is answered here with a JSON-RPC error (``JsonRpcGuard``): JSON nested
too deeply to parse (the SDK answered HTTP 500), and a message whose ``id`` is neither a string nor
an integer (the SDK took it for a notification: 202 and no answer at all).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sessiontodo_mcp.settings import DEFAULT_MAX_SESSIONS
from sessiontodo_opencode.guard import RequestGuard

log = logging.getLogger(__name__)


class ClosedStreamIsNoError(logging.Filter):
    """Drops the SDK's ERROR, with a traceback, for a client's normal goodbye (mcp 1.30 logs "Error in
    standalone SSE writer" when the session a client ends closes its stream under the writer)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], anyio.ClosedResourceError))


CLOSED_STREAM_IS_NO_ERROR = ClosedStreamIsNoError()

PATH = "/mcp"

MAX_BODY_BYTES = 4 * 1024 * 1024
"""The largest request body read (the SDK's own limit); a larger one is 413 with a JSON-RPC error."""

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
"""JSON-RPC's error codes for a body that does not parse and for a message that is not a valid request."""

SHUTDOWN_GRACE = 3
"""Seconds open requests and streams get to finish after SIGTERM or SIGINT."""


class BearerGuard(RequestGuard):
    """The sidecar's front door with a bearer token, refusing with JSON-RPC errors as MCP servers do."""

    challenge = b'Bearer realm="sessiontodo-mcp"'
    exposed_headers = ("Mcp-Session-Id",)

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        secret = token.encode() if token else None
        super().__init__(app, secret=secret, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)

    def presented(self, scope: Scope, headers: Headers) -> str:
        scheme, _, token = headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" else ""

    def refusal(self, status: int, name: str, message: str) -> bytes:
        """A JSON-RPC error without an id: the request was refused before it was read."""
        error = {
            "code": -32600,
            "message": f"{message}: send 'Authorization: Bearer <token>'" if status == 401 else message,
        }
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode()


def _json_rpc_error(code: int, message: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()


def _valid_id(message: object) -> bool:
    """Whether a message's ``id``, if it has one, is a string or an integer (MCP's RequestId)."""
    if not isinstance(message, dict) or "id" not in message:
        return True
    request_id = message["id"]
    return isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool))


class JsonRpcGuard:
    """Read a POST's body (at most ``MAX_BODY_BYTES``) and refuse, with a JSON-RPC error and HTTP 400,
    what the SDK would answer wrongly: JSON nested too deeply to parse, and an ``id`` that is not a
    string or an integer. Anything else goes on to the SDK, body unchanged."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self._app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY_BYTES:
                await _answer(send, 413, _json_rpc_error(INVALID_REQUEST, f"request body over {MAX_BODY_BYTES} bytes"))
                return
        if refusal := _refusal(body):
            code, reason = refusal
            log.warning("refused an MCP request: %s", reason)
            await _answer(send, 400, _json_rpc_error(code, reason))
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()  # the disconnect, when the client goes
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self._app(scope, replay, send)


def _refusal(body: bytes) -> tuple[int, str] | None:
    """The JSON-RPC error code and message the SDK must answer instead of seeing this body, or None
    (a body that is not JSON at all the SDK refuses well itself)."""
    try:
        parsed = json.loads(body)
    except RecursionError:
        return PARSE_ERROR, "Parse error: JSON nested too deeply"
    except ValueError:
        return None
    messages = parsed if isinstance(parsed, list) else [parsed]
    if not all(map(_valid_id, messages)):
        return INVALID_REQUEST, "Invalid Request: id must be a string or an integer"
    return None


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(
    server: Server[Any, Any],
    *,
    token: str | None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
    max_sessions: int = DEFAULT_MAX_SESSIONS,
) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp``; its lifespan runs the SDK's session manager."""
    logging.getLogger("mcp.server.streamable_http").addFilter(CLOSED_STREAM_IS_NO_ERROR)  # once: the same filter
    # The SDK's own DNS rebinding check is off: HttpGuard makes the sidecar's, which knows IP literals.
    manager = StreamableHTTPSessionManager(
        server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=MAX_BODY_BYTES,
        max_sessions=max_sessions,
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route(PATH, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
    guarded = JsonRpcGuard(app)
    return BearerGuard(guarded, token=token, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


async def serve_http(app: ASGIApp, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT (uvicorn's own handling), then close every MCP session."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="on",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    await uvicorn.Server(config).serve()

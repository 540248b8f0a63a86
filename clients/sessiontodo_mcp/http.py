"""Streamable HTTP: the MCP endpoint at ``/mcp``, behind the front door the OpenCode sidecar has too.

- **Host** and **Origin** (DNS rebinding, cross-site requests): the sidecar's checks
  (``sessiontodo_client.security``): IP literals, ``localhost`` and ``--allowed-hosts`` are served;
  a request with an Origin must come from the server's own origin or ``--allowed-origins``
  (which also get CORS headers). Clients without an Origin (agents, SDKs) pass.
- **A client token**: with ``--http-token`` set, every request needs ``Authorization: Bearer
  <token>`` (what MCP clients' ``headers`` settings send). Without one, ``Settings.refusal`` keeps
  the server on loopback unless ``--insecure``.

Every MCP session (``Mcp-Session-Id``) gets its own ``McpSession``; the SDK closes one after 30
minutes without a request or open stream.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from mcp.server.fastmcp.server import StreamableHTTPASGIApp
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from sessiontodo_client.security import host_allowed, origin_allowed

log = logging.getLogger(__name__)

PATH = "/mcp"

SHUTDOWN_GRACE = 3
"""Seconds open requests and streams get to finish after SIGTERM or SIGINT."""


class HttpGuard:
    """ASGI middleware applying the checks above before the MCP endpoint sees a request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        self._app: ASGIApp = app
        if allowed_origins:
            self._app = CORSMiddleware(
                app,
                allow_origins=list(allowed_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["*"],
                expose_headers=["Mcp-Session-Id"],
            )
        self._expected = f"Bearer {token}".encode() if token else None
        self._allowed_hosts = tuple(allowed_hosts)
        self._allowed_origins = tuple(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        origin = headers.get("origin")
        if not host_allowed(host, self._allowed_hosts):
            response = _refusal(403, f"Host not allowed: {host!r} (see --allowed-hosts)")
        elif origin is not None and not origin_allowed(origin, host, self._allowed_origins):
            response = _refusal(403, f"Origin not allowed: {origin!r} (see --allowed-origins)")
        elif self._expected is not None and scope["method"] != "OPTIONS" and not self._authorized(headers):
            response = _refusal(401, "Unauthorized: send 'Authorization: Bearer <token>'")
            response.headers["www-authenticate"] = 'Bearer realm="sessiontodo-mcp"'
        else:
            await self._app(scope, receive, send)
            return
        await response(scope, receive, send)

    def _authorized(self, headers: Headers) -> bool:
        assert self._expected is not None
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        return hmac.compare_digest(f"{scheme.capitalize()} {presented.strip()}".encode(), self._expected)


def _refusal(status: int, message: str) -> JSONResponse:
    """A JSON-RPC error without an id, as MCP servers answer requests they refuse before reading them."""
    log.warning("refused HTTP request: %d %s", status, message)
    return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}, status)


def http_app(
    server: Server[Any, Any],
    *,
    token: str | None,
    allowed_hosts: Sequence[str] = (),
    allowed_origins: Sequence[str] = (),
) -> ASGIApp:
    """The ASGI app serving ``server`` at ``/mcp``; its lifespan runs the SDK's session manager."""
    # The SDK's own DNS rebinding check is off: HttpGuard makes the sidecar's, which knows IP literals.
    manager = StreamableHTTPSessionManager(
        server, security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    app = Starlette(routes=[Route(PATH, endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan)
    return HttpGuard(app, token=token, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


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

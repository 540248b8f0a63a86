"""Streamable HTTP: the MCP endpoint at ``/mcp``, behind the OpenCode sidecar's front door (``RequestGuard``).

- **Host** and **Origin** (DNS rebinding, cross-site requests): IP literals, ``localhost`` and
  ``--allowed-hosts`` are served; a request with an Origin must come from the server's own origin
  or ``--allowed-origins`` (which also get CORS headers). Clients without an Origin (agents) pass.
- **A client token**: with ``--http-token`` set, every request needs ``Authorization: Bearer
  <token>`` (what MCP clients' ``headers`` settings send). Without one, ``Settings.refusal`` keeps
  the server on loopback unless ``--insecure``.

Every MCP session (``Mcp-Session-Id``) gets its own ``McpSession``; the SDK closes one after 30
minutes without a request or open stream.
"""

from __future__ import annotations

import json
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
from starlette.routing import Route
from starlette.types import ASGIApp, Scope

from sessiontodo_opencode.guard import RequestGuard

PATH = "/mcp"

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
    return BearerGuard(app, token=token, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)


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

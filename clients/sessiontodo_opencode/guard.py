"""The HTTP front door of the sidecar (``RequestGuard`` is the MCP server's too): Host and Origin checks,
optional basic auth.

- **Host** (DNS rebinding): a browser tricked into calling the sidecar through an attacker's
  domain sends that domain as Host. Only IP literals, ``localhost`` (and ``*.localhost``) and the
  configured ``allowed_hosts`` are served.
- **Origin** (cross-site requests): a browser page may POST ``text/plain`` anywhere without a
  preflight. A request carrying an Origin must come from the sidecar's own origin or one of
  ``allowed_origins`` (which also get CORS headers); clients without Origin (SDKs, curl) pass.
- **Basic auth**, as OpenCode's own server does it: with a password set (``OPENCODE_SERVER_PASSWORD``),
  every request but a CORS preflight needs ``Authorization: Basic base64(username:password)``, or
  the same base64 in an ``auth_token`` query parameter (for EventSource, which cannot set headers).

(Request bodies are limited by the app itself, ``--max-body-bytes``.)
"""

from __future__ import annotations

import base64
import hmac
import logging
from collections.abc import Sequence
from urllib.parse import parse_qs

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from sessiontodo_client.security import host_allowed, origin_allowed
from sessiontodo_opencode.models import ErrorBody, ErrorData

log = logging.getLogger(__name__)


def basic_credentials(username: str, password: str) -> str:
    """The base64 ``username:password`` that basic auth (and ``auth_token``) carries."""
    return base64.b64encode(f"{username}:{password}".encode()).decode()


class RequestGuard:
    """ASGI middleware making the Host and Origin checks (and CORS for ``allowed_origins``) before ``app``
    sees a request, then asking for ``secret`` unless it is None: every HTTP gateway's front door.

    A subclass says where a client presents its secret (``presented``) and how a refusal reads
    (``refusal``): the sidecar's is OpenCode's basic auth, the MCP server's a bearer token.
    """

    challenge = b""
    """The ``WWW-Authenticate`` value of a 401."""
    exposed_headers: Sequence[str] = ()
    """Response headers a browser page of an allowed origin may read."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        secret: bytes | None,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        self._app: ASGIApp = app
        if allowed_origins:
            self._app = CORSMiddleware(
                app,
                allow_origins=list(allowed_origins),
                allow_methods=["*"],
                allow_headers=["*"],
                allow_credentials=True,
                expose_headers=list(self.exposed_headers),
            )
        self._secret = secret
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
            refused = (403, "Forbidden", f"Host not allowed: {host!r} (see --allowed-hosts)")
        elif origin is not None and not origin_allowed(origin, host, self._allowed_origins):
            refused = (403, "Forbidden", f"Origin not allowed: {origin!r} (see --allowed-origins)")
        elif self._secret is not None and scope["method"] != "OPTIONS" and not self._authorized(scope, headers):
            refused = (401, "Unauthorized", "Unauthorized")
        else:
            await self._app(scope, receive, send)
            return
        status, name, message = refused
        log.warning("refused HTTP request: %d %s", status, message)
        body = self.refusal(status, name, message)
        extra = [(b"www-authenticate", self.challenge)] if status == 401 else []
        response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": response_headers + extra})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        assert self._secret is not None
        return hmac.compare_digest(self.presented(scope, headers).strip().encode(), self._secret)

    def presented(self, scope: Scope, headers: Headers) -> str:
        """The secret the request carries ("" if none)."""
        raise NotImplementedError

    def refusal(self, status: int, name: str, message: str) -> bytes:
        """The JSON body of a refused request."""
        raise NotImplementedError


class HttpGuard(RequestGuard):
    """The sidecar's front door: OpenCode's basic auth and error bodies."""

    challenge = b'Basic realm="opencode"'

    def __init__(
        self,
        app: ASGIApp,
        *,
        username: str = "opencode",
        password: str | None = None,
        allowed_hosts: Sequence[str] = (),
        allowed_origins: Sequence[str] = (),
    ) -> None:
        secret = basic_credentials(username, password).encode() if password else None
        super().__init__(app, secret=secret, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)

    def presented(self, scope: Scope, headers: Headers) -> str:
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            presented = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("auth_token", [""])[0]
        return presented

    def refusal(self, status: int, name: str, message: str) -> bytes:
        """An OpenCode-style JSON error."""
        return ErrorBody(name=name, data=ErrorData(message=message)).model_dump_json().encode()

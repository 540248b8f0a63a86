"""The HTTP front door of the sidecar: Host and Origin checks, optional basic auth.

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


class HttpGuard:
    """ASGI middleware applying the checks above before ``app`` sees a request."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        username: str = "opencode",
        password: str | None = None,
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
            )
        self._expected = basic_credentials(username, password).encode() if password else None
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
            await _refuse(send, 403, "Forbidden", f"Host not allowed: {host!r} (see --allowed-hosts)")
            return
        if origin is not None and not origin_allowed(origin, host, self._allowed_origins):
            await _refuse(send, 403, "Forbidden", f"Origin not allowed: {origin!r} (see --allowed-origins)")
            return
        if self._expected is not None and scope["method"] != "OPTIONS" and not self._authorized(scope, headers):
            await _refuse(send, 401, "Unauthorized", "Unauthorized", [(b"www-authenticate", b'Basic realm="opencode"')])
            return
        await self._app(scope, receive, send)

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        assert self._expected is not None
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            presented = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("auth_token", [""])[0]
        return hmac.compare_digest(presented.strip().encode(), self._expected)


async def _refuse(
    send: Send, status: int, name: str, message: str, extra_headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    """An OpenCode-style JSON error, sent without involving the app."""
    log.warning("refused HTTP request: %d %s", status, message)
    body = ErrorBody(name=name, data=ErrorData(message=message)).model_dump_json().encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *extra_headers]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

"""Who may see the board: sign-in with the viewer token or basic auth, a signed cookie, CSRF tokens.

- Signing in (``POST /login``) checks the viewer token, or basic auth's user name and password, in
  constant time, and answers with a cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict``
  (no other site's request carries it), and ``Secure`` with the ``__Host-`` prefix over HTTPS.
- The cookie is signed, not stored: ``v1.<expires>.<nonce>.<mac>``, an HMAC-SHA256 under a key
  derived from the sign-in secrets. It outlives a restart of the board (open pages reconnect
  without signing in again) and changing a secret signs everybody out.
- Writes carry ``X-CSRF-Token``, an HMAC of the cookie's nonce that only the board's own pages can
  read (``GET /api/me``): a request forged by another site cannot, on top of SameSite and the
  Origin check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

COOKIE_VERSION = "v1"


@dataclass(frozen=True)
class SignIn:
    """One signed-in browser: the nonce its cookie carries, and when the cookie expires (Unix seconds)."""

    nonce: str
    expires: int


class Viewers:
    """The sign-in secrets and the cookies and CSRF tokens made from them."""

    def __init__(
        self,
        *,
        token: str,
        username: str,
        password: str | None,
        lifetime: float,
        https: bool,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._token = token.encode()
        self._basic = f"{username}:{password}".encode() if password else None
        self._lifetime = int(lifetime)
        self._clock = clock
        self.https = https
        secret = b"\0".join([b"sessiontodo-web sign-in", self._token, self._basic or b""])
        self._key = hashlib.sha256(secret).digest()
        self.cookie_name = "__Host-sessiontodo-web" if https else "sessiontodo-web"
        """``__Host-``: the browser keeps it only if Secure, for this host and path ``/``."""

    @property
    def basic_auth(self) -> bool:
        return self._basic is not None

    def accepts_token(self, presented: str) -> bool:
        return hmac.compare_digest(presented.strip().encode(), self._token)

    def accepts_password(self, username: str, password: str) -> bool:
        if self._basic is None:
            return False
        return hmac.compare_digest(f"{username}:{password}".encode(), self._basic)

    def accepts_basic(self, authorization: str) -> bool:
        """Whether an ``Authorization: Basic …`` header carries the user name and password."""
        scheme, _, encoded = authorization.partition(" ")
        if self._basic is None or scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(decoded, self._basic)

    def issue(self) -> str:
        """A new cookie value."""
        expires = int(self._clock()) + self._lifetime
        payload = f"{COOKIE_VERSION}.{expires}.{secrets.token_urlsafe(18)}"
        return f"{payload}.{self._mac(payload)}"

    def read(self, cookie: str | None) -> SignIn | None:
        """The sign-in a cookie value proves, or None (missing, forged, from other secrets, or expired)."""
        if not cookie:
            return None
        payload, _, mac = cookie.rpartition(".")
        version, _, rest = payload.partition(".")
        expires, _, nonce = rest.partition(".")
        if version != COOKIE_VERSION or not expires.isdigit() or not nonce:
            return None
        if not hmac.compare_digest(mac.encode(), self._mac(payload).encode()):
            return None
        if int(expires) <= self._clock():
            return None
        return SignIn(nonce, int(expires))

    def set_cookie(self, value: str) -> str:
        """The ``Set-Cookie`` header value that signs a browser in."""
        return self._cookie(value, self._lifetime)

    def clear_cookie(self) -> str:
        """The ``Set-Cookie`` header value that signs a browser out."""
        return self._cookie("", 0)

    def csrf_token(self, sign_in: SignIn) -> str:
        return self._mac(f"csrf.{sign_in.nonce}")

    def accepts_csrf(self, sign_in: SignIn, presented: str) -> bool:
        return hmac.compare_digest(presented.encode(), self.csrf_token(sign_in).encode())

    def _cookie(self, value: str, max_age: int) -> str:
        attributes = [f"{self.cookie_name}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
        return "; ".join(attributes + (["Secure"] if self.https else []))

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()

"""Who may see the board: sign-in with the viewer token or basic auth, a signed cookie, CSRF tokens.

- Signing in (``POST /login``) checks the viewer token, or basic auth's user name and password, in
  constant time, and answers with a cookie: ``HttpOnly`` (no script reads it), ``SameSite=Strict``
  (no other site's request carries it), and ``Secure`` with the ``__Host-`` prefix over HTTPS.
- The cookie is signed, not stored: ``v1.<expires>.<nonce>.<mac>``, an HMAC-SHA256 under a key
  derived from the sign-in secrets. It outlives a restart of the board (open pages reconnect
  without signing in again) and changing a secret signs everybody out.
- Failed sign-ins slow guessing down (``SignInThrottle``): a client that failed a few times in a
  row waits longer and longer before its next try, and all clients together fail at most about
  once a second; a waiting try is answered 429 without its secret being checked.
- Writes carry ``X-CSRF-Token``, an HMAC of the cookie's nonce that only the board's own pages can
  read (``GET /api/me``): a request forged by another site cannot, on top of SameSite and the
  Origin check.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import secrets
import time
from collections import OrderedDict
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


FREE_FAILURES = 5
"""Failed sign-ins in a row a client may make before it has to wait."""
MAX_CLIENT_WAIT = 60.0
"""Seconds a client waits at most between tries: the wait doubles from 1 s with each further failure."""
GLOBAL_FAILURES_PER_SECOND = 1.0
"""Failed sign-ins of all clients together, sustained; past the burst, every client waits its turn."""
GLOBAL_FAILURE_BURST = 60
"""Failed sign-ins all clients together may make at once before the global rate holds."""
MAX_TRACKED_CLIENTS = 10_000
"""Clients whose failures are remembered; the longest-quiet one is forgotten first (the global rate still holds)."""


@dataclass
class _Failures:
    count: int
    next_try: float


class SignInThrottle:
    """Back-off on failed sign-ins, per client and across all clients.

    A client (its address) may fail ``FREE_FAILURES`` times in a row; after that each failure makes
    it wait twice as long as the last one (1 s, 2 s, … up to ``MAX_CLIENT_WAIT``) until it signs in.
    All clients together may fail ``GLOBAL_FAILURE_BURST`` times at once and then one failure per
    ``1 / GLOBAL_FAILURES_PER_SECOND`` seconds (a token bucket), so many addresses guess no faster
    than one. Memory is bounded: at most ``MAX_TRACKED_CLIENTS`` clients are remembered.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._clients: OrderedDict[str, _Failures] = OrderedDict()
        self._tokens = float(GLOBAL_FAILURE_BURST)
        self._refilled = clock()

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its sign-in is checked; 0 when it may try now."""
        now = self._clock()
        self._refill(now)
        global_wait = 0.0 if self._tokens >= 1 else (1 - self._tokens) / GLOBAL_FAILURES_PER_SECOND
        failures = self._clients.get(client)
        client_wait = max(0.0, failures.next_try - now) if failures is not None else 0.0
        return max(global_wait, client_wait)

    def failed(self, client: str) -> None:
        now = self._clock()
        self._refill(now)
        self._tokens -= 1
        failures = self._clients.pop(client, None) or _Failures(0, now)
        failures.count += 1
        if failures.count > FREE_FAILURES:
            failures.next_try = now + min(MAX_CLIENT_WAIT, 2.0 ** (failures.count - FREE_FAILURES - 1))
        self._clients[client] = failures  # the most recent last: the oldest is forgotten first
        while len(self._clients) > MAX_TRACKED_CLIENTS:
            self._clients.popitem(last=False)

    def succeeded(self, client: str) -> None:
        self._clients.pop(client, None)

    def _refill(self, now: float) -> None:
        elapsed, self._refilled = now - self._refilled, now
        self._tokens = min(float(GLOBAL_FAILURE_BURST), self._tokens + elapsed * GLOBAL_FAILURES_PER_SECOND)


def retry_after_header(wait: float) -> str:
    """A ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return str(max(1, math.ceil(wait)))

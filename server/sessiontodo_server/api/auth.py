"""Bearer-token authentication, roles and audit lines for every call (``--auth-file``).

The auth file is TOML, one ``[[token]]`` table per token holding the hex SHA-256 of the token
(never the token itself), its tenant, its role and an optional name for the audit log. A call
carries ``authorization: Bearer <token>``; the token's hash is compared with every entry in
constant time. Health stays open for load balancers; reflection needs any valid token.
A reload that drops a token (or moves it to another tenant) ends the streams it holds open with
UNAUTHENTICATED, as a new call would be told (every role may watch, so a lowered role ends none).
"""

from __future__ import annotations

import asyncio
import enum
import hashlib
import hmac
import inspect
import logging
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sessiontodo_server.api.service_name import SERVICE_NAME
from sessiontodo_server.domain import tenancy

log = logging.getLogger(__name__)
audit = logging.getLogger("sessiontodo_server.audit")


class Role(enum.IntEnum):
    """Each role may do everything the one before it may."""

    READER = 1
    """Reads and watches its tenant's sessions."""
    WRITER = 2
    """Also creates, changes and removes its tenant's sessions and todos."""
    ADMIN = 3
    """Also removes all of its tenant's sessions at once."""


_ROLES = {
    "GetTodos": Role.READER,
    "GetSession": Role.READER,
    "BatchGetTodos": Role.READER,
    "ListSessions": Role.READER,
    "WatchTodos": Role.READER,
    "WatchChanges": Role.READER,
    "CreateSession": Role.WRITER,
    "UpdateSession": Role.WRITER,
    "RemoveSession": Role.WRITER,
    "ReplaceTodos": Role.WRITER,
    "AddTodo": Role.WRITER,
    "UpdateTodo": Role.WRITER,
    "RemoveTodo": Role.WRITER,
    "ClaimTodo": Role.WRITER,
    "RenewClaim": Role.WRITER,
    "ReleaseTodo": Role.WRITER,
    "BatchWrite": Role.WRITER,  # every write it carries is a writer's; RemoveAllSessions is not among them
    "RemoveAllSessions": Role.ADMIN,
}


def required_role(method: str) -> Role | None:
    """The least role that may call ``/package.Service/Method``; None for the open health service.

    Anything not listed (a future rpc, an unknown service) needs ADMIN until someone decides.
    """
    service, _, name = method.lstrip("/").partition("/")
    if service == health.SERVICE_NAME:
        return None
    if service.startswith("grpc.reflection."):
        return Role.READER
    if service == SERVICE_NAME:
        return _ROLES.get(name, Role.ADMIN)
    return Role.ADMIN


class AuthFileError(Exception):
    """The auth file cannot be read or is not valid."""


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-fA-F]{64}$")
    tenant: str = Field(pattern=tenancy.TENANT_PATTERN)
    role: str = Field(pattern=r"^(reader|writer|admin)$")
    name: str = Field("", max_length=128, description="Shown in audit lines instead of a hash prefix.")


class _AuthFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: list[_Entry] = []


@dataclass(frozen=True, slots=True)
class Token:
    digest: bytes
    tenant: str
    role: Role
    name: str


class TokenTable:
    def __init__(self, tokens: Sequence[Token]) -> None:
        self._tokens = tuple(tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, token: object) -> bool:
        return token in self._tokens

    @classmethod
    def load(cls, path: Path) -> TokenTable:
        try:
            parsed = _AuthFile.model_validate(tomllib.loads(path.read_text()))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise AuthFileError(f"cannot read auth file {path}: {error}") from error
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise AuthFileError(f"invalid auth file {path}: {problems}") from error
        tokens = [
            Token(bytes.fromhex(e.sha256), e.tenant, Role[e.role.upper()], e.name or e.sha256[:12].lower())
            for e in parsed.token
        ]
        if len({token.digest for token in tokens}) != len(tokens):
            raise AuthFileError(f"invalid auth file {path}: the same sha256 is listed twice")
        return cls(tokens)

    def by_digest(self, digest: bytes) -> Token | None:
        return next((token for token in self._tokens if token.digest == digest), None)

    def find(self, presented: str) -> Token | None:
        """The entry for a presented token; every entry is compared, in constant time each."""
        if not presented:
            return None
        digest = hashlib.sha256(presented.encode()).digest()
        found = None
        for token in self._tokens:
            if hmac.compare_digest(token.digest, digest):
                found = token
        return found


def _bearer(metadata: Sequence[tuple[str, Any]] | None) -> str:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, credentials = value.partition(" ")
            if scheme.lower() == "bearer":
                return credentials.strip()
    return ""


_HEALTH_WATCH = f"/{health.SERVICE_NAME}/Watch"

_HANDLER_KINDS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _denied(
    handler: grpc.RpcMethodHandler | None, code: grpc.StatusCode, method: str, why: str, token: Token | None
) -> grpc.RpcMethodHandler:
    """A handler of the call's shape that writes the audit line and refuses. One coroutine serves
    every shape (grpc.aio lets streaming handlers be plain coroutines); the request is never decoded."""

    async def deny(request: object, context: grpc.aio.ServicerContext) -> None:
        certificate = context.auth_context().get("x509_common_name")
        audit.warning(
            "denied %s %s peer=%s cert=%s token=%s tenant=%s role=%s: %s",
            code.name,
            method,
            context.peer(),
            certificate[0].decode(errors="replace") if certificate else "-",
            token.name if token else "-",
            token.tenant if token else "-",
            token.role.name.lower() if token else "-",
            why,
        )
        await context.abort(code, why)

    shape = (handler.request_streaming, handler.response_streaming) if handler is not None else (False, False)
    return _HANDLER_KINDS[shape](deny)


@dataclass(slots=True, eq=False)  # each stream is itself: hashed by identity
class _OpenStream:
    """A stream a token holds open: the task serving it, and why it was ended (None: it was not)."""

    token: Token
    task: asyncio.Task[Any]
    ended: bool = False


class _OpenStreams:
    """Every stream open under a token, so that a reload that drops the token can end them."""

    def __init__(self) -> None:
        self._open: set[_OpenStream] = set()

    def __len__(self) -> int:
        return len(self._open)

    def open(self, token: Token) -> _OpenStream:
        task = asyncio.current_task()
        assert task is not None
        stream = _OpenStream(token, task)
        self._open.add(stream)
        return stream

    def close(self, stream: _OpenStream) -> None:
        self._open.discard(stream)

    def revoke(self, table: TokenTable) -> int:
        """End the streams whose token ``table`` no longer admits as it was; how many."""
        ended = 0
        for stream in list(self._open):
            now = table.by_digest(stream.token.digest)
            if now is not None and now.tenant == stream.token.tenant:
                continue
            stream.ended = True
            self._open.discard(stream)
            stream.task.cancel()  # lands in the stream's wait; the stream then ends with ``ended``
            ended += 1
        return ended


Scope = Callable[[grpc.aio.ServicerContext], AbstractAsyncContextManager[None]]
"""What a call runs inside, from its start to its end (its stream's end, for a stream)."""


def _within(handler: grpc.RpcMethodHandler, scope: Scope) -> grpc.RpcMethodHandler:
    """``handler`` run inside ``scope``, whatever its shape."""
    for kind in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        if (behaviour := getattr(handler, kind)) is not None:
            return handler._replace(**{kind: _scoped(behaviour, scope)})
    return handler


def _scoped(behaviour: Callable[..., Any], scope: Scope) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(behaviour):

        async def stream(request: object, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            async with scope(context), aclosing(behaviour(request, context)) as messages:
                async for message in messages:
                    yield message

        return stream

    async def call(request: object, context: grpc.aio.ServicerContext) -> Any:
        async with scope(context):
            return await behaviour(request, context)

    return call


def _as_caller(token: Token, streams: _OpenStreams) -> Scope:
    """The caller's tenant entered for the whole call; the call tracked under its token, and
    ended UNAUTHENTICATED if a reload revokes the token while it runs."""

    @asynccontextmanager
    async def scope(context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        tenancy.enter(token.tenant)
        tracked = streams.open(token)
        try:
            yield
        except asyncio.CancelledError:
            if not tracked.ended:
                raise  # the client went away (re-raised: grpc/grpc#43360)
            tracked.task.uncancel()
            audit.warning("ended the call of %s token=%s tenant=%s: revoked", context.peer(), token.name, token.tenant)
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, "the bearer token was revoked")
        finally:
            streams.close(tracked)

    return scope


class _Slots:
    """At most ``limit`` calls at once; one more is RESOURCE_EXHAUSTED."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.taken = 0
        self._what = what

    @asynccontextmanager
    async def __call__(self, context: grpc.aio.ServicerContext) -> AsyncIterator[None]:
        if self.taken >= self.limit:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"at most {self.limit} {self._what} at once")
        self.taken += 1
        try:
            yield
        finally:
            self.taken -= 1


ANONYMOUS_HEALTH_WATCHES = 100
"""Health ``Watch`` streams callers without a valid token may hold open at once (at most
``--max-watchers``): each costs the server memory, and health is open to anyone who reaches the
port. Callers with a valid token are not limited here."""


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    """Authenticates and authorizes every call; ``reload()`` re-reads the auth file (SIGHUP)."""

    def __init__(self, path: Path, anonymous_health_watches: int = ANONYMOUS_HEALTH_WATCHES) -> None:
        self._path = path
        self._table = TokenTable.load(path)
        self._streams = _OpenStreams()
        self._anonymous_health_watches = _Slots(anonymous_health_watches, "health watches without a token")
        self._limited: dict[int, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
        self._as_caller: dict[tuple[str, Token], tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}
        """(method, token) -> (handler, the handler entering the token's tenant): made once, so that
        the observing interceptor outside sees the same handler call after call and keeps its wrapping."""
        log.info("auth: %d tokens from %s", len(self._table), path)

    def reload(self) -> None:
        """Raises ``AuthFileError`` and keeps the current tokens if the file is not valid; ends the
        open streams of tokens it drops."""
        self._table = TokenTable.load(self._path)
        self._as_caller = {key: value for key, value in self._as_caller.items() if key[1] in self._table}
        ended = self._streams.revoke(self._table)
        log.info(
            "auth: reloaded %d tokens from %s; ended %d streams of dropped tokens", len(self._table), self._path, ended
        )

    @property
    def open_streams(self) -> int:
        """Streams open under a token now."""
        return len(self._streams)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        method: str = details.method
        handler = await continuation(details)
        required = required_role(method)
        presented = _bearer(details.invocation_metadata)
        token = self._table.find(presented)
        if required is None:
            if token is None and handler is not None and method == _HEALTH_WATCH:
                return self._anonymous_health_watch(handler)
            return handler
        if token is None:
            why = "unknown bearer token" if presented else "missing bearer token (authorization: Bearer <token>)"
            return _denied(handler, grpc.StatusCode.UNAUTHENTICATED, method, why, None)
        if token.role < required:
            why = f"role {token.role.name.lower()} may not call {method.rpartition('/')[2]}"
            return _denied(handler, grpc.StatusCode.PERMISSION_DENIED, method, why, token)
        if handler is None or not method.startswith(f"/{SERVICE_NAME}/"):
            return handler
        cached = self._as_caller.get((method, token))
        if cached is not None and cached[0] is handler:
            return cached[1]
        entering = _within(handler, _as_caller(token, self._streams))
        self._as_caller[method, token] = (handler, entering)
        return entering

    def _anonymous_health_watch(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        cached = self._limited.get(id(handler))
        if cached is not None and cached[0] is handler:
            return cached[1]
        limited = _within(handler, self._anonymous_health_watches)
        self._limited[id(handler)] = (handler, limited)
        return limited

"""etcd's v3 gRPC API as the store uses it, generated from etcd's own protos (``protos/sessiontodo_etcd``).

One channel per member, calls to one member at a time: when it stops answering (a call fails
UNAVAILABLE or runs out of time) the next calls go to the next member. Reads are retried there
at once; writes are not, since a write that failed in flight may have been applied — the store
answers UNAVAILABLE and the client's retry is safe (request ids, expected revisions). Every call
carries etcd's ``hasleader`` metadata: a member without a leader refuses at once ("no leader",
so nothing was applied) instead of queueing until a leader is back, and ends its watches.
With a user and password the client authenticates and sends etcd's token on every call,
authenticating again when etcd says the token is no longer valid.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import grpc

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.domain.store import StoreStartupError
from sessiontodo_server.stores.etcd.keys import EtcdLocation

log = logging.getLogger(__name__)
Response = TypeVar("Response")

_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
"""A member that is down, cut off, electing a leader, or too slow: try another."""


def is_transient(error: grpc.aio.AioRpcError) -> bool:
    """``_TRANSIENT``, or etcd's own words for a call that ran out of time inside it (gRPC-Go's
    "context deadline exceeded", which etcd 3.4 passes on as UNKNOWN)."""
    if error.code() in _TRANSIENT:
        return True
    return error.code() == grpc.StatusCode.UNKNOWN and "deadline exceeded" in (error.details() or "")


_OPTIONS = [
    ("grpc.max_receive_message_length", -1),  # a page of whole lists may be large
    ("grpc.max_send_message_length", -1),  # etcd's --max-request-bytes is the limit that counts
    ("grpc.keepalive_time_ms", 10_000),  # etcd accepts pings every 5 s (--grpc-keepalive-min-time)
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


def unavailable(error: BaseException) -> Unavailable:
    """What clients are told: etcd's own words (which may name its members) stay in the logs."""
    if isinstance(error, grpc.aio.AioRpcError) and is_transient(error):
        log.debug("etcd call failed: %s %s", error.code().name, error.details())
    elif isinstance(error, TimeoutError):
        log.debug("etcd call timed out")
    else:
        log.warning("etcd call failed: %r", error)
    return Unavailable("the store is unreachable; retry")


def is_compacted(error: grpc.aio.AioRpcError) -> bool:
    """etcd no longer has the revision asked for (compacted away)."""
    return error.code() == grpc.StatusCode.OUT_OF_RANGE and "compacted" in (error.details() or "")


@dataclass(frozen=True, slots=True)
class Member:
    """One member's channel and the stubs of the services the store calls (made once: a stub
    costs more to make than a call)."""

    channel: grpc.aio.Channel
    kv: pb_grpc.KVStub
    watch: pb_grpc.WatchStub
    auth: pb_grpc.AuthStub
    lease: pb_grpc.LeaseStub


class EtcdClient:
    def __init__(self, location: EtcdLocation) -> None:
        self.location = location
        self._credentials = _credentials(location) if location.tls else None
        self._members: dict[str, Member] = {}
        self._current = 0
        """The member calls go to (an index into ``location.endpoints``)."""
        self._failed_at = [0.0] * len(location.endpoints)
        """When each member last failed a call (monotonic seconds)."""
        self._token: tuple[tuple[str, str], ...] = ()
        self._failure_listeners: list[Callable[[int], None]] = []

    def _member(self, endpoint: str) -> Member:
        member = self._members.get(endpoint)
        if member is None:
            if self._credentials is None:
                channel = grpc.aio.insecure_channel(endpoint, options=_OPTIONS)
            else:
                channel = grpc.aio.secure_channel(endpoint, self._credentials, options=_OPTIONS)
            member = Member(
                channel,
                pb_grpc.KVStub(channel),
                pb_grpc.WatchStub(channel),
                pb_grpc.AuthStub(channel),
                pb_grpc.LeaseStub(channel),
            )
            self._members[endpoint] = member
        return member

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("hasleader", "true"), *self._token)

    def member(self) -> tuple[int, Member]:
        """The member calls go to now (its index), and its stubs."""
        return self._current, self._member(self.location.endpoints[self._current])

    def failed(self, member: int) -> None:
        """``member`` stopped answering: the next calls go to the member that failed longest ago
        (once per failure, however many calls in flight saw it), and the watch leaves it too."""
        self._failed_at[member] = time.monotonic()
        if member == self._current:
            count = len(self.location.endpoints)
            after = [(member + step) % count for step in range(1, count + 1)]
            self._current = min(after, key=self._failed_at.__getitem__)
            log.debug("etcd member %d of %d not answering; trying the next", member + 1, len(self.location.endpoints))
        for listener in self._failure_listeners:
            listener(member)

    def on_failure(self, listener: Callable[[int], None]) -> None:
        """``listener(member)`` whenever a call to ``member`` failed as if it were gone."""
        self._failure_listeners.append(listener)

    async def open(self) -> None:
        """Authenticate when the URL has a user; a refusal is a startup error."""
        if self.location.user:
            try:
                await self._authenticate()
            except grpc.aio.AioRpcError as error:
                raise StoreStartupError(f"etcd refused the user {self.location.user!r}: {error.details()}") from None

    async def _authenticate(self) -> None:
        self._token = ()
        request = pb.AuthenticateRequest(name=self.location.user, password=self.location.password)
        response = await self.call(lambda member: member.auth.Authenticate, request, retry=True)
        self._token = (("token", response.token),)

    async def close(self) -> None:
        for member in self._members.values():
            await member.channel.close()
        self._members.clear()

    async def call(
        self, method: Callable[[Member], Callable[..., Awaitable[Response]]], request: Any, *, retry: bool
    ) -> Response:
        """``method(member)(request)`` on the current member; on another when it stops answering and
        ``retry`` (reads); raises UNAVAILABLE, or ``grpc.aio.AioRpcError`` for etcd's other refusals."""
        attempts = len(self.location.endpoints) if retry else 1
        authenticated = False
        while True:
            index, member = self.member()
            try:
                return await method(member)(request, timeout=self.location.timeout, metadata=self.metadata)
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.UNAUTHENTICATED and self._token and not authenticated:
                    await self._authenticate()  # refused before it was applied: safe to send again
                    authenticated = True
                    continue
                if not is_transient(error):
                    raise
                self.failed(index)
                attempts -= 1
                if not attempts:
                    raise unavailable(error) from error

    async def range(self, request: pb.RangeRequest) -> pb.RangeResponse:
        return await self.call(_range, request, retry=True)

    async def txn(self, request: pb.TxnRequest, *, writes: bool = True) -> pb.TxnResponse:
        return await self.call(_txn, request, retry=not writes)

    async def grant_lease(self, ttl: int) -> int:
        """A new lease of ``ttl`` seconds (tried on another member too: a lease granted twice
        expires unused)."""
        response = await self.call(_lease_grant, pb.LeaseGrantRequest(TTL=ttl), retry=True)
        return int(response.ID)


def _range(member: Member) -> Callable[..., Awaitable[pb.RangeResponse]]:
    return cast(Callable[..., Awaitable[pb.RangeResponse]], member.kv.Range)  # grpc's stubs are untyped


def _txn(member: Member) -> Callable[..., Awaitable[pb.TxnResponse]]:
    return cast(Callable[..., Awaitable[pb.TxnResponse]], member.kv.Txn)


def _lease_grant(member: Member) -> Callable[..., Awaitable[pb.LeaseGrantResponse]]:
    return cast(Callable[..., Awaitable[pb.LeaseGrantResponse]], member.lease.LeaseGrant)


def _credentials(location: EtcdLocation) -> grpc.ChannelCredentials:
    def read(path: Path | None) -> bytes | None:
        return None if path is None else path.read_bytes()

    try:
        return grpc.ssl_channel_credentials(read(location.ca), read(location.key), read(location.cert))
    except OSError as error:
        raise StoreStartupError(f"cannot read the etcd TLS files: {error}") from error

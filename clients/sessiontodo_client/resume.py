"""The resume protocol of the two watch streams, written once and without I/O.

``WatchTodos`` resumes after the last revision it delivered; ``WatchChanges`` after the last
cursor it received, and a snapshot cut short by a disconnect is asked for again, announced by
a RESET (empty session id) as the server would. Only transient codes (``retry.TRANSIENT_CODES``)
reconnect, for ever, after full-jitter delays of the ``RetryPolicy``; any other failure ends
the watch. As python-api-core's ``retry_base`` serves ``retry_unary`` and
``retry_unary_async``, the state machines here are driven by the async ``TodoClient`` and by
sessiontodoctl's blocking calls alike. A driver:

    resume = FeedResume(after_cursor, include_snapshot=True)
    while True:
        call = stub.WatchChanges(resume.request())
        try:
            yield from resume.opened()           # a RESET when a snapshot must start again
            resume.answered(call.initial_metadata())  # headers: the server accepted the stream
            for message in call:
                if (event := resume.received(message)) is not None:
                    yield event
                if resume.finished:
                    return
            return
        except grpc.RpcError as error:
            delay = resume.failed(error.code(), error.details())
            if delay is None:
                raise service_error(error)
            sleep(delay)
        finally:
            call.cancel()

Each change of the connection (connecting, connected, reconnecting, resumed) is told to
``on_connection`` as it happens, so a person watching can tell a quiet stream from a dead one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Generic, TypeVar

import grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client.conversions import event_from_pb, feed_event_from_pb, is_known_kind
from sessiontodo_client.models import ChangeKind, FeedEvent, WatchEvent
from sessiontodo_client.retry import DEFAULT_RETRY, TRANSIENT_CODES, RetryPolicy

Message = TypeVar("Message", pb.WatchTodosResponse, pb.WatchChangesResponse)
Event = TypeVar("Event", WatchEvent, FeedEvent)


class ConnectionState(StrEnum):
    CONNECTING = "connecting"
    """The first call is open, the server has not answered yet."""
    CONNECTED = "connected"
    """The server accepted the first call."""
    RECONNECTING = "reconnecting"
    """The stream failed transiently; it is opened again after ``retry_in`` seconds."""
    RESUMED = "resumed"
    """The server accepted a call opened again, after ``after`` (nothing lost, nothing repeated)."""


@dataclass(frozen=True)
class Connection:
    """A change of a watch's connection, for people: ``after`` is where the stream (re)starts
    (``cursor e.17``, ``revision 4``; empty for the start or a new snapshot), ``error`` what
    interrupted it."""

    state: ConnectionState
    after: str = ""
    retry_in: float | None = None
    error: str = ""


ConnectionListener = Callable[[Connection], None]

ACCEPTED_HEADER = ("sessiontodo-watch", "accepted")
"""The header a sessiontodo server sends as soon as it takes a watch stream, before any message: the
connection is then known to work even when no change comes for a while. (A failed call's headers are
empty; without this header a stream counts as established at its first message.)"""


def _ignore(connection: Connection) -> None:
    """The listener of a watch nobody asked to hear about its connection."""


class WatchResume(ABC, Generic[Message, Event]):
    """What both streams share: the transient codes, the backoff between tries, the connection states."""

    def __init__(self, *, retry: RetryPolicy, on_connection: ConnectionListener | None) -> None:
        self._retry = retry
        self._tell = on_connection or _ignore
        self._failures = 0
        self._opened_before = False
        self._established = False
        self.finished = False
        """True once the stream has nothing more to deliver (the session was removed)."""

    @abstractmethod
    def request(self) -> pb.WatchTodosRequest | pb.WatchChangesRequest:
        """The request of the next call: it starts where the last one stopped."""

    @abstractmethod
    def _after(self) -> str:
        """Where the next call starts, for people."""

    def _interrupted(self) -> None:
        """The stream failed transiently: forget what cannot be resumed."""

    def opened(self) -> Sequence[Event]:
        """A call was opened with ``request()``: the events to deliver before its messages."""
        if not self._opened_before:
            self._opened_before = True
            self._tell(Connection(ConnectionState.CONNECTING, self._after()))
        return ()

    def answered(self, headers: Sequence[tuple[str, str | bytes]] | None) -> None:
        """The call's headers arrived (or it failed before any): established if they say it was accepted."""
        if ACCEPTED_HEADER in tuple(headers or ()):
            self._established_now()

    def _established_now(self) -> None:
        """The server accepted the call: tell whether it is the first connection or a resumption."""
        if self._established:
            return
        self._established = True
        resumed = self._failures > 0
        self._failures = 0
        self._tell(Connection(ConnectionState.RESUMED if resumed else ConnectionState.CONNECTED, self._after()))

    def failed(self, code: grpc.StatusCode, error: str = "") -> float | None:
        """The call failed with ``code``: seconds to wait before opening the next one, or None
        when the failure is not transient and ends the watch."""
        if code not in TRANSIENT_CODES:
            return None
        delay = self._retry.delay(self._failures)
        self._failures += 1
        self._established = False
        self._interrupted()
        self._tell(Connection(ConnectionState.RECONNECTING, self._after(), retry_in=delay, error=error))
        return delay

    @abstractmethod
    def received(self, message: Message) -> Event | None:
        """A message arrived: the event to deliver, or None when it is not for the consumer."""


class TodosResume(WatchResume[pb.WatchTodosResponse, WatchEvent]):
    """``WatchTodos``: a snapshot, then every change of one session, until it is removed; a new
    call resumes after the last revision delivered."""

    def __init__(
        self,
        session_id: str,
        after_revision: int | None = None,
        *,
        include_progress: bool = False,
        retry: RetryPolicy = DEFAULT_RETRY,
        on_connection: ConnectionListener | None = None,
    ) -> None:
        super().__init__(retry=retry, on_connection=on_connection)
        self._session_id = session_id
        self._after_revision = after_revision
        self._include_progress = include_progress

    def request(self) -> pb.WatchTodosRequest:
        return pb.WatchTodosRequest(session_id=self._session_id, after_revision=self._after_revision)

    def _after(self) -> str:
        return "" if self._after_revision is None else f"revision {self._after_revision}"

    def received(self, message: pb.WatchTodosResponse) -> WatchEvent | None:
        self._established_now()
        if not is_known_kind(message):  # a newer server's kind: the next change carries the whole list
            return None
        event = event_from_pb(message)
        if event.kind is not ChangeKind.PROGRESS:
            self._after_revision = event.revision
        elif not self._include_progress:
            return None
        self.finished = event.kind is ChangeKind.SESSION_REMOVED
        return event


class FeedResume(WatchResume[pb.WatchChangesResponse, FeedEvent]):
    """``WatchChanges``: every matching session's changes; a new call resumes after the last
    cursor received, and a snapshot cut short starts again after a RESET."""

    def __init__(
        self,
        after_cursor: str = "",
        *,
        include_snapshot: bool = False,
        session_ids: Sequence[str] = (),
        parent_id: str = "",
        labels: Mapping[str, str] | None = None,
        include_progress: bool = False,
        retry: RetryPolicy = DEFAULT_RETRY,
        on_connection: ConnectionListener | None = None,
    ) -> None:
        super().__init__(retry=retry, on_connection=on_connection)
        self._filter = pb.SessionFilter(session_ids=session_ids, parent_id=parent_id, labels=labels)
        self._cursor = after_cursor
        self._snapshot = include_snapshot and not after_cursor
        self._in_snapshot = False
        self._include_progress = include_progress

    def request(self) -> pb.WatchChangesRequest:
        return pb.WatchChangesRequest(after_cursor=self._cursor, include_snapshot=self._snapshot, filter=self._filter)

    def _after(self) -> str:
        return f"cursor {self._cursor}" if self._cursor else ""

    def opened(self) -> Sequence[FeedEvent]:
        super().opened()
        if self._in_snapshot:  # the whole snapshot comes again: say so, as the server would
            return (FeedEvent(session_id="", kind=ChangeKind.RESET, revision=0),)
        return ()

    def _interrupted(self) -> None:
        if self._in_snapshot:  # a partial snapshot cannot be resumed: ask for a whole one
            self._cursor, self._snapshot = "", True

    def received(self, message: pb.WatchChangesResponse) -> FeedEvent | None:
        self._established_now()
        if not is_known_kind(message):  # skipped, its cursor kept
            if message.cursor:
                self._cursor, self._snapshot = message.cursor, False
            return None
        event = feed_event_from_pb(message)
        starts = event.kind in (ChangeKind.SNAPSHOT, ChangeKind.RESET)
        self._in_snapshot = starts or (self._in_snapshot and not event.cursor)
        if event.cursor:
            self._cursor, self._snapshot = event.cursor, False
        if event.kind is ChangeKind.PROGRESS and not self._include_progress:
            return None
        return event

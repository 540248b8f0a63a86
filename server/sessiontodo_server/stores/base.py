"""The narrow interface every storage engine implements.

A store keeps sessions (their lists, metadata and revisions), a short history of changes
per session for resuming watchers, and a short server-wide feed of changes numbered by
cursor for resuming feeds. Writes are compare-and-set on the revision, so one interface
serves both a single process and several replicas sharing an external engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sessiontodo_server.todos import GLOBAL_SESSION_ID, Change, RemovalReason, SessionFilter, SessionInfo, Todo

__all__ = ["GLOBAL_SESSION_ID", "AddResult", "SessionState", "StoreStartupError", "TodoStore"]


class StoreStartupError(Exception):
    """The store cannot be used at all (in use by another server, unreadable): one line for the
    operator, naming the file or address; the server exits instead of serving."""


@dataclass(frozen=True, slots=True)
class SessionState:
    session_id: str
    revision: int
    todos: tuple[Todo, ...]
    info: SessionInfo

    @property
    def parent_id(self) -> str:
        return self.info.parent_id


@dataclass(frozen=True, slots=True)
class AddResult:
    """What an ``AddTodo`` returned, kept so a retry with the same request id returns it again."""

    todo: Todo
    index: int
    revision: int
    fingerprint: str = ""
    """What the request asked for (``todos.request_fingerprint``); empty when not known (older data)."""


class TodoStore(Protocol):
    feed_epoch: str
    """Names this store's feed numbering: a cursor from another epoch cannot be resumed."""

    async def open(self) -> None:
        """Connect or load; the global list exists afterwards."""

    async def close(self) -> None: ...

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str
    ) -> tuple[SessionState, Change | None]:
        """Get or create; the SESSION_CREATED change when created. Raises SessionNotFound
        (parent), ParentMismatch or LimitExceeded.

        A new session starts at revision 0, or above every revision a removed session with
        the same id reached, so a revision from a previous incarnation never looks current.
        """

    async def remove_session(self, session_id: str, reason: RemovalReason) -> list[Change]:
        """Remove a session and its descendants; one SESSION_REMOVED change for each removed."""

    async def remove_all_sessions(self) -> list[Change]:
        """Remove every session except the global list."""

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        """Matching sessions with ids greater than ``after_id``, in id order (the global list excluded)."""

    async def get(self, session_id: str) -> SessionState | None:
        """The session as readers and watchers see it: only durable writes."""

    async def latest(self, session_id: str) -> SessionState | None:
        """The state a write builds on: also writes accepted but still being made durable."""

    async def session_count(self) -> int:
        """How many sessions exist, the global list excluded."""

    def held_bytes(self) -> tuple[int, int]:
        """Bytes this process holds against the memory budget for lists, and for history and feed."""

    async def commit(self, change: Change, request: tuple[str, AddResult] | None = None) -> Change | None:
        """Store ``change`` (its list and ``info``) iff the session is at ``change.revision - 1``;
        returns it with its feed cursor, or None when another write came first.

        ``request`` records an AddTodo's request id with its result, atomically with the write.
        """

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        """The session's changes after ``revision`` up to now, or None when they cannot be bridged."""

    async def find_request(self, session_id: str, request_id: str) -> AddResult | None: ...

    async def feed_after(self, cursor: int) -> list[Change] | None:
        """Every change after ``cursor`` up to now, in feed order, or None when they cannot be bridged."""

    async def snapshot(self) -> tuple[int, list[SessionState]]:
        """Every session, read at one feed cursor, and that cursor."""

    async def expired(self, now: float) -> list[str]:
        """Ids of sessions whose idle TTL has run out at ``now``."""

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Replicated stores call ``listener`` with each change another replica made, in feed order.

        When they cannot tell what changed (a lost notification, a reconnect), they pass a
        RESET change carrying the current list; a removal arrives as SESSION_REMOVED.
        """

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Stores behind a network call ``listener(False)`` when they lose it, ``listener(True)`` when back."""

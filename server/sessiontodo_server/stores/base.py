"""The narrow interface every storage engine implements.

A store keeps sessions, their lists and revisions, and a short history of changes for
resuming watchers. Writes are compare-and-set on the revision, so one interface serves
both a single process and several replicas sharing an external engine.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from sessiontodo_server.todos import Change, Todo

GLOBAL_SESSION_ID = ""
"""The sessionless global list: always exists, never removed."""


@dataclass(frozen=True, slots=True)
class SessionState:
    session_id: str
    parent_id: str
    revision: int
    todos: tuple[Todo, ...]


@dataclass(frozen=True, slots=True)
class AddResult:
    """What an ``AddTodo`` returned, kept so a retry with the same request id returns it again."""

    todo: Todo
    index: int
    revision: int


class TodoStore(Protocol):
    async def open(self) -> None:
        """Connect or load; the global list exists afterwards."""

    async def close(self) -> None: ...

    async def create_session(self, session_id: str, parent_id: str, max_sessions: int) -> tuple[SessionState, bool]:
        """Get or create; raises SessionNotFound (parent), ParentMismatch or LimitExceeded.

        A new session starts above every revision a removed session ever reached, so a
        revision from a previous incarnation of the same id can never look current.
        """

    async def remove_session(self, session_id: str) -> list[Change]:
        """Remove a session and its descendants; one SESSION_REMOVED change for each removed."""

    async def remove_all_sessions(self) -> list[Change]:
        """Remove every session except the global list."""

    async def list_sessions(self, after_id: str, limit: int) -> list[SessionState]:
        """Sessions with ids greater than ``after_id``, in id order (the global list excluded)."""

    async def get(self, session_id: str) -> SessionState | None: ...

    async def commit(self, change: Change, request: tuple[str, AddResult] | None = None) -> bool:
        """Store ``change`` iff the session is at ``change.revision - 1``; False otherwise.

        ``request`` records an AddTodo's request id with its result, atomically with the write.
        """

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        """The changes after ``revision`` up to now, or None when they cannot be bridged."""

    async def find_request(self, session_id: str, request_id: str) -> AddResult | None: ...

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Replicated stores call ``listener`` with each change another replica made, in order.

        When they cannot tell what changed (a lost notification, a reconnect), they pass a
        RESET change carrying the current list; a removal arrives as SESSION_REMOVED.
        """

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Stores behind a network call ``listener(False)`` when they lose it, ``listener(True)`` when back."""

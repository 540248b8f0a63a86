"""The narrow interface every storage engine implements.

A store keeps sessions (their lists, metadata and revisions), a short history of changes
per session for resuming watchers, and a short server-wide feed of changes numbered by
cursor for resuming feeds. A write is a ``Mutation`` the store applies atomically to the
current state, so one interface serves both a single process and several replicas sharing an
external engine, without read-then-compare-and-set loops.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from sessiontodo_server.domain.batch import Batch, BatchWritten, Write, WriteContext
from sessiontodo_server.domain.values import (
    EVERY_SESSION,
    GLOBAL_SESSION_ID,
    Change,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
)

__all__ = [
    "GLOBAL_SESSION_ID",
    "REQUEST_RETENTION_SECONDS",
    "REQUEST_RETENTION_WRITES",
    "AddResult",
    "SessionState",
    "StoreInUseError",
    "StoreStartupError",
    "TodoStore",
    "Written",
]

REQUEST_RETENTION_WRITES = 10_000
REQUEST_RETENTION_SECONDS = 3600.0
"""An AddTodo request id is remembered (per session) until it is both this many writes of its
session and this many seconds old: a retry within either gets the first result."""


class StoreStartupError(Exception):
    """The store cannot be used at all (in use by another server, unreadable): one line for the
    operator, naming the file or address; the server exits instead of serving."""


class StoreInUseError(StoreStartupError):
    """Another server holds the store (an sqlite file is served by one process at a time)."""


class SessionState(NamedTuple):
    """A session as a read or a write left it (a named tuple: one is made on every call)."""

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


class Written(NamedTuple):
    """What a write did: the session as the write left it, the change it made (None when nothing
    changed, or for a retried request id), and an AddTodo's result (for a retry, the first call's)."""

    state: SessionState
    change: Change | None = None
    result: AddResult | None = None


class TodoStore(Protocol):
    feed_epoch: str
    """Names this store's feed numbering: a cursor from another epoch cannot be resumed."""

    async def open(self) -> None:
        """Connect or load; the global list exists afterwards."""

    async def close(self) -> None: ...

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str, *, max_per_tenant: int = 0
    ) -> tuple[SessionState, Change | None]:
        """Get or create; the SESSION_CREATED change when created. Raises SessionNotFound
        (parent), ParentMismatch or LimitExceeded (``max_sessions`` in all, or ``max_per_tenant``
        of the id's tenant, its global list not counted; 0: no such limit), checked and created
        in one step however many replicas share the store.

        A new session starts at revision 0, or above every revision a removed session with
        the same id reached, so a revision from a previous incarnation never looks current.
        """

    async def remove_session(self, session_id: str, reason: RemovalReason, origin: str = "") -> list[Change]:
        """Remove a session and its descendants; one SESSION_REMOVED change for each removed."""

    async def remove_all_sessions(self, origin: str = "", only: SessionFilter = EVERY_SESSION) -> list[Change]:
        """Remove every session ``only`` matches (with their descendants) except the global lists."""

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        """Matching sessions with ids greater than ``after_id``, in id order (the global list excluded)."""

    async def get(self, session_id: str) -> SessionState | None:
        """The session as readers and watchers see it: only durable writes."""

    async def session_count(self) -> int:
        """How many sessions exist, the global list excluded."""

    def held_bytes(self) -> tuple[int, int]:
        """Bytes this process holds against the memory budget for lists, and for history and feed."""

    def feed_position(self) -> int:
        """The cursor of the newest change this process has delivered (once open: what a feed
        starting from now has seen everything up to, a restarted server included)."""

    async def write(self, operation: Write, context: WriteContext) -> Written:
        """Apply ``operation.mutation`` to its session's current state in one atomic step
        (``mutations.apply``'s rules, with ``context.limits``), stamping ``updated_at =
        context.now``; the change carries ``context.origin`` and its feed cursor.

        First, in this order: SessionNotFound; a ``context.request_id`` still remembered (see
        ``REQUEST_RETENTION_*``) returns the first call's result and writes nothing;
        RevisionMismatch when ``operation.expected_revision`` is given and differs. Then TodoNotFound,
        InvalidArgument or LimitExceeded from the mutation, changing nothing. Never fails because
        another writer came first.

        Builds on every write accepted before it, durable or not; answers (refusals included)
        only once what it answers from is durable, so ``get`` and watchers never run ahead of it.
        """

    async def write_batch(self, batch: Batch, context: WriteContext) -> BatchWritten:
        """Apply ``batch.operations`` in order, each to the state the ones before it left, in one
        atomic step (one transaction): all of them or none. Each follows the rules of the call it
        stands for (``write``: its mutation and expected revision, stamping ``updated_at = now``;
        ``create_session`` with ``limits.max_sessions``; ``remove_session`` with reason REMOVED),
        and a failing one raises that call's error with ``write_index`` set (``batch.at_write``),
        leaving everything as it was. The changes, each with ``origin``, carry consecutive feed
        cursors in operation order (a removal one per removed session, as ``remove_session``).

        A ``context.request_id`` (qualified with its tenant: ``tenant\nid``) still remembered returns
        the first batch's outcomes and writes nothing, or raises BatchRequestIdReused when that
        batch's ``fingerprint`` differs; a new one is remembered with the batch's outcomes, atomically with
        it, for at least ``REQUEST_RETENTION_SECONDS``.

        Answers like ``write``: once what it answers from is durable.
        """

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        """The session's changes after ``revision`` up to now, or None when they cannot be bridged."""

    async def feed_after(self, cursor: int) -> list[Change] | None:
        """Every change after ``cursor`` up to now, in feed order, or None when they cannot be bridged."""

    async def snapshot(self, tenant: str | None = None) -> tuple[int, list[SessionState]]:
        """Every session (or every one of ``tenant``'s, its global list included, reading no other
        tenant's), read at one feed cursor, and that cursor."""

    async def expired(self, now: float) -> list[str]:
        """Ids of sessions whose idle TTL has run out at ``now``."""

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Replicated stores call ``listener`` with each change another replica made, in feed order.

        When they cannot tell what changed in one session, they pass a RESET change carrying its
        current list; when they cannot tell at all (history lost), a RESET with an empty session
        id and the cursor they resume from: every watcher and feed then re-reads. A removal
        arrives as SESSION_REMOVED.
        """

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Stores behind a network call ``listener(False)`` when they lose it, ``listener(True)`` when back."""

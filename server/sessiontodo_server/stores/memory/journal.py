"""What the memory store needs of a journal (the sqlite one) to make its writes durable."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sessiontodo_server.domain.batch import Outcome
from sessiontodo_server.domain.store import AddResult
from sessiontodo_server.domain.values import Change, SessionInfo, Todo
from sessiontodo_server.stores.group_commit import Done


@dataclass
class Loaded:
    """What a journal holds: enough to rebuild the store."""

    feed_epoch: int
    cursor: int
    removed_floor: int = 0
    removed_marks: Sequence[tuple[str, int]] = ()
    sessions: Sequence[tuple[str, int, tuple[Todo, ...], SessionInfo]] = ()
    requests: Iterable[tuple[str, str, AddResult]] = field(default_factory=list)
    batches: Iterable[tuple[str, str, tuple[Outcome, ...], float]] = field(default_factory=list)
    """Remembered batches, oldest first: (request id, fingerprint, outcomes, when)."""


class Journal(Protocol):
    """Durable write-ahead of the memory store.

    Each write returns a future that completes once it is durable. Writes become durable in
    the order they were made; each one's ``done`` runs, in that order, as soon as it is durable
    (with None) or has failed (with the error). A failure fails every write not yet durable,
    their ``done`` called newest first, so each undo finds the state its write left. Writes made
    without awaiting in between are written in one transaction: durable together or failed
    together (``MemoryStore.write_batch`` relies on it).
    """

    def load(self) -> Loaded:
        """The stored state; a new journal starts a new feed epoch."""

    def create_session(
        self, session_id: str, revision: int, info: SessionInfo, cursor: int, done: Done
    ) -> asyncio.Future[None]: ...

    def commit(
        self,
        change: Change,
        before: tuple[Todo, ...],
        request: tuple[str, AddResult] | None,
        forget_before: int,
        done: Done,
    ) -> asyncio.Future[None]:
        """Persist the list and metadata after ``change`` (``before``: the list it changed, so only
        the difference need be written); drop remembered requests older than ``forget_before``."""

    def remove_sessions(
        self,
        session_ids: list[str],
        marks: list[tuple[str, int]],
        forgotten: list[str],
        floor: int,
        cursor: int,
        done: Done,
    ) -> asyncio.Future[None]:
        """Delete sessions, remember their last revisions (``marks``), forget older marks."""

    def remember_batch(
        self, key: str, fingerprint: str, outcomes: tuple[Outcome, ...], at: float, forgotten: list[str], done: Done
    ) -> asyncio.Future[None]:
        """Remember a batch's outcomes by request id (written with the batch's own writes, which
        are submitted with it); forget the batches named ``forgotten``."""

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Call ``listener(False)`` while the journal refuses writes, ``listener(True)`` when it accepts them again."""

    async def close(self) -> None:
        """Finish the writes under way, then close."""

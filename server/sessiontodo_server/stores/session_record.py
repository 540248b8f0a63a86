"""A session held in this process: its durable state, what is pending, and its bookkeeping.

The memory store keeps one per session; Redis and etcd make them from what they read, to plan a
batch on (``batch_plan``).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict, deque
from dataclasses import dataclass

from sessiontodo_server.domain.store import AddResult, SessionState
from sessiontodo_server.domain.values import Change, SessionInfo, Todo


@dataclass(slots=True)
class SessionRecord:
    revision: int
    info: SessionInfo
    todos: tuple[Todo, ...] = ()
    children: set[str] | None = None
    history: deque[Change] | None = None
    requests: OrderedDict[str, tuple[AddResult, float]] | None = None
    """Remembered AddTodo results by request id, oldest first, with when they were remembered."""
    expiry_scheduled: bool = False
    size: int = 0
    """``budget.state_bytes`` of ``todos`` and ``info``: what it counts toward the lists' share."""
    requests_size: int = 0
    """What its remembered requests cost."""
    tenant: str = ""
    """Whose lists' share it counts toward (``budget.per_tenant``)."""
    pending: Change | None = None
    """The newest accepted change not yet durable: what the next write builds on (``revision``,
    ``todos`` and ``info`` are the durable state readers and watchers see)."""
    written: asyncio.Future[None] | None = None
    """Completes once ``pending`` (the session's newest accepted change) is durable."""

    @property
    def latest_revision(self) -> int:
        return self.revision if self.pending is None else self.pending.revision

    @property
    def latest_info(self) -> SessionInfo:
        """The info of the newest accepted state, pending or durable."""
        return self.info if self.pending is None or self.pending.info is None else self.pending.info


def durable_state(session_id: str, record: SessionRecord) -> SessionState:
    return SessionState(session_id, record.revision, record.todos, record.info)


def accepted(record: SessionRecord) -> tuple[int, tuple[Todo, ...], SessionInfo]:
    """The revision, list and info a write builds on: the pending change's while one is being made durable."""
    pending = record.pending
    if pending is None:
        return record.revision, record.todos, record.info
    return pending.revision, pending.todos, pending.info or record.info

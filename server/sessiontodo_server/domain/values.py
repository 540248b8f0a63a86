"""The domain's values: a todo, a session's info and filter, a change, the limits, and their enums.

Plain data that every layer passes around (stores, watchers, the gRPC conversions); the rules
a list obeys and the pure operations that change one are ``todos.py``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple

from sessiontodo_server.domain import tenancy


class TodoStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class TodoPriority(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ChangeKind(StrEnum):
    SNAPSHOT = "snapshot"
    RESET = "reset"
    TODOS_REPLACED = "todos_replaced"
    TODO_ADDED = "todo_added"
    TODO_UPDATED = "todo_updated"
    TODO_REMOVED = "todo_removed"
    SESSION_REMOVED = "session_removed"
    PROGRESS = "progress"
    SESSION_CREATED = "session_created"
    SESSION_UPDATED = "session_updated"
    SESSION_LEFT_VIEW = "session_left_view"
    """Feeds with a labels filter only: the session's labels no longer match (never stored)."""


class RemovalReason(StrEnum):
    REMOVED = "removed"
    EXPIRED = "expired"


NO_ENTRIES: Mapping[str, str] = MappingProxyType({})
"""The empty metadata / labels; mappings held by values are never mutated after creation."""


def _no_entries() -> Mapping[str, str]:
    return NO_ENTRIES


# Todos are named tuples rather than frozen dataclasses: every write makes one per todo, and a
# tuple is made in a fifth of the time (a frozen dataclass sets each field through a call).
class Todo(NamedTuple):
    id: str
    content: str
    status: TodoStatus = TodoStatus.PENDING
    priority: TodoPriority = TodoPriority.MEDIUM
    metadata: Mapping[str, str] = NO_ENTRIES
    description: str = ""
    active_form: str = ""
    owner: str = ""
    blocked_by: tuple[str, ...] = ()
    """Ids of todos of the same list that must be finished first (``graph``'s rules)."""
    lease_expires_at: float = 0.0
    """When the owner's claim lapses unless renewed (Unix seconds); 0: no lease (``claims``)."""
    lease_seconds: float = 0.0
    """How long the lease runs from each renewal; 0: no lease."""


class TodoDraft(NamedTuple):
    """A todo as a caller wrote it, not yet validated: the id may be empty, status and
    priority omitted (None) or outside their enums (any other string is reported)."""

    id: str = ""
    content: str = ""
    status: str | None = None
    priority: str | None = None
    metadata: Mapping[str, str] = NO_ENTRIES
    description: str = ""
    active_form: str = ""
    owner: str = ""
    blocked_by: tuple[str, ...] = ()


DraftFields = tuple[str, str, str | None, str | None, Mapping[str, str], str, str, str, tuple[str, ...]]
"""A ``TodoDraft``'s fields in its order, as a plain tuple: a whole list's drafts are read per
write, and a tuple display is made in a fifth of a named tuple's time."""


@dataclass(frozen=True, slots=True)
class GraphChanges:
    """What an update asks of a todo's task-graph fields: None (or nothing to add or remove)
    leaves a field as it is."""

    description: str | None = None
    active_form: str | None = None
    owner: str | None = None
    add_blocked_by: tuple[str, ...] = ()
    remove_blocked_by: tuple[str, ...] = ()

    @property
    def touch_blockers(self) -> bool:
        return bool(self.add_blocked_by or self.remove_blocked_by)


NO_GRAPH_CHANGES = GraphChanges()


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """Everything about a session but its list. Times are Unix seconds; ``idle_ttl`` 0 never expires."""

    parent_id: str = ""
    labels: Mapping[str, str] = field(default_factory=_no_entries)
    created_at: float = 0.0
    updated_at: float = 0.0
    idle_ttl: float = 0.0

    @property
    def expires_at(self) -> float | None:
        return self.updated_at + self.idle_ttl if self.idle_ttl else None


def touched(info: SessionInfo, now: float) -> SessionInfo:
    """``info`` as a write at ``now`` leaves it (a constructor call: ``dataclasses.replace`` costs 3x)."""
    return SessionInfo(info.parent_id, info.labels, info.created_at, now, info.idle_ttl)


@dataclass(frozen=True, slots=True)
class SessionFilter:
    """Which sessions a listing or a feed covers; every criterion given must match."""

    session_ids: frozenset[str] = field(default_factory=frozenset)
    parent_id: str = ""
    labels: Mapping[str, str] = field(default_factory=_no_entries)
    tenant: str | None = None
    """Only this tenant's sessions (``""``: the default tenant's); None: every tenant's."""

    @property
    def id_prefix(self) -> str:
        """What every matching id starts with ("" when that narrows nothing)."""
        return f"{self.tenant}{tenancy.SEPARATOR}" if self.tenant else ""

    def matches(self, session_id: str, info: SessionInfo | None) -> bool:
        if not self._matches_but_labels(session_id, info):
            return False
        if info is None:
            return not self.labels
        return self._labels_match(info)

    def shows(self, change: Change) -> bool:
        """Whether a feed with this filter sends ``change``: it matches, or it leaves the view."""
        return self.matches(change.session_id, change.info) or self.leaves_view(change)

    def leaves_view(self, change: Change) -> bool:
        """Whether ``change`` takes its session out of this filter's view: its labels changed and
        no longer match, all else matching. (Whether they matched before is not known here.)"""
        return (
            bool(self.labels)
            and change.kind is ChangeKind.SESSION_UPDATED
            and change.info is not None
            and self._matches_but_labels(change.session_id, change.info)
            and not self._labels_match(change.info)
        )

    def _matches_but_labels(self, session_id: str, info: SessionInfo | None) -> bool:
        if self.session_ids and session_id not in self.session_ids:
            return False
        if self.tenant is not None and tenancy.tenant_of(session_id) != self.tenant:
            return False
        if info is None:
            return not self.parent_id
        return not self.parent_id or info.parent_id == self.parent_id

    def _labels_match(self, info: SessionInfo) -> bool:
        return all(info.labels.get(key) == value for key, value in self.labels.items())


EVERY_SESSION = SessionFilter()


# Identity equality on purpose: a change is an event, and watchers share one encoding
# of it by identity, for as long as the change lives (see ``transport.encode_change``).
@dataclass(frozen=True, slots=True, eq=False, weakref_slot=True)
class Change:
    """One message of a session's change feed: the full list and the session's metadata after
    the change. ``cursor`` is the change's position in the store's server-wide feed (0 for
    messages made for one watcher: snapshots, resets, progress)."""

    session_id: str
    kind: ChangeKind
    revision: int
    todos: tuple[Todo, ...] = ()
    todo_id: str = ""
    info: SessionInfo | None = None
    origin: str = ""
    reason: RemovalReason | None = None
    cursor: int = 0
    state_size: int = -1
    """Its list and labels as the memory budget counts them (``budget.state_bytes``), when the
    store that made it measured them (-1: measured on first use)."""


@dataclass(frozen=True, slots=True)
class Limits:
    """Validation limits; the defaults keep a full list far below gRPC's 4 MiB message cap."""

    max_session_id_length: int = 128
    max_todo_id_length: int = 128
    max_content_length: int = 4096
    max_todos_per_session: int = 1000
    max_list_bytes: int = 1 << 20
    max_sessions: int = 100_000
    max_watchers: int = 20_000
    max_sessions_per_tenant: int = 0
    """0: a tenant may use every session the server allows."""
    max_watchers_per_tenant: int = 0
    max_metadata_bytes: int = 16 * 1024
    max_labels: int = 64
    max_label_value_length: int = 4096
    max_batch_size: int = 1000
    max_filter_session_ids: int = 1000
    """Session ids one feed's or listing's filter may name (each costs memory for the stream's life)."""
    max_description_length: int = 16384
    max_owner_length: int = 128
    max_blockers_per_todo: int = 64
    """Ids in one todo's ``blocked_by``."""


GLOBAL_SESSION_ID = "sessiontodo:global"
"""RFC-0034's sessionless global list: always exists, never removed, valid whatever the id limits.
Each tenant has its own (``acme/sessiontodo:global``), made on first use."""


def is_global_list(session_id: str) -> bool:
    """Whether ``session_id`` is the default tenant's global list or a tenant's own."""
    return tenancy.local(session_id) == GLOBAL_SESSION_ID


def frozen(entries: Mapping[str, str]) -> Mapping[str, str]:
    """Labels or metadata as held by values: read-only, the shared empty mapping when empty."""
    return MappingProxyType(dict(entries)) if entries else NO_ENTRIES

"""Typed values of the sessiontodo API, independent of protobuf."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class TodoStatus(StrEnum):
    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    CANCELLED = "cancelled"


class TodoPriority(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


UnknownNumber = Annotated[int, Field(strict=True, ge=-(2**31), le=2**31 - 1)]
"""The wire number of an enum value this client has no name for (proto3 enums are open)."""


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
    """Feeds with a labels filter: the session's labels no longer match; forget it."""


class RemovalReason(StrEnum):
    REMOVED = "removed"
    EXPIRED = "expired"


class Todo(BaseModel):
    """One todo. Leave ``id`` empty on writes to have one generated.

    A status or priority that a newer server added, and this client has no name for, is read as
    its wire number (an ``int``) rather than failing the read or watch: it is kept, shown as that
    number, and written back unchanged, so a read-modify-write never loses it. Write the values
    this client knows as ``TodoStatus`` / ``TodoPriority`` members.
    """

    model_config = ConfigDict(frozen=True)

    id: str = ""
    content: str
    status: TodoStatus | UnknownNumber = TodoStatus.PENDING
    priority: TodoPriority | UnknownNumber = TodoPriority.MEDIUM
    metadata: dict[str, str] = {}
    """Free-form entries stored and returned untouched."""
    description: str = ""
    """The long text of what is to be done; ``content`` stays the short subject."""
    active_form: str = ""
    """What is shown while it is in progress, in the present tense ("Writing the parser")."""
    owner: str = ""
    """Who works on it (an agent, a session, a person); empty: nobody."""
    blocked_by: list[str] = []
    """Ids of todos of the same list that must be completed before this one is ready."""
    blocks: list[str] = []
    """The todos whose ``blocked_by`` names this one: derived by the server, ignored on writes."""
    lease_expires_at: datetime | None = None
    """When the owner's claim lapses unless renewed; None without a lease. Ignored on writes."""
    lease_duration: float | None = None
    """Seconds a lease runs from each renewal; None without a lease. Ignored on writes."""


class Session(BaseModel):
    model_config = ConfigDict(frozen=True)

    session_id: str
    parent_id: str = ""
    revision: int = 0
    todo_count: int = 0
    labels: dict[str, str] = {}
    created_at: datetime | None = None
    updated_at: datetime | None = None
    idle_ttl: float | None = None
    """Seconds without a change before the session expires; None: never."""


class SessionTodos(BaseModel):
    """A session with its list (``BatchGetTodos``)."""

    model_config = ConfigDict(frozen=True)

    session: Session
    todos: list[Todo]


class TodoList(BaseModel):
    """A session's todos at one revision."""

    model_config = ConfigDict(frozen=True)

    todos: list[Todo]
    revision: int


class AddedTodo(BaseModel):
    model_config = ConfigDict(frozen=True)

    todo: Todo
    index: int
    revision: int


class UpdatedTodo(BaseModel):
    model_config = ConfigDict(frozen=True)

    todo: Todo
    revision: int
    changed: bool


class Claim(BaseModel):
    """What ``claim_todo`` (or ``renew_claim``) got: the todo, now the owner's and in progress."""

    model_config = ConfigDict(frozen=True)

    todo: Todo | None
    """None when no todo was named and none is ready: "nothing ready" is an answer, not an error."""
    revision: int
    changed: bool
    """False for nothing ready, a todo that already was the owner's (no new lease), and a retried request."""

    @property
    def nothing_ready(self) -> bool:
        return self.todo is None


class ReplaceTodosWrite(BaseModel):
    """A batch's write: replace a session's list (as ``replace_todos``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todos: list[Todo]
    expected_revision: int | None = None


class AddTodoWrite(BaseModel):
    """A batch's write: add one todo (as ``add_todo``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todo: Todo
    index: int | None = None
    expected_revision: int | None = None


class UpdateTodoWrite(BaseModel):
    """A batch's write: change one todo's given fields (as ``update_todo``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todo_id: str
    content: str | None = None
    status: TodoStatus | None = None
    priority: TodoPriority | None = None
    metadata: dict[str, str] = {}
    remove_metadata: list[str] = []
    description: str | None = None
    active_form: str | None = None
    owner: str | None = None
    """The new owner; "" clears it."""
    add_blocked_by: list[str] = []
    remove_blocked_by: list[str] = []
    expected_revision: int | None = None


class RemoveTodoWrite(BaseModel):
    """A batch's write: remove one todo (as ``remove_todo``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todo_id: str
    expected_revision: int | None = None


class ClaimTodoWrite(BaseModel):
    """A batch's write: claim a todo, or the first ready one (as ``claim_todo``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    owner: str
    todo_id: str = ""
    lease: float | None = None
    expected_revision: int | None = None


class RenewClaimWrite(BaseModel):
    """A batch's write: renew a claim's lease (as ``renew_claim``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todo_id: str
    owner: str
    lease: float | None = None
    expected_revision: int | None = None


class ReleaseTodoWrite(BaseModel):
    """A batch's write: give a claimed todo back (as ``release_todo``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    todo_id: str
    owner: str
    expected_revision: int | None = None


class CreateSessionWrite(BaseModel):
    """A batch's write: create a session, or find it (as ``create_session``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    parent_id: str = ""
    labels: dict[str, str] = {}
    idle_ttl: float | None = None


class UpdateSessionWrite(BaseModel):
    """A batch's write: change a session's labels or idle TTL (as ``update_session``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    labels: dict[str, str] = {}
    remove_labels: list[str] = []
    idle_ttl: float | None = None
    expected_revision: int | None = None


class RemoveSessionWrite(BaseModel):
    """A batch's write: remove a session and its descendants (as ``remove_session``)."""

    model_config = ConfigDict(frozen=True)

    session_id: str


Write = (
    ReplaceTodosWrite
    | AddTodoWrite
    | UpdateTodoWrite
    | RemoveTodoWrite
    | ClaimTodoWrite
    | RenewClaimWrite
    | ReleaseTodoWrite
    | CreateSessionWrite
    | UpdateSessionWrite
    | RemoveSessionWrite
)
"""One write of ``TodoClient.batch_write``."""


class WriteResult(BaseModel):
    """What one write of a batch did."""

    model_config = ConfigDict(frozen=True)

    revision: int
    """The session's revision after it (a removal: its SESSION_REMOVED's; 0 when nothing was removed)."""
    changed: bool
    todo: Todo | None = None
    """Added, updated, claimed, renewed and released todos, as stored (None: a claim found nothing ready)."""
    index: int = 0
    """An added todo's position."""
    todo_ids: list[str] = []
    """A replaced list's ids, as stored."""
    removed_session_ids: list[str] = []


class WatchEvent(BaseModel):
    """One message of a watch: the change and the full list after it."""

    model_config = ConfigDict(frozen=True)

    session_id: str
    kind: ChangeKind
    revision: int
    todo_id: str = ""
    todos: list[Todo] = []
    origin: str = ""
    """Who made the change (the ``origin`` its write gave)."""
    removal_reason: RemovalReason | None = None
    session: Session | None = None
    """The session's metadata after the change; None on PROGRESS."""


class FeedEvent(WatchEvent):
    """One message of the server-wide feed (``watch_changes``): a watch message plus its cursor."""

    cursor: str = ""

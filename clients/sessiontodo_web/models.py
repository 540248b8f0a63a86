"""The JSON the board's page reads (events and answers) and writes (edit bodies).

Everything a viewer sees is data here: the page puts it into the document as text, never as markup.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from sessiontodo_client import Session, Todo, TodoPriority, TodoStatus


class TodoView(BaseModel):
    """One todo as the page shows it; a status or priority this board has no name for stays its number."""

    id: str
    content: str
    status: TodoStatus | int
    priority: TodoPriority | int
    metadata: dict[str, str]
    description: str = ""
    active_form: str = ""
    owner: str = ""
    """Who works on it; empty: nobody."""
    blocked_by: list[str] = []
    """The todos it waits for (all of them; the page marks the finished ones)."""
    blocks: list[str] = []
    lease_expires_at: datetime | None = None
    ready: bool = False
    """Free to take: pending, unowned, every blocker completed or cancelled."""

    @classmethod
    def of(cls, todo: Todo, finished: set[str] | frozenset[str] = frozenset()) -> TodoView:
        """The view of ``todo``; ``finished``: the ids of its list's completed and cancelled todos."""
        return cls(
            id=todo.id,
            content=todo.content,
            status=todo.status,
            priority=todo.priority,
            metadata=todo.metadata,
            description=todo.description,
            active_form=todo.active_form,
            owner=todo.owner,
            blocked_by=todo.blocked_by,
            blocks=todo.blocks,
            lease_expires_at=todo.lease_expires_at,
            ready=todo.status is TodoStatus.PENDING and not todo.owner and set(todo.blocked_by) <= finished,
        )


def todo_views(todos: list[Todo]) -> list[TodoView]:
    """A list as the page shows it, each todo's readiness judged by todo_service.proto's rule."""
    finished = {todo.id for todo in todos if todo.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED)}
    return [TodoView.of(todo, finished) for todo in todos]


class SessionView(BaseModel):
    """One row of the session tree: what the session is, how far along, when and by whom it last changed."""

    id: str
    parent_id: str
    revision: int
    labels: dict[str, str]
    todo_count: int
    done: int
    """Completed todos."""
    cancelled: int
    ready: int
    """Todos free to take (pending, unowned, every blocker finished)."""
    current: str
    """The content of the first todo in progress, or empty: what the session is doing now."""
    created_at: datetime | None
    updated_at: datetime | None
    idle_ttl: float | None
    origin: str
    """The origin of the last change the board saw; empty when it has seen none (or the writer gave none)."""

    @classmethod
    def of(cls, session: Session, todos: list[Todo], origin: str) -> SessionView:
        return cls(
            id=session.session_id,
            parent_id=session.parent_id,
            revision=session.revision,
            labels=session.labels,
            todo_count=len(todos),
            done=sum(todo.status is TodoStatus.COMPLETED for todo in todos),
            cancelled=sum(todo.status is TodoStatus.CANCELLED for todo in todos),
            ready=sum(view.ready for view in todo_views(todos)),
            current=next((todo.content for todo in todos if todo.status is TodoStatus.IN_PROGRESS), ""),
            created_at=session.created_at,
            updated_at=session.updated_at,
            idle_ttl=session.idle_ttl,
            origin=origin,
        )


class ChangeView(BaseModel):
    """One entry of a session's recent changes."""

    revision: int
    origin: str
    time: datetime | None
    kind: str
    todo_id: str
    summary: str
    """What changed, in words (``status of "Write docs": pending → completed``)."""


class SessionDetail(BaseModel):
    """A selected session: its row, its list and its recent changes (oldest first)."""

    session: SessionView
    todos: list[TodoView]
    changes: list[ChangeView]


class BoardView(BaseModel):
    """Every session, at the feed position ``cursor`` (the ``reset`` event, and ``GET /api/sessions``)."""

    cursor: str
    sessions: list[SessionView]


class ChangeEvent(BaseModel):
    """A ``change`` event: a session's row and list after one change, and the change."""

    session: SessionView
    todos: list[TodoView]
    change: ChangeView


class RemovedEvent(BaseModel):
    """A ``removed`` event: the session (and so its row and list) is gone."""

    session_id: str
    change: ChangeView


FeedState = Literal["loading", "live", "unreachable"]


class FeedStatus(BaseModel):
    """A ``feed`` event: whether the board is following sessiontodo (``unreachable``: no message for a while)."""

    state: FeedState


class Me(BaseModel):
    """``GET /api/me``: what a signed-in page needs to write."""

    csrf_token: str


# Edit bodies: unknown fields are refused, so a misspelt field is an error rather than a silent no-op,
# and numbers are bounded by their protobuf types (uint64 revisions, int32 indexes), so an
# out-of-range one is a 400 rather than a failure to encode the request.

MAX_REVISION = 2**64 - 1
MIN_INDEX, MAX_INDEX = -(2**31), 2**31 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expected_revision: int = Field(ge=0, le=MAX_REVISION, description="The revision of the list the viewer saw.")


class AddTodoBody(_Body):
    content: str
    status: TodoStatus = TodoStatus.PENDING
    priority: TodoPriority = TodoPriority.MEDIUM
    index: int | None = Field(None, ge=MIN_INDEX, le=MAX_INDEX)


class UpdateTodoBody(_Body):
    content: str | None = None
    status: TodoStatus | None = None
    priority: TodoPriority | None = None
    add_blocked_by: list[str] = []
    """Todos of the list it is to wait for."""
    remove_blocked_by: list[str] = []


class RemoveTodoBody(_Body):
    pass


class ClaimBody(BaseModel):
    """Claim or release a todo as ``owner`` (no revision: the claim itself is atomic, and refused with the
    reason when someone else was first)."""

    model_config = ConfigDict(extra="forbid")

    owner: str = Field(min_length=1, max_length=128, description="Who takes it: the person's name.")


class ReorderBody(_Body):
    todo_ids: list[str]

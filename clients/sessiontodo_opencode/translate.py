"""Pure conversions between sessiontodo's values and OpenCode's.

Status and priority: OpenCode's four/three known words are sessiontodo's enum values. Any
other string (upstream stores what the model wrote) is kept in the todo's metadata under
``opencode.status`` / ``opencode.priority`` beside the stand-in ``pending`` / ``medium``, and
comes back as given as long as the stand-in is unchanged (a gRPC writer that sets another
status has decided). A status or priority that a newer sessiontodo added (a number) is shown as
the stand-in too, and kept when a list comes back with the stand-in unchanged.

Sessions: OpenCode's title, directory, project and slug are session labels, and so are its agent,
model and summary where known (given to ``POST /session``, or mirrored from a real OpenCode; model
and summary as JSON); the times are the session's own.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import sessiontodo_client as service
from sessiontodo_client.plans import match_todos, with_graph
from sessiontodo_opencode.models import (
    KNOWN_PRIORITIES,
    KNOWN_STATUSES,
    ModelRef,
    Session,
    SessionSummary,
    SessionTime,
    Todo,
    TodoUpdated,
    TodoUpdatedProperties,
)

STATUS_KEY = "opencode.status"
PRIORITY_KEY = "opencode.priority"

TITLE = "title"
DIRECTORY = "directory"
PROJECT = "project"
SLUG = "slug"
AGENT = "agent"
MODEL = "model"
SUMMARY = "summary"


def run_labels(agent: str | None, model: ModelRef | None, summary: SessionSummary | None = None) -> dict[str, str]:
    """The labels that keep what a session runs and came to, for those that are known."""
    labels = {AGENT: agent} if agent else {}
    if model is not None:
        labels[MODEL] = model.model_dump_json(exclude_none=True)
    if summary is not None:
        labels[SUMMARY] = summary.model_dump_json()
    return labels


def _label_json(labels: dict[str, str], key: str, model: type[ModelRef] | type[SessionSummary]) -> Any:
    """The label's value read as ``model``; None if absent or not one (another client wrote the label)."""
    try:
        return model.model_validate_json(labels[key]) if key in labels else None
    except ValueError:
        return None


def todo_from_service(todo: service.Todo) -> Todo:
    """OpenCode's todo; a status or priority a newer sessiontodo added (a number) is shown as pending / medium."""
    known_status = todo.status if isinstance(todo.status, service.TodoStatus) else service.TodoStatus.PENDING
    known_priority = todo.priority if isinstance(todo.priority, service.TodoPriority) else service.TodoPriority.MEDIUM
    status = todo.metadata.get(STATUS_KEY) if todo.status is service.TodoStatus.PENDING else None
    priority = todo.metadata.get(PRIORITY_KEY) if todo.priority is service.TodoPriority.MEDIUM else None
    return Todo(
        id=todo.id, content=todo.content, status=status or known_status.value, priority=priority or known_priority.value
    )


def todo_to_service(todo: Todo, stored: service.Todo | None = None) -> service.Todo:
    """The service's todo; ``stored``: the stored todo with the same id, whose metadata is kept
    as it was, and whose newer status or priority number is kept while its stand-in is unchanged."""
    kept = stored.metadata if stored is not None else {}
    metadata = {key: value for key, value in kept.items() if key not in (STATUS_KEY, PRIORITY_KEY)}
    if todo.status not in KNOWN_STATUSES:
        metadata[STATUS_KEY] = todo.status
    if todo.priority not in KNOWN_PRIORITIES:
        metadata[PRIORITY_KEY] = todo.priority
    status: service.TodoStatus | int = (
        service.TodoStatus(todo.status) if todo.status in KNOWN_STATUSES else service.TodoStatus.PENDING
    )
    priority: service.TodoPriority | int = (
        service.TodoPriority(todo.priority) if todo.priority in KNOWN_PRIORITIES else service.TodoPriority.MEDIUM
    )
    if stored is not None and isinstance(stored.status, int) and status is service.TodoStatus.PENDING:
        status = stored.status
    if stored is not None and isinstance(stored.priority, int) and priority is service.TodoPriority.MEDIUM:
        priority = stored.priority
    return service.Todo(id=todo.id, content=todo.content, status=status, priority=priority, metadata=metadata)


def plan_to_service(todos: Sequence[Todo], stored: Sequence[service.Todo]) -> list[service.Todo]:
    """A ``todowrite`` list as the service's todos, each continuing the ``stored`` todo it matches (same id,
    else same content): its id, metadata, owner and dependencies are kept (``sessiontodo_client.plans``)."""
    matched = match_todos([(todo.id, todo.content) for todo in todos], stored)
    return with_graph([todo_to_service(todo, match) for todo, match in zip(todos, matched, strict=True)], matched)


def todos_from_service(todos: Iterable[service.Todo]) -> list[Todo]:
    return [todo_from_service(todo) for todo in todos]


def todo_updated(session_id: str, todos: Iterable[service.Todo], directory: str = "", project: str = "") -> TodoUpdated:
    """The ``todo.updated`` event carrying one session's full list."""
    properties = TodoUpdatedProperties(sessionID=session_id, todos=todos_from_service(todos))
    return TodoUpdated(properties=properties, directory=directory, project=project)


def milliseconds(moment: datetime | None) -> int:
    return int(moment.timestamp() * 1000) if moment else 0


def default_title(created: datetime | None, child: bool) -> str:
    """Upstream's title of a session nobody named: ``New session - 2026-11-30T12:35:51.186Z``."""
    stamp = (created or datetime.now().astimezone()).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{'Child' if child else 'New'} session - {stamp}"


def default_slug(session_id: str) -> str:
    """A stable ``word-word`` slug derived from the id, for sessions without a ``slug`` label."""
    digest = hashlib.sha256(session_id.encode()).digest()
    return f"{_ADJECTIVES[digest[0] % len(_ADJECTIVES)]}-{_NOUNS[digest[1] % len(_NOUNS)]}"


_ADJECTIVES = ("brave", "calm", "clever", "eager", "gentle", "happy", "mighty", "proud", "quiet", "shiny", "swift")
_NOUNS = ("circuit", "comet", "engine", "forest", "harbor", "knight", "orchid", "pixel", "river", "star", "tiger")


def session_info(session: service.Session, *, default_directory: str, default_project: str, version: str) -> Session:
    """OpenCode's Session for a sessiontodo session; missing labels take upstream-like defaults."""
    labels = session.labels
    return Session(
        id=session.session_id,
        slug=labels.get(SLUG) or default_slug(session.session_id),
        projectID=labels.get(PROJECT) or default_project,
        directory=labels.get(DIRECTORY) or default_directory,
        parentID=session.parent_id or None,
        title=labels.get(TITLE) or default_title(session.created_at, bool(session.parent_id)),
        agent=labels.get(AGENT) or None,
        model=_label_json(labels, MODEL, ModelRef),
        summary=_label_json(labels, SUMMARY, SessionSummary),
        version=version,
        time=SessionTime(created=milliseconds(session.created_at), updated=milliseconds(session.updated_at)),
    )


def describe_violations(violations: Sequence[tuple[str, str]]) -> str:
    """``field: why; field: why`` — the message of a 400 answer."""
    return "; ".join(f"{field}: {why}" if field else why for field, why in violations)

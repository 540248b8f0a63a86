"""OpenCode's wire types for todos, sessions, errors and the event streams.

Field names are OpenCode's (``sessionID``, ``parentID``, ``projectID``): Python code uses
snake_case attributes, JSON always carries the aliases.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

KNOWN_STATUSES = ("pending", "in_progress", "completed", "cancelled")
"""The statuses every OpenCode UI knows; others are stored and returned as given."""
KNOWN_PRIORITIES = ("high", "medium", "low")


def new_event_id() -> str:
    """An id such as ``evt_0190f3c2a1b4_5e7d…``: ascending by time, like OpenCode's bus ids."""
    return f"evt_{time.time_ns() // 1000:013x}_{secrets.token_hex(6)}"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)


class Todo(_Wire):
    """One entry of a session's list, as OpenCode's ``Todo``.

    Every listed todo has an ``id`` (the default SDK client's type requires it); on writes
    an empty ``id`` asks for a generated one. ``status`` and ``priority`` are any non-empty
    strings, as upstream stores them. Unknown fields are rejected, so a misspelt
    ``priorty`` is an error instead of a silent default.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    content: str
    status: Annotated[str, Field(min_length=1, max_length=64)]
    priority: Annotated[str, Field(min_length=1, max_length=64)]


class Tokens(_Wire):
    class Cache(_Wire):
        read: int = 0
        write: int = 0

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache: Cache = Cache()


class SessionTime(_Wire):
    created: int
    """Milliseconds since the epoch, as OpenCode's ``Date.now()``."""
    updated: int


class ModelRef(_Wire):
    """The model a session runs (``Session.model``), as upstream names it."""

    id: str
    provider_id: str = Field(alias="providerID")
    variant: str | None = None


class SessionSummary(_Wire):
    """What a session's changes came to (``Session.summary``); upstream's per-file ``diffs`` are not kept."""

    additions: int
    deletions: int
    files: int


class Session(_Wire):
    """OpenCode's ``Session``: what ``POST/GET /session`` answer and session events carry.

    Built from a sessiontodo session: title, directory, project, slug, and where known agent, model and
    summary are its labels; the times are its own. Cost and tokens are zero: the sidecar runs no model.
    """

    id: str
    slug: str
    project_id: str = Field(alias="projectID")
    directory: str
    path: str = ""
    parent_id: str | None = Field(None, alias="parentID")
    summary: SessionSummary | None = None
    cost: int | float = 0
    tokens: Tokens = Tokens()
    title: str
    agent: str | None = None
    model: ModelRef | None = None
    version: str
    time: SessionTime


class CreateSessionBody(_Wire):
    """The body of ``POST /session``: its agent and model are kept, as upstream's session shows them;
    OpenCode's other fields (permission, metadata…) are ignored.

    ``id`` is an extension (upstream always generates one).
    """

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    parent_id: str | None = Field(None, alias="parentID")
    title: str | None = None
    agent: str | None = None
    model: ModelRef | None = None


class UpdateSessionBody(_Wire):
    """The body of ``PATCH /session/{id}``: the title; OpenCode's other fields are ignored."""

    model_config = ConfigDict(extra="ignore")

    title: str | None = None


class TodoUpdatedProperties(_Wire):
    session_id: str = Field(alias="sessionID")
    todos: list[Todo]


class SessionProperties(_Wire):
    session_id: str = Field(alias="sessionID")
    info: Session


class EmptyProperties(_Wire):
    pass


class _BusEvent(_Wire):
    """An event about one session. ``directory`` scopes it (``/event?directory=``) and is not sent."""

    id: str = Field(default_factory=new_event_id)
    directory: str = Field("", exclude=True)
    project: str = Field("", exclude=True)


class TodoUpdated(_BusEvent):
    """``todo.updated``: one session's full list after a change; ``[]`` means cleared."""

    type: Literal["todo.updated"] = "todo.updated"
    properties: TodoUpdatedProperties

    @property
    def session_id(self) -> str:
        return self.properties.session_id


class _SessionEvent(_BusEvent):
    type: str  # each subclass narrows it; declared here so that JSON reads id, type, properties
    properties: SessionProperties
    seq: int = Field(0, exclude=True)
    """The session's revision at this event: the ``seq`` of its ``sync`` frame (not sent on the event)."""

    @property
    def session_id(self) -> str:
        return self.properties.session_id


class SessionCreated(_SessionEvent):
    type: Literal["session.created"] = "session.created"


class SessionUpdated(_SessionEvent):
    type: Literal["session.updated"] = "session.updated"


class SessionDeleted(_SessionEvent):
    type: Literal["session.deleted"] = "session.deleted"


BusEvent = TodoUpdated | SessionCreated | SessionUpdated | SessionDeleted
"""Every event about a session that ``/event`` and ``/global/event`` carry."""


class ServerConnected(_Wire):
    """The first frame of every event stream."""

    id: str = Field(default_factory=new_event_id)
    type: Literal["server.connected"] = "server.connected"
    properties: EmptyProperties = EmptyProperties()


class ServerHeartbeat(_Wire):
    """Sent periodically so that proxies and clients can tell a quiet stream from a dead one."""

    id: str = Field(default_factory=new_event_id)
    type: Literal["server.heartbeat"] = "server.heartbeat"
    properties: EmptyProperties = EmptyProperties()


Event = Annotated[
    TodoUpdated | SessionCreated | SessionUpdated | SessionDeleted | ServerConnected | ServerHeartbeat,
    Field(discriminator="type"),
]
"""Every envelope the ``/event`` stream carries."""


SessionEvent = SessionCreated | SessionUpdated | SessionDeleted


class SyncEvent(_Wire):
    """What upstream's sync engine records of a session event: ``session.created.1`` and so on."""

    id: str
    type: str
    seq: int
    """Grows with every event of the session (upstream counts its own events; the sidecar uses the
    session's revision, which also grows with list changes, so numbers can be skipped)."""
    aggregate_id: str = Field(alias="aggregateID")
    data: SessionProperties


class SyncPayload(_Wire):
    """The ``sync`` frame that follows each session event on ``/global/event``, as upstream's."""

    type: Literal["sync"] = "sync"
    sync_event: SyncEvent = Field(alias="syncEvent")
    id: str


def sync_event(event: SessionEvent) -> SyncEvent:
    return SyncEvent(
        id=event.id, type=f"{event.type}.1", seq=event.seq, aggregateID=event.session_id, data=event.properties
    )


class GlobalEvent(_Wire):
    """A ``/global/event`` frame: the event with the directory and project it belongs to.

    Server events (``server.connected``, ``server.heartbeat``) carry only the payload.
    """

    directory: str | None = None
    project: str | None = None
    payload: Annotated[
        TodoUpdated
        | SessionCreated
        | SessionUpdated
        | SessionDeleted
        | ServerConnected
        | ServerHeartbeat
        | SyncPayload,
        Field(discriminator="type"),
    ]


class Health(_Wire):
    """``GET /global/health``: the sidecar answers (whether sessiontodo does shows on every other route)."""

    healthy: Literal[True] = True
    version: str


class Paths(_Wire):
    """``GET /path``. The sidecar keeps no state or configuration directory of its own: those are empty."""

    home: str
    state: str = ""
    config: str = ""
    worktree: str
    directory: str


class ProjectTime(_Wire):
    created: int
    updated: int


class Project(_Wire):
    """``GET /project``: a project, from the ``project`` labels of the sessions (OpenCode's ``projectID``)."""

    id: str
    worktree: str
    time: ProjectTime
    sandboxes: list[str] = []


class ErrorData(_Wire):
    """What an error body says. ``kind`` appears only where it is known: an error object carries no nulls."""

    message: str
    kind: str | None = None
    """Where a 400's problem is (``Payload``: the body), as upstream's BadRequest says."""

    @model_serializer(mode="wrap")
    def _without_unknown_kind(self, serialize: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = serialize(self)
        if self.kind is None:
            data.pop("kind", None)
        return data


class TaggedErrorBody(_Wire):
    """Upstream's other error form, ``{"_tag": "BadRequest"}`` (``POST /session``); the sidecar adds a message."""

    tag: str = Field(alias="_tag")
    message: str


class ErrorBody(_Wire):
    """OpenCode's ``NamedError`` body: ``{"name": "NotFoundError", "data": {"message": …}}``."""

    name: str
    data: ErrorData

"""OpenCode's wire types for todos, sessions, errors and the event stream.

Field names are OpenCode's (``sessionID``, ``parentID``): Python code uses snake_case
attributes, JSON always carries the aliases.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

TodoStatus = Literal["pending", "in_progress", "completed", "cancelled"]
TodoPriority = Literal["high", "medium", "low"]


def new_event_id() -> str:
    """An id such as ``evt_0190f3c2a1b4_5e7d…``: ascending by time, like OpenCode's bus ids."""
    return f"evt_{time.time_ns() // 1000:013x}_{secrets.token_hex(6)}"


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, validate_by_name=True, validate_by_alias=True, serialize_by_alias=True)


class Todo(_Wire):
    """One entry of a session's list, as OpenCode's ``Todo``.

    Every listed todo has an ``id`` (the default SDK client's type requires it); on writes
    an empty ``id`` asks for a generated one. Unknown fields are rejected, so a misspelt
    ``priorty`` is an error instead of a silent default.
    """

    model_config = ConfigDict(extra="forbid")

    id: str = ""
    content: str
    status: TodoStatus
    priority: TodoPriority


class SessionInfo(_Wire):
    """A session as ``POST /session`` returns it; ``parentID`` only for child sessions."""

    id: str
    parent_id: str | None = Field(None, alias="parentID")


class CreateSessionBody(_Wire):
    """The body of ``POST /session``. OpenCode's other fields (title, agent, model…) are ignored."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    parent_id: str | None = Field(None, alias="parentID")


class TodoUpdatedProperties(_Wire):
    session_id: str = Field(alias="sessionID")
    todos: list[Todo]


class TodoUpdated(_Wire):
    """``todo.updated``: one session's full list after a change; ``[]`` means cleared or deleted."""

    id: str = Field(default_factory=new_event_id)
    type: Literal["todo.updated"] = "todo.updated"
    properties: TodoUpdatedProperties

    @property
    def session_id(self) -> str:
        return self.properties.session_id


class EmptyProperties(_Wire):
    pass


class ServerConnected(_Wire):
    """The first frame of every ``/event`` stream."""

    id: str = Field(default_factory=new_event_id)
    type: Literal["server.connected"] = "server.connected"
    properties: EmptyProperties = EmptyProperties()


class ServerHeartbeat(_Wire):
    """Sent periodically so that proxies and clients can tell a quiet stream from a dead one."""

    id: str = Field(default_factory=new_event_id)
    type: Literal["server.heartbeat"] = "server.heartbeat"
    properties: EmptyProperties = EmptyProperties()


Event = Annotated[TodoUpdated | ServerConnected | ServerHeartbeat, Field(discriminator="type")]
"""Every envelope the ``/event`` stream carries."""


class ErrorData(_Wire):
    message: str


class ErrorBody(_Wire):
    """OpenCode's ``NamedError`` body: ``{"name": "NotFoundError", "data": {"message": …}}``."""

    name: str
    data: ErrorData

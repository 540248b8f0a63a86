"""OpenCode gateway of sessiontodo, both ways.

- The sidecar (``sessiontodo-opencode`` / ``python -m sessiontodo_opencode``) serves OpenCode's
  session and todo routes and its event streams from a sessiontodo server; ``TodoBridge`` is the
  same thing as a library for an OpenCode-compatible server to embed.
- The mirror (``sessiontodo-opencode-mirror``) follows a real OpenCode server and copies every
  session's todos and lifecycle into sessiontodo.
"""

from sessiontodo_opencode.app import create_app
from sessiontodo_opencode.bridge import TodoBridge
from sessiontodo_opencode.fanout import Subscription
from sessiontodo_opencode.models import (
    BusEvent,
    CreateSessionBody,
    ErrorBody,
    Event,
    GlobalEvent,
    ServerConnected,
    ServerHeartbeat,
    Session,
    SessionCreated,
    SessionDeleted,
    SessionUpdated,
    Todo,
    TodoUpdated,
    TodoUpdatedProperties,
)
from sessiontodo_opencode.settings import Settings
from sessiontodo_opencode.sidecar import RunningSidecar, start_sidecar

__all__ = [
    "BusEvent",
    "CreateSessionBody",
    "ErrorBody",
    "Event",
    "GlobalEvent",
    "RunningSidecar",
    "ServerConnected",
    "ServerHeartbeat",
    "Session",
    "SessionCreated",
    "SessionDeleted",
    "SessionUpdated",
    "Settings",
    "Subscription",
    "Todo",
    "TodoBridge",
    "TodoUpdated",
    "TodoUpdatedProperties",
    "create_app",
    "start_sidecar",
]

"""OpenCode gateway of sessiontodo: a bridge library to embed and a runnable sidecar.

Embed ``TodoBridge`` in an OpenCode-compatible server, or run the sidecar
(``sessiontodo-opencode`` / ``python -m sessiontodo_opencode``) that serves OpenCode's
todo routes and ``/event`` stream from a sessiontodo server.
"""

from sessiontodo_opencode.app import create_app
from sessiontodo_opencode.bridge import TodoBridge
from sessiontodo_opencode.fanout import Subscription
from sessiontodo_opencode.models import (
    CreateSessionBody,
    ErrorBody,
    Event,
    ServerConnected,
    ServerHeartbeat,
    SessionInfo,
    Todo,
    TodoPriority,
    TodoStatus,
    TodoUpdated,
    TodoUpdatedProperties,
)
from sessiontodo_opencode.settings import Settings
from sessiontodo_opencode.sidecar import RunningSidecar, start_sidecar

__all__ = [
    "CreateSessionBody",
    "ErrorBody",
    "Event",
    "RunningSidecar",
    "ServerConnected",
    "ServerHeartbeat",
    "SessionInfo",
    "Settings",
    "Subscription",
    "Todo",
    "TodoBridge",
    "TodoPriority",
    "TodoStatus",
    "TodoUpdated",
    "TodoUpdatedProperties",
    "create_app",
    "start_sidecar",
]

"""Typed async client of the sessiontodo gRPC service."""

import importlib.metadata

from sessiontodo_client.client import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    TodoClient,
    Unauthenticated,
    Unavailable,
)
from sessiontodo_client.models import (
    AddedTodo,
    ChangeKind,
    FeedEvent,
    RemovalReason,
    Session,
    SessionTodos,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    WatchEvent,
)
from sessiontodo_client.retry import RetryPolicy, is_transient
from sessiontodo_client.security import ChannelSecurity, ServiceConnection

__version__ = importlib.metadata.version("sessiontodo")
"""The installed distribution's version: pyproject.toml is its one source."""

__all__ = [
    "Aborted",
    "AddedTodo",
    "ChangeKind",
    "ChannelSecurity",
    "FailedPrecondition",
    "FeedEvent",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "RemovalReason",
    "ResourceExhausted",
    "RetryPolicy",
    "ServiceConnection",
    "ServiceError",
    "Session",
    "SessionTodos",
    "Todo",
    "TodoClient",
    "TodoList",
    "TodoPriority",
    "TodoStatus",
    "Unauthenticated",
    "Unavailable",
    "UpdatedTodo",
    "WatchEvent",
    "is_transient",
]

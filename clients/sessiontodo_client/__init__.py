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
    AddTodoWrite,
    ChangeKind,
    CreateSessionWrite,
    FeedEvent,
    RemovalReason,
    RemoveSessionWrite,
    RemoveTodoWrite,
    ReplaceTodosWrite,
    Session,
    SessionTodos,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    UpdateSessionWrite,
    UpdateTodoWrite,
    WatchEvent,
    Write,
    WriteResult,
)
from sessiontodo_client.retry import RetryPolicy, is_transient
from sessiontodo_client.security import ChannelSecurity, ServiceConnection

__version__ = importlib.metadata.version("sessiontodo")
"""The installed distribution's version: pyproject.toml is its one source."""

__all__ = [
    "Aborted",
    "AddTodoWrite",
    "AddedTodo",
    "ChangeKind",
    "ChannelSecurity",
    "CreateSessionWrite",
    "FailedPrecondition",
    "FeedEvent",
    "InvalidArgument",
    "NotFound",
    "PermissionDenied",
    "RemovalReason",
    "RemoveSessionWrite",
    "RemoveTodoWrite",
    "ReplaceTodosWrite",
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
    "UpdateSessionWrite",
    "UpdateTodoWrite",
    "UpdatedTodo",
    "WatchEvent",
    "Write",
    "WriteResult",
    "is_transient",
]

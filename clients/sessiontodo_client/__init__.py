"""Typed async client of the sessiontodo gRPC service."""

from sessiontodo_client.client import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    RetryPolicy,
    ServiceError,
    TodoClient,
    Unavailable,
)
from sessiontodo_client.models import (
    AddedTodo,
    ChangeKind,
    Session,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdatedTodo,
    WatchEvent,
)

__all__ = [
    "Aborted",
    "AddedTodo",
    "ChangeKind",
    "FailedPrecondition",
    "InvalidArgument",
    "NotFound",
    "ResourceExhausted",
    "RetryPolicy",
    "ServiceError",
    "Session",
    "Todo",
    "TodoClient",
    "TodoList",
    "TodoPriority",
    "TodoStatus",
    "Unavailable",
    "UpdatedTodo",
    "WatchEvent",
]

"""Typed async client of the sessiontodo gRPC service."""

from sessiontodo_client.client import (
    Aborted,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    ServiceError,
    TodoClient,
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

__all__ = [
    "Aborted",
    "AddedTodo",
    "ChangeKind",
    "FailedPrecondition",
    "FeedEvent",
    "InvalidArgument",
    "NotFound",
    "RemovalReason",
    "ResourceExhausted",
    "RetryPolicy",
    "ServiceError",
    "Session",
    "SessionTodos",
    "Todo",
    "TodoClient",
    "TodoList",
    "TodoPriority",
    "TodoStatus",
    "Unavailable",
    "UpdatedTodo",
    "WatchEvent",
    "is_transient",
]

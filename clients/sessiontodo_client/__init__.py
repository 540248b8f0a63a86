"""Typed async client of the sessiontodo gRPC service.

``client`` holds ``TodoClient``; ``errors`` one exception class per status code; ``conversions``
the pure wire <-> model translations; ``resume`` the watch streams' resume protocol without I/O;
``retry`` the one retry policy; ``security`` the channel's TLS and token.
"""

import importlib.metadata

from sessiontodo_client.client import MAX_BATCH_WRITES, TodoClient
from sessiontodo_client.errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    ClaimRefused,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from sessiontodo_client.models import (
    AddedTodo,
    AddTodoWrite,
    ChangeKind,
    Claim,
    ClaimTodoWrite,
    CreateSessionWrite,
    FeedEvent,
    ReleaseTodoWrite,
    RemovalReason,
    RemoveSessionWrite,
    RemoveTodoWrite,
    RenewClaimWrite,
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
from sessiontodo_client.readiness import NotReady
from sessiontodo_client.resume import Connection, ConnectionState
from sessiontodo_client.retry import RetryPolicy, is_transient
from sessiontodo_client.security import ChannelSecurity, ServiceConnection

__all__ = [
    "MAX_BATCH_WRITES",
    "Aborted",
    "AddTodoWrite",
    "AddedTodo",
    "AlreadyExists",
    "Cancelled",
    "ChangeKind",
    "ChannelSecurity",
    "Claim",
    "ClaimRefused",
    "ClaimTodoWrite",
    "Connection",
    "ConnectionState",
    "CreateSessionWrite",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FeedEvent",
    "Internal",
    "InvalidArgument",
    "NotFound",
    "NotReady",
    "OutOfRange",
    "PermissionDenied",
    "ReleaseTodoWrite",
    "RemovalReason",
    "RemoveSessionWrite",
    "RemoveTodoWrite",
    "RenewClaimWrite",
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
    "Unimplemented",
    "Unknown",
    "UpdateSessionWrite",
    "UpdateTodoWrite",
    "UpdatedTodo",
    "WatchEvent",
    "Write",
    "WriteResult",
    "is_transient",
]

__version__ = importlib.metadata.version("sessiontodo")
"""The installed distribution's version: pyproject.toml is its one source."""

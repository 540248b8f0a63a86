"""Domain errors: what went wrong, in the service's own terms.

The api maps each class to exactly one gRPC status code (see ``api/error_status.py``).
"""

from __future__ import annotations


class TodoError(Exception):
    """Base class of every error the domain reports to callers."""

    write_index: int | None = None
    """Which operation of a batch failed (``batch.at_write``), when the error is a batch's."""


class InvalidArgument(TodoError):
    """The request is malformed; ``violations`` lists ``(field, description)`` pairs."""

    def __init__(self, violations: list[tuple[str, str]]) -> None:
        self.violations = violations
        super().__init__("; ".join(f"{field}: {why}" for field, why in violations))


class SessionNotFound(TodoError):
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"session not found: {session_id!r}")


class TodoNotFound(TodoError):
    def __init__(self, session_id: str, todo_id: str) -> None:
        self.session_id = session_id
        self.todo_id = todo_id
        super().__init__(f"todo {todo_id!r} not found in session {session_id!r}")


class RevisionMismatch(TodoError):
    """A write's ``expected_revision`` is not the session's revision: re-read and retry."""

    def __init__(self, session_id: str, expected: int, actual: int) -> None:
        self.session_id = session_id
        self.expected = expected
        self.actual = actual
        super().__init__(f"session {session_id!r} is at revision {actual}, not {expected}")


class ParentMismatch(TodoError):
    """The session already exists under another parent."""

    def __init__(self, session_id: str, parent_id: str) -> None:
        self.session_id = session_id
        self.parent_id = parent_id
        super().__init__(f"session {session_id!r} already exists with parent {parent_id!r}")


class LimitExceeded(TodoError):
    """A configured limit (sessions, watchers, todos) is reached."""

    def __init__(self, limit: str, value: int) -> None:
        self.limit = limit
        self.value = value
        super().__init__(f"{limit} limit of {value} reached")


class RequestIdReused(TodoError):
    """A request id already used in this session by a request asking for something else."""

    def __init__(self, session_id: str, request_id: str) -> None:
        self.session_id = session_id
        self.request_id = request_id
        super().__init__(
            f"request_id {request_id!r} was already used in session {session_id!r} by a different request;"
            " use a new request_id for a new request"
        )


class BatchRequestIdReused(TodoError):
    """A batch's request id already used by a batch asking for something else."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(
            f"request_id {request_id!r} was already used by a different batch; use a new request_id for a new batch"
        )


class Unavailable(TodoError):
    """The service cannot serve the call right now (shutting down, store unreachable); retry."""

    retry_after = 1.0
    """Seconds a client should wait before retrying (sent as google.rpc.RetryInfo)."""


class TodoTaken(TodoError):
    """A claim of a todo that another owner holds."""

    def __init__(self, session_id: str, todo_id: str, owner: str) -> None:
        self.session_id = session_id
        self.todo_id = todo_id
        self.owner = owner
        super().__init__(f"todo {todo_id!r} in session {session_id!r} is taken by {owner!r}")


class TodoBlocked(TodoError):
    """A claim of a todo that waits on unfinished blockers."""

    def __init__(self, session_id: str, todo_id: str, blocked_by: str) -> None:
        self.session_id = session_id
        self.todo_id = todo_id
        self.blocked_by = blocked_by
        """The unfinished blockers' ids, comma separated."""
        super().__init__(f"todo {todo_id!r} in session {session_id!r} is blocked by {blocked_by}")


class TodoNotPending(TodoError):
    """A claim of a todo that is no longer waiting to be started."""

    def __init__(self, session_id: str, todo_id: str, status: str) -> None:
        self.session_id = session_id
        self.todo_id = todo_id
        self.status = status
        super().__init__(f"todo {todo_id!r} in session {session_id!r} is {status}, not pending")


class ClaimNotHeld(TodoError):
    """A renewal or release by an owner that does not hold the claim (it was released, lapsed or
    changed hands); ``owner`` and ``status`` say how the todo stands now."""

    def __init__(self, session_id: str, todo_id: str, owner: str, status: str) -> None:
        self.session_id = session_id
        self.todo_id = todo_id
        self.owner = owner
        self.status = status
        held = f"held by {owner!r}" if owner else "unowned"
        super().__init__(f"todo {todo_id!r} in session {session_id!r} is {status} and {held}: the claim is not held")

"""What the book asks a store to write, and what each write did.

One write (``Write``) or a batch of them (``Batch``, ``BatchWrite``) goes from the book through
the instrumented wrapper to the store whole, with the ``WriteContext`` every write carries. The
book validates each operation on its own (as the rpc it stands for would) and hands the store
the whole batch; the store applies the operations in order, each to the state the ones before it
left, in one atomic step (one transaction): all of them or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from sessiontodo_server.domain.errors import TodoError
from sessiontodo_server.domain.mutations import Mutation
from sessiontodo_server.domain.values import Change, Limits, SessionInfo, Todo

MAX_WRITES = 1000
"""Operations in one batch."""


@dataclass(frozen=True, slots=True)
class Write:
    """A change to one session's list or labels, with its own compare-and-set."""

    session_id: str
    mutation: Mutation
    expected_revision: int | None = None


@dataclass(frozen=True, slots=True)
class Create:
    """Create a session, or find it (then its parent must be the same)."""

    session_id: str
    info: SessionInfo


@dataclass(frozen=True, slots=True)
class Remove:
    """Remove a session and its descendants (nothing when it does not exist)."""

    session_id: str


Operation = Write | Create | Remove


@dataclass(frozen=True, slots=True)
class Batch:
    """Operations applied atomically in order (``BatchWrite``)."""

    operations: Sequence[Operation]
    fingerprint: str = ""
    """What the batch asks for, so a reused request id asking for something else is told apart."""


class WriteContext(NamedTuple):
    """What every write carries beside its operations, the same at each layer it passes (a named
    tuple: one is made on every write)."""

    request_id: str
    """A write: its AddTodo's request id (per session). A batch: its tenant-qualified id (``tenant\nid``).
    Empty: none."""
    origin: str
    """Who wrote: carried by every change the write makes."""
    now: float
    """The time the write stamps as ``updated_at``."""
    limits: Limits


class Outcome(NamedTuple):
    """What one operation did."""

    revision: int
    """The session's revision after it (a removal: its SESSION_REMOVED's; 0 when there was nothing to remove)."""
    changed: bool
    todo: Todo | None = None
    """AddTodo and UpdateTodo: the todo as stored."""
    position: int = 0
    """AddTodo: where the todo is."""
    todo_ids: tuple[str, ...] = ()
    """ReplaceTodos: the list's ids as stored."""
    removed: tuple[str, ...] = ()
    """Remove: every session removed, the session first."""


class BatchWritten(NamedTuple):
    """A batch's outcomes in operation order, and its changes in feed order (none for a replayed batch)."""

    outcomes: tuple[Outcome, ...]
    changes: tuple[Change, ...] = ()


def at_write(error: TodoError, index: int) -> TodoError:
    """``error`` as raised by the batch's ``index``-th operation: named in its message and details."""
    error.write_index = index
    error.args = (f"writes[{index}]: {error}",)
    return error

"""A batch planned before anything of it is applied, the same for every store.

Every operation is checked against the state the ones before it left (kept here, staged, never
in the store), so a failing one leaves the store untouched; the plan's steps are then applied
together, without awaiting in between (the memory store), or in one script or Txn that first
checks the state read still holds (Redis, etcd). What a networked store reads to plan on —
which sessions the batch touches — is ``BatchReach``'s to say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from sessiontodo_server.domain import mutations
from sessiontodo_server.domain.batch import Create, Operation, Outcome, Remove, Write, at_write
from sessiontodo_server.domain.budget import info_bytes, state_bytes
from sessiontodo_server.domain.errors import (
    LimitExceeded,
    ParentMismatch,
    RevisionMismatch,
    SessionNotFound,
    TodoError,
)
from sessiontodo_server.domain.mutations import AddTodo, ReplaceTodos
from sessiontodo_server.domain.store import SessionState
from sessiontodo_server.domain.tenancy import tenant_of
from sessiontodo_server.domain.values import ChangeKind, Limits, SessionInfo, Todo, is_global_list, touched
from sessiontodo_server.stores.session_record import SessionRecord, accepted


class GrowthCheck(Protocol):
    """What refuses a batch growing the lists past the memory budget (the memory store's ``ListsAccount``)."""

    def check_batch_growth(self, tenant: str, growth: int, tenant_growth: int) -> None: ...


@dataclass(slots=True)
class Staged:
    """A session as the batch has left it so far."""

    record: SessionRecord
    """The store's record, or the new one of a session this batch creates."""
    revision: int
    todos: tuple[Todo, ...]
    info: SessionInfo
    size: int
    children: set[str] = field(default_factory=set)
    created: bool = False
    removed: bool = False


@dataclass(frozen=True, slots=True)
class WriteStep:
    record: SessionRecord
    session_id: str
    kind: ChangeKind
    revision: int
    todos: tuple[Todo, ...]
    todo_id: str
    info: SessionInfo
    size: int
    todos_before: tuple[Todo, ...]


@dataclass(frozen=True, slots=True)
class CreateStep:
    session_id: str
    record: SessionRecord
    info: SessionInfo
    revision: int


@dataclass(frozen=True, slots=True)
class RemoveStep:
    removed: tuple[tuple[str, SessionRecord], ...]
    """The session and its descendants, breadth first."""


Step = WriteStep | CreateStep | RemoveStep


class BatchPlan:
    """Operations staged one by one (``add``), each raising its call's error; then ``steps`` in order."""

    def __init__(
        self,
        sessions: Mapping[str, SessionRecord],
        being_removed: Mapping[str, object],
        removed_marks: Mapping[str, int],
        removed_floor: int,
        session_count: int,
        tenant_sessions: Mapping[str, int],
        *,
        now: float,
        limits: Limits,
        lists: GrowthCheck | None = None,
    ) -> None:
        """``tenant_sessions``: the session count of each tenant the batch may create or remove
        sessions of; ``lists``: the memory budget growth is checked against (None: a store that
        keeps its own memory, Redis or etcd)."""
        self._sessions = sessions
        self._being_removed = being_removed
        self._marks = dict(removed_marks)
        self._floor = removed_floor
        self._count = session_count
        self._tenant_sessions = dict(tenant_sessions)
        self._lists = lists
        self._now = now
        self._limits = limits
        self._staged: dict[str, Staged] = {}
        self._growth = 0
        self._tenant_growth: dict[str, int] = {}
        self.steps: list[Step] = []
        self.outcomes: list[Outcome] = []

    def add_all(self, operations: Sequence[Operation]) -> None:
        """Each operation in order; a failing one raises its error naming its index (``at_write``)."""
        for index, operation in enumerate(operations):
            try:
                self.add(operation)
            except TodoError as error:
                raise at_write(error, index) from None

    def add(self, operation: Operation) -> None:
        match operation:
            case Write():
                self.outcomes.append(self._write(operation))
            case Create():
                self.outcomes.append(self._create(operation))
            case Remove():
                self.outcomes.append(self._remove(operation))

    def _find(self, session_id: str) -> Staged | None:
        staged = self._staged.get(session_id)
        if staged is not None:
            return None if staged.removed else staged
        record = self._sessions.get(session_id)
        if record is None or session_id in self._being_removed:
            return None
        revision, todos, info = accepted(record)
        staged = self._staged[session_id] = Staged(record, revision, todos, info, record.size)
        staged.children = set(record.children or ())
        return staged

    def _resize(self, staged: Staged, size: int) -> None:
        """Refuse growth past the lists' share of the budget (in all, or the tenant's), counting the whole batch."""
        delta = size - staged.size
        tenant = staged.record.tenant
        if delta > 0 and self._lists is not None:
            self._lists.check_batch_growth(tenant, self._growth + delta, self._tenant_growth.get(tenant, 0) + delta)
        self._growth += delta
        self._tenant_growth[tenant] = self._tenant_growth.get(tenant, 0) + delta
        staged.size = size

    def _write(self, operation: Write) -> Outcome:
        session_id, mutation = operation.session_id, operation.mutation
        staged = self._find(session_id)
        if staged is None:
            raise SessionNotFound(session_id)
        expected = operation.expected_revision
        if expected is not None and expected != staged.revision:
            raise RevisionMismatch(session_id, expected, staged.revision)
        applied = mutations.apply(session_id, staged.todos, staged.info, mutation, self._limits)
        if applied is None:
            return _outcome(mutation, staged.revision, staged.todos, False, 0, _todo_id(mutation))
        info = touched(applied.info, self._now)
        self._resize(staged, state_bytes(applied.todos, info))
        before = staged.todos
        staged.revision += 1
        staged.todos, staged.info = applied.todos, info
        self.steps.append(
            WriteStep(
                staged.record,
                session_id,
                applied.kind,
                staged.revision,
                applied.todos,
                applied.todo_id,
                info,
                staged.size,
                before,
            )
        )
        return _outcome(mutation, staged.revision, applied.todos, True, applied.position, applied.todo_id)

    def _create(self, operation: Create) -> Outcome:
        session_id, info = operation.session_id, operation.info
        existing = self._find(session_id)
        if existing is not None:
            if existing.info.parent_id != info.parent_id:
                raise ParentMismatch(session_id, existing.info.parent_id)
            return Outcome(existing.revision, False)
        parent = self._find(info.parent_id) if info.parent_id else None
        if info.parent_id and parent is None:
            raise SessionNotFound(info.parent_id)
        if self._count >= self._limits.max_sessions:
            raise LimitExceeded("sessions", self._limits.max_sessions)
        tenant, per_tenant = tenant_of(session_id), self._limits.max_sessions_per_tenant
        counted = not is_global_list(session_id)
        if per_tenant and counted and self._tenant_sessions.get(tenant, 0) >= per_tenant:
            raise LimitExceeded("sessions per tenant", per_tenant)
        self._tenant_sessions[tenant] = self._tenant_sessions.get(tenant, 0) + counted
        revision = self._marks.pop(session_id, self._floor)
        record = SessionRecord(revision, info, tenant=tenant)
        staged = self._staged[session_id] = Staged(record, revision, (), info, 0, created=True)
        self._resize(staged, info_bytes(info))
        if parent is not None:
            parent.children.add(session_id)
        self._count += 1
        self.steps.append(CreateStep(session_id, record, info, revision))
        return Outcome(revision, True)

    def _remove(self, operation: Remove) -> Outcome:
        staged = self._find(operation.session_id)
        if staged is None:
            return Outcome(0, False)
        doomed = [(operation.session_id, staged)]
        for _, session in doomed:  # grows while iterating: a breadth-first walk of descendants
            doomed.extend((child, self._found(child)) for child in sorted(session.children))
        for session_id, session in doomed:
            self._resize(session, 0)
            session.removed = True
            self._marks[session_id] = session.revision + 2  # above its SESSION_REMOVED's revision
            self._count -= 1
            tenant = session.record.tenant
            self._tenant_sessions[tenant] = self._tenant_sessions.get(tenant, 0) - (not is_global_list(session_id))
        parent = self._staged.get(staged.info.parent_id)
        if parent is not None:
            parent.children.discard(operation.session_id)
        self.steps.append(RemoveStep(tuple((sid, session.record) for sid, session in doomed)))
        return Outcome(staged.revision + 1, True, removed=tuple(sid for sid, _ in doomed))

    def _found(self, session_id: str) -> Staged:
        staged = self._find(session_id)
        assert staged is not None, "a staged child exists"
        return staged


def _todo_id(mutation: mutations.Mutation) -> str:
    return getattr(mutation, "todo_id", "")


def _outcome(
    mutation: mutations.Mutation, revision: int, todos: tuple[Todo, ...], changed: bool, position: int, todo_id: str
) -> Outcome:
    """What a write to a session's list or labels returns: its todo, or its list's ids."""
    if isinstance(mutation, ReplaceTodos):
        return Outcome(revision, changed, todo_ids=tuple(todo.id for todo in todos))
    if isinstance(mutation, AddTodo):
        return Outcome(revision, changed, todos[position], position)
    if todo_id:  # an update's todo as it stands (a removed one is gone)
        return Outcome(revision, changed, next((todo for todo in todos if todo.id == todo_id), None))
    return Outcome(revision, changed)


class BatchReach:
    """Which sessions a batch touches, for a store that reads them before it plans (Redis, etcd):
    the ones it names, the parents of the ones it creates, and every descendant of the ones it
    removes. The descendants are found a level at a time, each store reading children its own way:
    it reads the children of every session in ``walk`` and hands them to ``found``."""

    def __init__(self, operations: Sequence[Operation]) -> None:
        self.creates = sorted({op.session_id for op in operations if isinstance(op, Create)})
        """The ids the batch creates."""
        self.removes = sorted({op.session_id for op in operations if isinstance(op, Remove)})
        """The ids the batch removes (with their descendants)."""
        named = {op.session_id for op in operations}
        named |= {op.info.parent_id for op in operations if isinstance(op, Create) and op.info.parent_id}
        self.named = sorted(named)
        """The sessions the batch names, and the parents of the ones it creates."""
        self.children: dict[str, list[str]] = {}
        """The children of every session walked: each one the batch may remove."""
        self.walk: list[str] = list(self.removes)
        """The sessions whose children are to be read next."""
        self._touched = set(named)

    @property
    def sessions(self) -> list[str]:
        """Every session found so far: the named ones and the descendants found."""
        return sorted(self._touched)

    def found(self, children: Mapping[str, list[str]]) -> list[str]:
        """Record the children read of the sessions in ``walk``, which becomes the next level (every
        child not walked yet); returns the sessions this touches that were not touched before."""
        self.children.update(children)
        level = {child for kids in children.values() for child in kids}
        self.walk = sorted(level - self.children.keys())
        new = sorted(level - self._touched)
        self._touched.update(new)
        return new


def plan_on_read(
    operations: Sequence[Operation],
    states: Mapping[str, SessionState | None],
    children: Mapping[str, Sequence[str]],
    *,
    starts: Mapping[str, int],
    floor: int,
    session_count: int,
    tenant_sessions: Mapping[str, int],
    now: float,
    limits: Limits,
) -> BatchPlan:
    """``operations`` planned on the sessions a store read (``states``, None for one that does not
    exist; ``children``: those of each session the batch may remove); a failing one raises its
    error naming its index. ``starts``: the revision a re-created id starts at (the rest start at
    ``floor``); ``session_count`` and ``tenant_sessions``: the session counts the limits are
    checked on."""
    records = {
        session_id: SessionRecord(
            state.revision,
            state.info,
            state.todos,
            set(children.get(session_id, ())),
            tenant=tenant_of(session_id),
        )
        for session_id, state in states.items()
        if state is not None
    }
    plan = BatchPlan(records, {}, starts, floor, session_count, tenant_sessions, now=now, limits=limits)
    plan.add_all(operations)
    return plan

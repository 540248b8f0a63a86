"""TodoBook: the service in domain terms — sessions, their lists, watches and the feed.

A write is validated here, then handed to the store as a ``Mutation`` it applies atomically
(one step, no read before it, no retries), so writes stay correct when several replicas share
one store; every committed change is published to the ``WatchHub``, which hands it to this
process's watchers of that session only and to the feeds whose filter it matches
(``streams.TodoStreams`` serves them).
"""

from __future__ import annotations

import base64
import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from sessiontodo_server.domain import claims, tenancy
from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.batch import (
    MAX_WRITES,
    Batch,
    BatchWritten,
    Create,
    Operation,
    Remove,
    Write,
    WriteContext,
)
from sessiontodo_server.domain.errors import (
    InvalidArgument,
    RequestIdReused,
    RevisionMismatch,
    SessionNotFound,
    TodoError,
    Unavailable,
)
from sessiontodo_server.domain.leases import LeaseIndex
from sessiontodo_server.domain.mutations import (
    AddTodo,
    ClaimTodo,
    LapseLease,
    ReleaseTodo,
    RemoveTodo,
    RenewClaim,
    ReplaceTodos,
    UpdateSession,
    UpdateTodo,
)
from sessiontodo_server.domain.observer import BookObserver, NoObserver
from sessiontodo_server.domain.periodic import repeat
from sessiontodo_server.domain.store import AddResult, SessionState, TodoStore, Written
from sessiontodo_server.domain.values import (
    NO_ENTRIES,
    NO_GRAPH_CHANGES,
    Change,
    ChangeKind,
    DraftFields,
    GraphChanges,
    Limits,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    TodoDraft,
    TodoPriority,
    TodoStatus,
    frozen,
    is_global_list,
)
from sessiontodo_server.domain.watch import WatchHub

log = logging.getLogger(__name__)

DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10_000
MAX_RESPONSE_BYTES = 3 << 20
"""Most bytes of sessions one ListSessions page or BatchGetTodos response carries, as the
transport encodes them: gRPC clients refuse messages over 4 MiB by default. One session always
fits (lists are at most 3 MiB of text), so each response carries at least one."""

Sizer = Callable[[SessionState], int]
"""How many bytes a session takes in a response (the transport's encoding)."""


class TodoBook:
    """The service's unary side in domain terms: validated writes, reads, expiry (streams: ``TodoStreams``)."""

    def __init__(
        self,
        store: TodoStore,
        hub: WatchHub,
        limits: Limits,
        *,
        default_idle_ttl: float = 0.0,
        clock: Callable[[], float] = time.time,
        observer: BookObserver | None = None,
    ) -> None:
        self._store = store
        self._observer = observer or NoObserver()
        self._hub = hub
        self._limits = limits
        self._default_idle_ttl = default_idle_ttl
        self._clock = clock
        self._leases = LeaseIndex()
        self._leases_known = False
        """Whether the lease index holds every lease of the store (read once, and after a lost feed)."""
        store.on_external_change(self._on_external_change)

    @property
    def watcher_count(self) -> int:
        return self._hub.watcher_count

    @property
    def feed_count(self) -> int:
        return self._hub.feed_count

    async def session_count(self) -> int:
        return await self._store.session_count()

    def memory_held(self) -> dict[str, int]:
        """Bytes held against each share of the memory budget in this process."""
        lists, history = self._store.held_bytes()
        return {"lists": lists, "history": history, "buffers": self._hub.held}

    # Sessions

    async def create_session(
        self,
        session_id: str,
        *,
        parent_id: str = "",
        labels: Mapping[str, str] = NO_ENTRIES,
        idle_ttl: float | None = None,
        origin: str = "",
    ) -> tuple[SessionState, bool]:
        ops.check_origin(origin)
        info = self.create_operation(session_id, parent_id=parent_id, labels=labels, idle_ttl=idle_ttl).info
        return await self._create(session_id, info, origin)

    def create_operation(
        self,
        session_id: str,
        *,
        parent_id: str = "",
        labels: Mapping[str, str] = NO_ENTRIES,
        idle_ttl: float | None = None,
    ) -> Create:
        """A CreateSession checked on its own."""
        violations = ops.session_id_violations(session_id, self._limits)
        if parent_id:
            violations += ops.session_id_violations(parent_id, self._limits, "parent_id")
        violations += ops.label_violations(labels, self._limits)
        violations += ops.idle_ttl_violations(idle_ttl, zero_allowed=False)
        if violations:
            raise InvalidArgument(violations)
        now = self._clock()
        ttl = self._default_idle_ttl if idle_ttl is None else idle_ttl
        return Create(session_id, SessionInfo(parent_id, frozen(labels), now, now, ttl))

    async def _create(self, session_id: str, info: SessionInfo, origin: str) -> tuple[SessionState, bool]:
        """The store checks both session limits as it creates: one step, whatever the replicas."""
        state, created = await self._store.create_session(
            session_id, info, self._limits.max_sessions, origin, max_per_tenant=self._limits.max_sessions_per_tenant
        )
        if created is not None:
            self._hub.publish(created)
            log.info("session %s created (parent %r)", session_id, info.parent_id)
        return state, created is not None

    async def update_session(
        self,
        session_id: str,
        *,
        set_labels: Mapping[str, str] = NO_ENTRIES,
        remove_label_keys: Sequence[str] = (),
        idle_ttl: float | None = None,
        expected_revision: int | None = None,
        origin: str = "",
    ) -> tuple[SessionState, bool]:
        operation = self.update_session_operation(
            session_id,
            set_labels=set_labels,
            remove_label_keys=remove_label_keys,
            idle_ttl=idle_ttl,
            expected_revision=expected_revision,
        )
        written = await self._write(operation, origin=origin)
        return written.state, written.change is not None

    def update_session_operation(
        self,
        session_id: str,
        *,
        set_labels: Mapping[str, str] = NO_ENTRIES,
        remove_label_keys: Sequence[str] = (),
        idle_ttl: float | None = None,
        expected_revision: int | None = None,
    ) -> Write:
        """An UpdateSession checked on its own."""
        violations = ops.label_violations(set_labels, self._limits)
        violations += ops.check_key_changes(set_labels, remove_label_keys, "remove_label_keys")
        violations += ops.idle_ttl_violations(idle_ttl, zero_allowed=True)
        if violations:
            raise InvalidArgument(violations)
        mutation = UpdateSession(frozen(set_labels), tuple(remove_label_keys), idle_ttl)
        return self._checked(Write(session_id, mutation, expected_revision))

    async def remove_session(self, session_id: str, origin: str = "") -> list[str]:
        self.remove_operation(session_id)
        ops.check_origin(origin)
        return self._end(await self._store.remove_session(session_id, RemovalReason.REMOVED, origin))

    def remove_operation(self, session_id: str) -> Remove:
        """A RemoveSession checked on its own."""
        ops.check_session_id(session_id, self._limits)
        if is_global_list(session_id):
            raise InvalidArgument([("session_id", "the global list cannot be removed")])
        return Remove(session_id)

    async def remove_all_sessions(self, origin: str = "", tenant: str | None = None) -> int:
        """Remove every session (of ``tenant`` only, when given) but the global lists."""
        ops.check_origin(origin)
        return len(self._end(await self._store.remove_all_sessions(origin, SessionFilter(tenant=tenant))))

    def _end(self, removals: list[Change]) -> list[str]:
        for removal in removals:
            self._hub.end_session(removal)
            log.info("session %s %s", removal.session_id, removal.reason or RemovalReason.REMOVED)
        return [removal.session_id for removal in removals]

    async def list_sessions(
        self,
        *,
        page_size: int = 0,
        page_token: str = "",
        parent_id: str = "",
        labels: Mapping[str, str] = NO_ENTRIES,
        tenant: str | None = None,
        size: Sizer | None = None,
    ) -> tuple[list[SessionState], str]:
        """A page of at most ``page_size`` sessions and ``MAX_RESPONSE_BYTES`` (by ``size``), and
        the token of the next page ("" on the last)."""
        only = SessionFilter(parent_id=parent_id, labels=frozen(labels), tenant=tenant)
        violations = [("page_size", "must not be negative")] if page_size < 0 else []
        if violations := violations + self.filter_violations(only, ""):
            raise InvalidArgument(violations)
        limit = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        sessions = await self._store.list_sessions(_page_start(page_token, only), limit, only)
        page = _within_bytes(sessions, size)
        more = len(page) < len(sessions) or len(sessions) == limit
        return page, (_page_token(page[-1].session_id, only) if more else "")

    async def get(self, session_id: str) -> SessionState:
        ops.check_session_id(session_id, self._limits)
        state = await self._load(session_id)
        if state is None:
            raise SessionNotFound(session_id)
        return state

    async def _load(self, session_id: str) -> SessionState | None:
        """The session, or None. A tenant's global list always exists, as the default one does:
        until its first write makes it, it reads as empty at revision 0 (a read never writes)."""
        state = await self._store.get(session_id)
        if state is None and _is_tenants_global_list(session_id):
            return SessionState(session_id, 0, (), SessionInfo())
        return state

    async def batch_get(
        self, session_ids: Sequence[str], size: Sizer | None = None
    ) -> tuple[list[SessionState], list[str], list[str]]:
        """The sessions that exist, in request order (each once), up to ``MAX_RESPONSE_BYTES`` (by
        ``size``); the ids that name none; the ids left unread for lack of room (ask again)."""
        if len(session_ids) > self._limits.max_batch_size:
            raise InvalidArgument([("session_ids", f"at most {self._limits.max_batch_size} ids")])
        unique = list(dict.fromkeys(session_ids))
        violations = self._ids_violations(unique, "session_ids")
        if violations:
            raise InvalidArgument(violations)
        found: list[SessionState] = []
        missing: list[str] = []
        held = 0
        for n, session_id in enumerate(unique):
            state = await self._load(session_id)
            if state is None:
                missing.append(session_id)
                continue
            held += size(state) if size is not None else 0
            if found and held > MAX_RESPONSE_BYTES:
                return found, missing, unique[n:]
            found.append(state)
        return found, missing, []

    def filter_violations(self, only: SessionFilter, prefix: str) -> list[tuple[str, str]]:
        """What is wrong with a listing's or a feed's filter (field names start with ``prefix``)."""
        if len(only.session_ids) > self._limits.max_filter_session_ids:
            return [(f"{prefix}session_ids", f"at most {self._limits.max_filter_session_ids} ids")]
        violations = self._ids_violations(sorted(only.session_ids), f"{prefix}session_ids")
        if only.parent_id:
            violations += ops.session_id_violations(only.parent_id, self._limits, f"{prefix}parent_id")
        return violations + ops.label_violations(only.labels, self._limits, f"{prefix}labels")

    def _ids_violations(self, session_ids: Sequence[str], field: str) -> list[tuple[str, str]]:
        return [
            violation
            for i, session_id in enumerate(session_ids)
            for violation in ops.session_id_violations(session_id, self._limits, f"{field}[{i}]")
        ]

    # Writes

    async def replace(
        self, session_id: str, drafts: Sequence[DraftFields], *, expected_revision: int | None = None, origin: str = ""
    ) -> SessionState:
        operation = self.replace_operation(session_id, drafts, expected_revision=expected_revision)
        return (await self._write(operation, origin=origin)).state

    def replace_operation(
        self, session_id: str, drafts: Sequence[DraftFields], *, expected_revision: int | None = None
    ) -> Write:
        """A ReplaceTodos checked on its own."""
        return self._checked(Write(session_id, ReplaceTodos(ops.replace_all(drafts, self._limits)), expected_revision))

    async def add(
        self,
        session_id: str,
        draft: TodoDraft,
        *,
        index: int | None = None,
        expected_revision: int | None = None,
        request_id: str = "",
        origin: str = "",
    ) -> AddResult:
        self._check_request_id(request_id)
        fingerprint = _fingerprint(draft, index, expected_revision, origin) if request_id else ""
        operation = self.add_operation(
            session_id, draft, index=index, expected_revision=expected_revision, fingerprint=fingerprint
        )
        written = await self._write(operation, request_id=request_id, origin=origin)
        assert written.result is not None
        if written.change is None and written.result.fingerprint and written.result.fingerprint != fingerprint:
            raise RequestIdReused(session_id, request_id)
        return written.result

    def add_operation(
        self,
        session_id: str,
        draft: TodoDraft,
        *,
        index: int | None = None,
        expected_revision: int | None = None,
        fingerprint: str = "",
    ) -> Write:
        """An AddTodo checked on its own."""
        mutation = AddTodo(ops.materialize(draft, self._limits), index, bool(draft.id), fingerprint)
        return self._checked(Write(session_id, mutation, expected_revision))

    async def update(
        self,
        session_id: str,
        todo_id: str,
        *,
        content: str | None = None,
        status: str | None = None,
        priority: str | None = None,
        expected_revision: int | None = None,
        set_metadata: Mapping[str, str] = NO_ENTRIES,
        remove_metadata_keys: Sequence[str] = (),
        graph: GraphChanges | None = None,
        origin: str = "",
    ) -> tuple[Todo, SessionState, bool]:
        """The todo as stored, the session after the update, and whether it changed."""
        operation = self.update_operation(
            session_id,
            todo_id,
            content=content,
            status=status,
            priority=priority,
            expected_revision=expected_revision,
            set_metadata=set_metadata,
            remove_metadata_keys=remove_metadata_keys,
            graph=graph,
        )
        written = await self._write(operation, origin=origin)
        todo, state = _todo_in(written, todo_id)
        return todo, state, written.change is not None

    def update_operation(
        self,
        session_id: str,
        todo_id: str,
        *,
        content: str | None = None,
        status: str | None = None,
        priority: str | None = None,
        expected_revision: int | None = None,
        set_metadata: Mapping[str, str] = NO_ENTRIES,
        remove_metadata_keys: Sequence[str] = (),
        graph: GraphChanges | None = None,
    ) -> Write:
        """An UpdateTodo checked on its own."""
        ops.check_update(content, status, priority, set_metadata, remove_metadata_keys, self._limits, graph)
        mutation = UpdateTodo(
            todo_id,
            content,
            TodoStatus(status) if status else None,
            TodoPriority(priority) if priority else None,
            frozen(set_metadata),
            tuple(remove_metadata_keys),
            graph or NO_GRAPH_CHANGES,
            self._clock(),
        )
        return self._checked(Write(session_id, mutation, expected_revision))

    async def remove_todo(
        self, session_id: str, todo_id: str, *, expected_revision: int | None = None, origin: str = ""
    ) -> int:
        operation = self.remove_todo_operation(session_id, todo_id, expected_revision=expected_revision)
        return (await self._write(operation, origin=origin)).state.revision

    def remove_todo_operation(self, session_id: str, todo_id: str, *, expected_revision: int | None = None) -> Write:
        """A RemoveTodo checked on its own."""
        return self._checked(Write(session_id, RemoveTodo(todo_id), expected_revision))

    # Claims

    async def claim(
        self,
        session_id: str,
        owner: str,
        *,
        todo_id: str = "",
        lease_seconds: float | None = None,
        expected_revision: int | None = None,
        request_id: str = "",
        origin: str = "",
    ) -> tuple[Todo | None, SessionState, bool]:
        """``todo_id`` (or the first ready todo) claimed for ``owner``: the todo (None: nothing was
        ready), the session after the claim, and whether the list changed. A retried
        ``request_id`` returns the first claim's todo (and the session as it is now)."""
        self._check_request_id(request_id)
        asked = (todo_id, owner, lease_seconds, expected_revision, origin)
        fingerprint = _digest(repr(("claim", *asked))) if request_id else ""
        operation = self.claim_operation(
            session_id,
            owner,
            todo_id=todo_id,
            lease_seconds=lease_seconds,
            expected_revision=expected_revision,
            fingerprint=fingerprint,
        )
        written = await self._write(operation, request_id=request_id, origin=origin)
        if written.result is not None:  # claimed now, or by the first call with this request id
            if written.change is None and written.result.fingerprint != fingerprint:
                raise RequestIdReused(session_id, request_id)
            return written.result.todo, written.state, written.change is not None
        state = written.state
        mine = next((todo for todo in state.todos if todo.id == todo_id), None) if todo_id else None
        return mine, state, False

    def claim_operation(
        self,
        session_id: str,
        owner: str,
        *,
        todo_id: str = "",
        lease_seconds: float | None = None,
        expected_revision: int | None = None,
        fingerprint: str = "",
    ) -> Write:
        """A ClaimTodo checked on its own."""
        claims.check_claim(owner, lease_seconds, self._limits.max_owner_length)
        mutation = ClaimTodo(todo_id, owner, lease_seconds, self._clock(), fingerprint)
        return self._checked(Write(session_id, mutation, expected_revision))

    async def renew(
        self,
        session_id: str,
        todo_id: str,
        owner: str,
        *,
        lease_seconds: float | None = None,
        expected_revision: int | None = None,
        origin: str = "",
    ) -> tuple[Todo, SessionState]:
        operation = self.renew_operation(
            session_id, todo_id, owner, lease_seconds=lease_seconds, expected_revision=expected_revision
        )
        return _todo_in(await self._write(operation, origin=origin), todo_id)

    def renew_operation(
        self,
        session_id: str,
        todo_id: str,
        owner: str,
        *,
        lease_seconds: float | None = None,
        expected_revision: int | None = None,
    ) -> Write:
        """A RenewClaim checked on its own."""
        claims.check_claim(owner, lease_seconds, self._limits.max_owner_length)
        mutation = RenewClaim(todo_id, owner, lease_seconds, self._clock())
        return self._checked(Write(session_id, mutation, expected_revision))

    async def release(
        self, session_id: str, todo_id: str, owner: str, *, expected_revision: int | None = None, origin: str = ""
    ) -> tuple[Todo, SessionState]:
        operation = self.release_operation(session_id, todo_id, owner, expected_revision=expected_revision)
        return _todo_in(await self._write(operation, origin=origin), todo_id)

    def release_operation(
        self, session_id: str, todo_id: str, owner: str, *, expected_revision: int | None = None
    ) -> Write:
        """A ReleaseTodo checked on its own."""
        claims.check_claim(owner, None, self._limits.max_owner_length)
        return self._checked(Write(session_id, ReleaseTodo(todo_id, owner), expected_revision))

    def _check_request_id(self, request_id: str) -> None:
        if len(request_id) > self._limits.max_todo_id_length:
            raise InvalidArgument([("request_id", f"must be at most {self._limits.max_todo_id_length} characters")])

    def _checked(self, operation: Write) -> Write:
        ops.check_session_id(operation.session_id, self._limits)
        return operation

    async def _write(self, operation: Write, *, request_id: str = "", origin: str = "") -> Written:
        """One atomic write in the store; its change goes to this process's watchers."""
        ops.check_origin(origin)
        session_id = operation.session_id
        if _is_tenants_global_list(session_id):
            await self._make_global_list(session_id)
        try:
            written = await self._store.write(operation, WriteContext(request_id, origin, self._clock(), self._limits))
        except RevisionMismatch:
            self._observer.write_conflict("expected_revision")
            raise
        if written.change is not None:
            self._leases.note(written.change)
            self._hub.publish(written.change)
        return written

    async def write_batch(
        self,
        operations: Sequence[Operation],
        *,
        request_id: str = "",
        fingerprint: str = "",
        origin: str = "",
        tenant: str = tenancy.DEFAULT_TENANT,
    ) -> BatchWritten:
        """Apply operations (each checked on its own by its ``*_operation``) atomically, in order;
        a failing one is named by ``write_index``. A ``request_id`` is ``tenant``'s: another
        tenant's same id is another batch; ``fingerprint`` tells a retry from a reuse.
        Returns the outcomes, and the changes made (none for a retried request id)."""
        if not operations:
            raise InvalidArgument([("writes", "at least one write")])
        if len(operations) > MAX_WRITES:
            raise InvalidArgument([("writes", f"at most {MAX_WRITES} writes")])
        ops.check_origin(origin)
        self._check_request_id(request_id)
        for session_id in {op.session_id for op in operations if isinstance(op, Write)}:
            if _is_tenants_global_list(session_id):
                await self._make_global_list(session_id)
        try:
            tenants_request_id = f"{tenant}\n{request_id}" if request_id else ""
            written = await self._store.write_batch(
                Batch(operations, fingerprint), WriteContext(tenants_request_id, origin, self._clock(), self._limits)
            )
        except RevisionMismatch:
            self._observer.write_conflict("expected_revision")
            raise
        for change in written.changes:
            if change.kind is ChangeKind.SESSION_REMOVED:
                self._end([change])
            else:
                self._leases.note(change)
                self._hub.publish(change)
        return written

    async def _make_global_list(self, session_id: str) -> None:
        """A tenant's global list is made by its first write (callers check ``_is_tenants_global_list``
        first, so other writes create and await no coroutine for this)."""
        if await self._store.get(session_id) is None:
            now = self._clock()
            await self._create(session_id, SessionInfo(created_at=now, updated_at=now), "")

    def _on_external_change(self, change: Change) -> None:
        if change.kind is ChangeKind.RESET and not change.session_id:
            self._leases_known = False  # which leases another replica set is unknown: read them again
            self._hub.lag_all(change.cursor)
        elif change.kind is ChangeKind.SESSION_REMOVED:
            self._hub.end_session(change)
        else:
            self._leases.note(change)
            self._hub.publish(change)

    # Expiry

    async def expire_due(self) -> list[str]:
        """Remove every session whose idle TTL has run out; their ids."""
        expired: list[str] = []
        for session_id in await self._store.expired(self._clock()):
            expired += self._end(await self._store.remove_session(session_id, RemovalReason.EXPIRED))
        return expired

    async def run_expiry(self, interval: float) -> None:
        """Expire idle sessions and lapse run-out leases every ``interval`` seconds, for as long as
        the task runs."""
        await repeat(self._expire_and_lapse, every=interval, on_error=_expiry_failed)

    async def _expire_and_lapse(self) -> None:
        await self.expire_due()
        await self.lapse_due()

    async def lapse_due(self) -> list[tuple[str, str]]:
        """Lapse every claim whose lease has run out: one change each, with origin
        ``claims.LEASE_ORIGIN``. The store re-checks the lease as it applies the lapse, so a lease
        renewed in the meantime (by any replica) stays. The (session, todo) pairs that lapsed."""
        if not self._leases_known:
            _, states = await self._store.snapshot()
            for state in states:
                self._leases.note_list(state.session_id, state.todos)
            self._leases_known = True
        now = self._clock()
        lapsed = []
        due = self._leases.due(now)
        for index, (session_id, todo_id) in enumerate(due):
            try:
                written = await self._write(Write(session_id, LapseLease(todo_id, now)), origin=claims.LEASE_ORIGIN)
            except SessionNotFound:
                continue
            except Unavailable:  # this lease and every one not tried yet are handed out again next round
                for later_session_id, later_todo_id in due[index:]:
                    self._leases.again(later_session_id, later_todo_id, now)
                raise
            if written.change is not None:
                lapsed.append((session_id, todo_id))
                log.info("lease of %s in session %s lapsed", todo_id, session_id)
        return lapsed

    def shut_down(self) -> None:
        self._hub.shut_down()


def _expiry_failed(error: Exception) -> None:
    """One bad round never ends expiry for good: the next round tries again."""
    if isinstance(error, TodoError):  # e.g. the store is unreachable
        log.warning("expiring idle sessions failed: %s", error)
    else:
        log.error("expiring idle sessions failed", exc_info=error)


def _within_bytes(sessions: list[SessionState], size: Sizer | None) -> list[SessionState]:
    """The first of ``sessions`` that fit in ``MAX_RESPONSE_BYTES`` together (at least one)."""
    if size is None:
        return sessions
    held = 0
    for n, state in enumerate(sessions):
        held += size(state)
        if n and held > MAX_RESPONSE_BYTES:
            return sessions[:n]
    return sessions


def _is_tenants_global_list(session_id: str) -> bool:
    return bool(tenancy.tenant_of(session_id)) and is_global_list(session_id)


def _filter_digest(only: SessionFilter) -> str:
    text = repr((only.parent_id, sorted(only.labels.items()), only.tenant))
    return hashlib.blake2b(text.encode(), digest_size=4).hexdigest()


def _page_token(last_id: str, only: SessionFilter) -> str:
    return base64.urlsafe_b64encode(f"{_filter_digest(only)}:{last_id}".encode()).decode().rstrip("=")


def _page_start(token: str, only: SessionFilter) -> str:
    """The id a page token continues after; INVALID_ARGUMENT for a token not issued for this filter."""
    if not token:
        return ""
    try:
        digest, _, last_id = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        digest, last_id = "", ""
    if digest != _filter_digest(only) or not last_id:
        raise InvalidArgument([("page_token", "is not a token this service issued for these filters")])
    return last_id


def _fingerprint(draft: TodoDraft, index: int | None, expected_revision: int | None, origin: str) -> str:
    """What an AddTodo asks for, so a reused request_id asking for something else is told apart
    from a retry (which asks for exactly the same)."""
    asked: tuple[object, ...] = (
        draft.id,
        draft.content,
        draft.status,
        draft.priority,
        sorted(draft.metadata.items()),
        index,
    )
    if draft.description or draft.active_form or draft.owner or draft.blocked_by:  # older fingerprints stay valid
        asked += (draft.description, draft.active_form, draft.owner, draft.blocked_by)
    return _digest(repr((*asked, expected_revision, origin)))


def _digest(text: str) -> str:
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def _todo_in(written: Written, todo_id: str) -> tuple[Todo, SessionState]:
    """The written todo as stored, and the session as the write left it."""
    state = written.state
    return next(todo for todo in state.todos if todo.id == todo_id), state

"""The in-process store: every session in a dict, optionally written through to a journal.

A write applies its mutation without awaiting, so within one event loop it is atomic, and a
snapshot is one consistent cut of the feed. With a ``Journal`` (the sqlite one) a change is
accepted at once (the next write to its session builds on it and joins the same group commit)
but applied where readers and watchers see it (``get``, ``snapshot``, the feed, the history)
only once the journal has made it durable, in order; its caller is answered then too, and so
is a write that changed nothing or was refused on the accepted state. A session being created
or removed is invisible to writes until that is durable.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Iterator

from sessiontodo_server.domain import mutations
from sessiontodo_server.domain.batch import Batch, BatchWritten, Write, WriteContext
from sessiontodo_server.domain.budget import (
    DEFAULT_MEMORY_BUDGET,
    MemoryBudget,
    give_back,
    info_bytes,
    state_bytes,
)
from sessiontodo_server.domain.errors import (
    BatchRequestIdReused,
    LimitExceeded,
    ParentMismatch,
    RevisionMismatch,
    SessionNotFound,
)
from sessiontodo_server.domain.mutations import RemembersResult
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, AddResult, SessionState, Written
from sessiontodo_server.domain.tenancy import tenant_of
from sessiontodo_server.domain.values import (
    EVERY_SESSION,
    Change,
    ChangeKind,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    is_global_list,
    touched,
)
from sessiontodo_server.stores.batch_plan import BatchPlan, CreateStep, RemoveStep, Step, WriteStep
from sessiontodo_server.stores.memory.accounting import ListsAccount, RequestMemory
from sessiontodo_server.stores.memory.batches import RememberedBatches, batch_bytes
from sessiontodo_server.stores.memory.expiry import ExpiryQueue
from sessiontodo_server.stores.memory.journal import Journal
from sessiontodo_server.stores.memory.retention import RetainedChanges
from sessiontodo_server.stores.session_record import SessionRecord, accepted, durable_state

REMOVED_MARKS = 100_000
"""Removed ids whose last revision is remembered, so that re-creating one resumes above it.
Older marks are folded into one floor that every new session then starts from."""


class MemoryStore:
    def __init__(
        self,
        history_limit: int = 64,
        journal: Journal | None = None,
        feed_history: int = 4096,
        budget: MemoryBudget = DEFAULT_MEMORY_BUDGET,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._clock = clock
        self._journal = journal
        self._sessions: dict[str, SessionRecord] = {}
        self._lists = ListsAccount(budget)
        self._requests = RequestMemory(self._lists)
        self._batches = RememberedBatches(self._lists)
        self._retained = RetainedChanges(
            self._sessions, history_limit=history_limit, feed_limit=feed_history, budget_bytes=budget.history
        )
        self._expiries = ExpiryQueue()
        self._sorted_ids: list[str] = []
        self._removed_marks: OrderedDict[str, int] = OrderedDict()
        self._removed_floor = 0
        self._cursor = 0
        """The feed position of the newest accepted change."""
        self._durable_cursor = 0
        """The feed position of the newest durable change: what snapshots and the feed show."""
        self._being_created: dict[str, asyncio.Future[None]] = {}
        self._being_removed: dict[str, asyncio.Future[None]] = {}
        self._tenant_sessions: Counter[str] = Counter()
        """Sessions per tenant, global lists left out, creations under way counted (the tenant quota)."""
        self.feed_epoch = f"{int.from_bytes(os.urandom(6)):x}"

    async def open(self) -> None:
        if self._journal is not None:
            loaded = self._journal.load()
            self.feed_epoch = f"{loaded.feed_epoch:x}"
            self._cursor = self._durable_cursor = loaded.cursor
            self._removed_floor = loaded.removed_floor
            self._removed_marks.update(loaded.removed_marks)
            for session_id, revision, todos, info in loaded.sessions:
                session = self._sessions[session_id] = SessionRecord(
                    revision, info, todos, tenant=tenant_of(session_id)
                )
                self._lists.resize_list(session, state_bytes(todos, info))
                self._expiries.schedule(session_id, self._sessions[session_id])
            for session_id, session in self._sessions.items():
                if session.info.parent_id in self._sessions:
                    self._adopt(session.info.parent_id, session_id)
            now = self._clock()  # when they were first remembered is not kept: count from now
            for session_id, request_id, result in loaded.requests:
                self._requests.remember(self._sessions[session_id], request_id, result, now)
            for key, fingerprint, outcomes, at in loaded.batches:
                self._batches.remember(key, fingerprint, outcomes, at, batch_bytes(outcomes))
            self._sorted_ids = sorted(self._sessions)
            self._tenant_sessions.update(s.tenant for sid, s in self._sessions.items() if not is_global_list(sid))
        if GLOBAL_SESSION_ID not in self._sessions:
            await self._insert(GLOBAL_SESSION_ID, SessionInfo(), None)

    async def close(self) -> None:
        if self._journal is not None:
            await self._journal.close()

    async def _insert(
        self, session_id: str, info: SessionInfo, origin: str | None
    ) -> tuple[SessionRecord, Change | None]:
        """Create a session (and its SESSION_CREATED change, unless ``origin`` is None); returns once durable."""
        session = SessionRecord(self._removed_floor, info, tenant=tenant_of(session_id))
        self._lists.check_growth(session, info_bytes(info))
        revision = self._removed_marks.pop(session_id, self._removed_floor)
        created, written = self._accept_insert(session_id, session, info, revision, origin)
        if written is not None:
            await asyncio.shield(written)
        return session, created

    def _accept_insert(
        self, session_id: str, session: SessionRecord, info: SessionInfo, revision: int, origin: str | None
    ) -> tuple[Change | None, asyncio.Future[None] | None]:
        """Accept a new session at ``revision`` (its size already within the budget, and the
        session limits checked): added at once without a journal, else once durable (the future)."""
        self._lists.resize_list(session, info_bytes(info))  # counted once accepted: creations under way count too
        counted = not is_global_list(session_id)
        self._tenant_sessions[session.tenant] += counted
        session.revision = revision
        self._cursor += 1
        created = None
        if origin is not None:
            created = Change(
                session_id, ChangeKind.SESSION_CREATED, revision, info=info, origin=origin, cursor=self._cursor
            )
        if self._journal is None:
            self._add(session_id, session, self._cursor, created)
            return created, None
        cursor = self._cursor

        def done(error: BaseException | None) -> None:
            del self._being_created[session_id]
            if error is None:
                self._add(session_id, session, cursor, created)
            else:
                self._cursor = self._durable_cursor  # every later write failed too: nothing holds a cursor
                self._lists.release(session)
                self._tenant_sessions[session.tenant] -= counted
                if revision != self._removed_floor:
                    self._removed_marks[session_id] = revision

        written = self._journal.create_session(session_id, revision, info, cursor, done)
        self._being_created[session_id] = written
        return created, written

    def _add(self, session_id: str, session: SessionRecord, cursor: int, created: Change | None) -> None:
        self._sessions[session_id] = session
        bisect.insort(self._sorted_ids, session_id)
        if session.info.parent_id in self._sessions:
            self._adopt(session.info.parent_id, session_id)
        self._expiries.schedule(session_id, session)
        self._durable_cursor = cursor
        if created is not None:
            self._retained.append_to_feed(created)

    async def _settled(self, session_id: str | None = None) -> None:
        """Wait out creations and removals under way (of ``session_id``, or of any session)."""
        while True:
            if session_id is None:
                pending = [*self._being_created.values(), *self._being_removed.values()]
            else:
                found = (self._being_created.get(session_id), self._being_removed.get(session_id))
                pending = [future for future in found if future is not None]
            if not pending:
                return
            await asyncio.wait(pending)  # failed or not: the state is settled either way

    def _adopt(self, parent_id: str, child_id: str) -> None:
        parent = self._sessions[parent_id]
        if parent.children is None:
            parent.children = set()
        parent.children.add(child_id)

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str, *, max_per_tenant: int = 0
    ) -> tuple[SessionState, Change | None]:
        await self._settled(session_id)
        if (existing := self._sessions.get(session_id)) is not None:
            if existing.info.parent_id != info.parent_id:
                raise ParentMismatch(session_id, existing.info.parent_id)
            return durable_state(session_id, existing), None
        if info.parent_id and (info.parent_id not in self._sessions or info.parent_id in self._being_removed):
            raise SessionNotFound(info.parent_id)
        if len(self._sessions) + len(self._being_created) - 1 >= max_sessions:
            raise LimitExceeded("sessions", max_sessions)
        if max_per_tenant and not is_global_list(session_id):
            if self._tenant_sessions[tenant_of(session_id)] >= max_per_tenant:
                raise LimitExceeded("sessions per tenant", max_per_tenant)
        session, created = await self._insert(session_id, info, origin)
        return durable_state(session_id, session), created

    async def remove_session(self, session_id: str, reason: RemovalReason, origin: str = "") -> list[Change]:
        await self._settled()  # children being created are then children
        session = self._sessions.get(session_id)
        renewed = reason is RemovalReason.EXPIRED and self._expiries.renewed(session_id, session)
        if session is None or renewed:
            return []
        doomed = [session_id]
        for doomed_id in doomed:  # grows while iterating: a breadth-first walk of descendants
            doomed.extend(sorted(self._sessions[doomed_id].children or ()))
        return await self._removing(doomed, reason, origin)

    async def remove_all_sessions(self, origin: str = "", only: SessionFilter = EVERY_SESSION) -> list[Change]:
        await self._settled()
        doomed = [sid for sid, s in self._sessions.items() if not is_global_list(sid) and only.matches(sid, s.info)]
        removals = await self._removing(doomed, RemovalReason.REMOVED, origin)
        self._sessions = dict(self._sessions)  # a dict never shrinks by deletion: give its table back
        return removals

    async def _removing(self, session_ids: list[str], reason: RemovalReason, origin: str) -> list[Change]:
        """``_remove``, then the memory it let go of goes back to the system (once ``_remove``'s
        frame, which still holds the last session, is gone)."""
        held = self._lists.bytes + self._retained.bytes
        removals = await self._remove(session_ids, reason, origin)
        give_back(held - self._lists.bytes - self._retained.bytes)
        return removals

    async def _remove(self, session_ids: list[str], reason: RemovalReason, origin: str) -> list[Change]:
        """Writes to the sessions fail at once; readers see them until the removal is durable."""
        if not session_ids:
            return []
        removals, written = self._accept_removal([(sid, self._sessions[sid]) for sid in session_ids], reason, origin)
        if written is not None:
            await asyncio.shield(written)
        return removals

    def _accept_removal(
        self, doomed: list[tuple[str, SessionRecord]], reason: RemovalReason, origin: str
    ) -> tuple[list[Change], asyncio.Future[None] | None]:
        """Accept the removal of ``doomed``: applied at once without a journal, else once durable (the future)."""
        removals = []
        for sid, session in doomed:
            latest = session.pending
            self._cursor += 1
            removals.append(
                Change(
                    sid,
                    ChangeKind.SESSION_REMOVED,
                    session.latest_revision + 1,
                    info=session.info if latest is None or latest.info is None else latest.info,
                    origin=origin,
                    reason=reason,
                    cursor=self._cursor,
                )
            )
        marks = [(change.session_id, change.revision + 1) for change in removals]
        # Marks folded into the floor stay folded even if the removal fails: the floor only rises.
        forgotten = self._forget_marks(len(marks))
        if self._journal is None:
            self._apply_removal(removals, marks)
            return removals, None
        session_ids = [sid for sid, _ in doomed]

        def done(error: BaseException | None) -> None:
            for sid in session_ids:
                del self._being_removed[sid]
            if error is None:
                self._apply_removal(removals, marks)
            else:
                self._cursor = self._durable_cursor  # every later write failed too: nothing holds a cursor

        written = self._journal.remove_sessions(session_ids, marks, forgotten, self._removed_floor, self._cursor, done)
        for sid in session_ids:
            self._being_removed[sid] = written
        return removals, written

    def _apply_removal(self, removals: list[Change], marks: list[tuple[str, int]]) -> None:
        gone = {removal.session_id for removal in removals}
        self._removed_marks.update(marks)
        removed = {sid: self._sessions.pop(sid) for sid in gone}
        for sid, session in removed.items():
            self._lists.release(session)
            self._tenant_sessions[session.tenant] -= 1  # global lists are never removed
            if (parent := self._sessions.get(session.info.parent_id)) and parent.children:
                parent.children.discard(sid)
        if len(gone) > 16:  # one pass, rather than a shift of the whole index per removed id
            self._sorted_ids = [sid for sid in self._sorted_ids if sid not in gone]
        else:
            for sid in gone:
                del self._sorted_ids[bisect.bisect_left(self._sorted_ids, sid)]
        self._retained.forget_histories(removed)
        for removal in removals:
            self._retained.append_to_feed(removal)
        self._durable_cursor = removals[-1].cursor

    def _forget_marks(self, incoming: int) -> list[str]:
        """Make room for ``incoming`` marks: the oldest are folded into the floor."""
        forgotten = []
        while self._removed_marks and len(self._removed_marks) + incoming > REMOVED_MARKS:
            session_id, revision = self._removed_marks.popitem(last=False)
            self._removed_floor = max(self._removed_floor, revision)
            forgotten.append(session_id)
        return forgotten

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        found = []
        for session_id in self._ids_after(after_id, only):
            session = self._sessions[session_id]
            if not is_global_list(session_id) and only.matches(session_id, session.info):
                found.append(durable_state(session_id, session))
                if len(found) == limit:
                    break
        return found

    def _ids_after(self, after_id: str, only: SessionFilter) -> Iterator[str]:
        """Candidate ids in order from the narrowest index the filter allows."""
        if only.session_ids:
            yield from (sid for sid in sorted(only.session_ids) if sid > after_id and sid in self._sessions)
        elif only.parent_id:
            parent = self._sessions.get(only.parent_id)
            yield from sorted(sid for sid in (parent.children or ()) if sid > after_id) if parent else ()
        else:
            ids = self._sorted_ids
            prefix = only.id_prefix  # a tenant's ids sort together: read only their range
            start = bisect.bisect_right(ids, max(after_id, prefix))
            for i in range(start, len(ids)):  # stable while a page is read: nothing awaits
                if not ids[i].startswith(prefix):
                    return
                yield ids[i]

    async def session_count(self) -> int:
        return len(self._sessions) - 1  # the global list

    def feed_position(self) -> int:
        return self._durable_cursor

    def held_bytes(self) -> tuple[int, int]:
        return self._lists.bytes, self._retained.bytes

    async def get(self, session_id: str) -> SessionState | None:
        session = self._sessions.get(session_id)
        return None if session is None else durable_state(session_id, session)

    async def write(self, operation: Write, context: WriteContext) -> Written:
        session = self._sessions.get(operation.session_id)
        if session is None or operation.session_id in self._being_removed:
            raise SessionNotFound(operation.session_id)
        try:
            return self._accept(session, operation, context)
        finally:
            # Every answer, refusals included, rests on the session's accepted state: given once that is durable.
            if session.pending is not None and session.written is not None:
                await asyncio.shield(session.written)

    def _accept(self, session: SessionRecord, operation: Write, context: WriteContext) -> Written:
        """``write`` against the latest accepted state (never awaits, so it is atomic in the loop)."""
        session_id, mutation, expected_revision = operation.session_id, operation.mutation, operation.expected_revision
        request_id = context.request_id
        revision, todos, info = accepted(session)
        if request_id and (previous := self._requests.find(session, request_id)) is not None:
            return Written(SessionState(session_id, revision, todos, info), result=previous)
        if expected_revision is not None and expected_revision != revision:
            raise RevisionMismatch(session_id, expected_revision, revision)
        applied = mutations.apply(session_id, todos, info, mutation, context.limits)
        if applied is None:
            return Written(SessionState(session_id, revision, todos, info))
        revision += 1
        info = touched(applied.info, context.now)
        size = state_bytes(applied.todos, info)
        self._lists.check_growth(session, size)
        self._cursor += 1
        change = Change(
            session_id,
            applied.kind,
            revision,
            applied.todos,
            applied.todo_id,
            info,
            context.origin,
            cursor=self._cursor,
            state_size=size,
        )
        result = None
        if isinstance(mutation, RemembersResult):
            result = AddResult(applied.todos[applied.position], applied.position, revision, mutation.fingerprint)
        self._commit(session, change, size, todos, (request_id, result) if request_id and result else None)
        return Written(SessionState(session_id, revision, change.todos, info), change, result)

    def _commit(
        self,
        session: SessionRecord,
        change: Change,
        size: int,
        todos_before: tuple[Todo, ...],
        request: tuple[str, AddResult] | None,
    ) -> None:
        """Accept ``change`` (its list and labels ``size`` bytes, already within the budget):
        applied at once without a journal, else once the journal has made it durable."""
        now = self._clock()
        if self._journal is None:
            self._apply(session, change, size, request, now)
            return
        before = session.pending
        if request is not None:
            self._requests.remember(session, *request, now)  # a retry of this AddTodo is answered once it is durable

        def done(error: BaseException | None) -> None:
            if error is None:
                self._apply(session, change, size, None, now)
            else:
                self._cursor = self._durable_cursor  # every later write failed too: nothing holds a cursor
                if request is not None:
                    self._requests.forget(session, request[0])
            if session.pending is change:  # else a later write is pending
                undone = error is not None and before is not None and before.revision > session.revision
                session.pending = before if undone else None

        session.pending = change
        floor = self._requests.floor(session, change.revision, now)
        session.written = self._journal.commit(change, todos_before, request, floor, done)

    def _apply(
        self, session: SessionRecord, change: Change, size: int, request: tuple[str, AddResult] | None, now: float
    ) -> None:
        """Make a change visible (once durable): the session, its history, the feed."""
        self._durable_cursor = change.cursor
        session.revision = change.revision
        session.todos = change.todos
        self._lists.resize_list(session, size - session.size)
        if change.info is not None:
            session.info = change.info
        self._retained.keep_in_history(session, change)
        self._retained.append_to_feed(change)
        if request is not None:
            self._requests.remember(session, *request, now)
        if session.requests:
            self._requests.forget_expired(session, now)
        self._expiries.schedule(change.session_id, session)

    async def write_batch(self, batch: Batch, context: WriteContext) -> BatchWritten:
        await self._settled()  # creations and removals under way are part of the state it builds on
        request_id, fingerprint, now = context.request_id, batch.fingerprint, context.now
        if request_id and (remembered := self._batches.find(request_id)) is not None:
            if remembered.fingerprint != fingerprint:
                raise BatchRequestIdReused(request_id.partition("\n")[2])
            return BatchWritten(remembered.outcomes)
        plan = BatchPlan(
            self._sessions,
            self._being_removed,
            self._removed_marks,
            self._removed_floor,
            len(self._sessions) + len(self._being_created) - 1,
            self._tenant_sessions,
            now=now,
            limits=context.limits,
            lists=self._lists,
        )
        plan.add_all(batch.operations)
        outcomes = tuple(plan.outcomes)
        remembered_size = self._batches.check_room(outcomes) if request_id else 0
        # Nothing from here on awaits or fails: the batch is accepted whole, in one group commit.
        changes, written = self._accept_batch(plan.steps, context.origin)
        if request_id:
            forgotten = self._batches.expired(now)
            self._batches.forget(forgotten)
            self._batches.remember(request_id, fingerprint, outcomes, now, remembered_size)
            if self._journal is not None:
                written.append(
                    self._journal.remember_batch(request_id, fingerprint, outcomes, now, forgotten, _undone_on_error)
                )
        if written:
            try:
                await asyncio.shield(asyncio.gather(*written))
            except Exception:
                if request_id:
                    self._batches.forget([request_id])  # not written: a retry must write it
                raise
        return BatchWritten(outcomes, tuple(changes))

    def _accept_batch(self, steps: list[Step], origin: str) -> tuple[list[Change], list[asyncio.Future[None]]]:
        """Accept a planned batch's steps in order, each as its single call would."""
        changes: list[Change] = []
        written: list[asyncio.Future[None]] = []
        for step in steps:
            future: asyncio.Future[None] | None
            match step:
                case WriteStep():
                    self._cursor += 1
                    change = Change(
                        step.session_id,
                        step.kind,
                        step.revision,
                        step.todos,
                        step.todo_id,
                        step.info,
                        origin,
                        cursor=self._cursor,
                        state_size=step.size,
                    )
                    self._commit(step.record, change, step.size, step.todos_before, None)
                    changes.append(change)
                    future = step.record.written if self._journal is not None else None
                case CreateStep():
                    created, future = self._accept_insert(
                        step.session_id, step.record, step.info, step.revision, origin
                    )
                    assert created is not None
                    changes.append(created)
                case RemoveStep():
                    removals, future = self._accept_removal(list(step.removed), RemovalReason.REMOVED, origin)
                    changes += removals
            if future is not None:
                written.append(future)
        return changes, written

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        session = self._sessions.get(session_id)
        return None if session is None else self._retained.history_after(session, revision)

    async def feed_after(self, cursor: int) -> list[Change] | None:
        return self._retained.feed_after(cursor, self._durable_cursor)

    async def snapshot(self, tenant: str | None = None) -> tuple[int, list[SessionState]]:
        only = EVERY_SESSION if tenant is None else SessionFilter(tenant=tenant)
        ids = [sid for sid in self._ids_after("", only) if only.matches(sid, None)]
        return self._durable_cursor, [durable_state(sid, self._sessions[sid]) for sid in ids]

    async def expired(self, now: float) -> list[str]:
        return self._expiries.due(now, self._sessions)

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Nothing else writes to this store, so there is nothing to listen for."""

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Without a journal always available; with one, as available as its file is for writes."""
        if self._journal is not None:
            self._journal.on_availability_change(listener)


def _undone_on_error(error: BaseException | None) -> None:
    """A remembered batch needs no undo of its own: the store forgets it when its batch fails."""

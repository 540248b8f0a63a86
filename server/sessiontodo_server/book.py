"""TodoBook: the service in domain terms — sessions, their lists, and watches.

Writes are read-modify-compare-and-set against the store, so they stay correct when
several replicas share one store; every committed change is published to this process's
watchers of that session only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

from sessiontodo_server import todos as ops
from sessiontodo_server.errors import InvalidArgument, RevisionMismatch, SessionNotFound, Unavailable
from sessiontodo_server.stores.base import GLOBAL_SESSION_ID, AddResult, SessionState, TodoStore
from sessiontodo_server.todos import Change, ChangeKind, Limits, Todo, TodoDraft
from sessiontodo_server.watch import WatchHub

log = logging.getLogger(__name__)

_COMMIT_ATTEMPTS = 32
"""Compare-and-set retries before a write gives up as UNAVAILABLE (only under heavy contention)."""

DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10_000


@dataclass(frozen=True, slots=True)
class _Mutation:
    kind: ChangeKind
    todos: tuple[Todo, ...]
    todo_id: str = ""
    result: AddResult | None = None


@dataclass(frozen=True, slots=True)
class _Written:
    """What a write did: the state it started from, and its change (None: nothing changed)."""

    state: SessionState
    mutation: _Mutation | None = None
    change: Change | None = None
    previous: AddResult | None = None
    """The result of an earlier AddTodo with the same request id (then nothing was written)."""

    @property
    def revision(self) -> int:
        return self.state.revision if self.change is None else self.change.revision


class TodoBook:
    def __init__(self, store: TodoStore, hub: WatchHub, limits: Limits, progress_interval: float) -> None:
        self._store = store
        self._hub = hub
        self._limits = limits
        self._progress_interval = progress_interval
        store.on_external_change(self._on_external_change)

    @property
    def watcher_count(self) -> int:
        return self._hub.watcher_count

    # Sessions

    async def create_session(self, session_id: str, parent_id: str) -> tuple[SessionState, bool]:
        ops.check_session_id(session_id, self._limits)
        ops.check_session_id(parent_id, self._limits, "parent_id")
        state, created = await self._store.create_session(
            session_id or ops.new_id("ses"), parent_id, self._limits.max_sessions
        )
        if created:
            log.info("session %s created (parent %r)", state.session_id, parent_id)
        return state, created

    async def remove_session(self, session_id: str) -> list[str]:
        ops.check_session_id(session_id, self._limits)
        if session_id == GLOBAL_SESSION_ID:
            raise InvalidArgument([("session_id", "the global list cannot be removed")])
        return self._end(await self._store.remove_session(session_id))

    async def remove_all_sessions(self) -> int:
        return len(self._end(await self._store.remove_all_sessions()))

    def _end(self, removals: list[Change]) -> list[str]:
        for removal in removals:
            self._hub.end_session(removal)
            log.info("session %s removed", removal.session_id)
        return [removal.session_id for removal in removals]

    async def list_sessions(self, page_size: int, page_token: str) -> tuple[list[SessionState], str]:
        if page_size < 0:
            raise InvalidArgument([("page_size", "must not be negative")])
        limit = min(page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
        sessions = await self._store.list_sessions(page_token, limit)
        return sessions, (sessions[-1].session_id if len(sessions) == limit else "")

    async def get(self, session_id: str) -> SessionState:
        ops.check_session_id(session_id, self._limits)
        state = await self._store.get(session_id)
        if state is None:
            raise SessionNotFound(session_id)
        return state

    # Writes

    async def replace(self, session_id: str, drafts: list[TodoDraft], expected_revision: int | None) -> SessionState:
        todos = ops.replace_all(drafts, self._limits)

        def mutate(state: SessionState) -> _Mutation | None:
            # Generated ids differ on every call, so only an all-ids-given list can be identical.
            if todos == state.todos:
                return None
            return _Mutation(ChangeKind.TODOS_REPLACED, todos)

        written = await self._write(session_id, expected_revision, mutate)
        if written.change is None:
            return written.state
        return SessionState(session_id, written.state.parent_id, written.change.revision, written.change.todos)

    async def add(
        self, session_id: str, draft: TodoDraft, index: int | None, expected_revision: int | None, request_id: str
    ) -> AddResult:
        if len(request_id) > self._limits.max_todo_id_length:
            raise InvalidArgument([("request_id", f"must be at most {self._limits.max_todo_id_length} characters")])

        def mutate(state: SessionState) -> _Mutation:
            todos, todo, position = ops.insert(state.todos, draft, index, self._limits)
            result = AddResult(todo, position, state.revision + 1)
            return _Mutation(ChangeKind.TODO_ADDED, todos, todo.id, result)

        written = await self._write(session_id, expected_revision, mutate, request_id)
        if written.previous is not None:
            return written.previous
        assert written.mutation is not None and written.mutation.result is not None
        return written.mutation.result

    async def update(
        self,
        session_id: str,
        todo_id: str,
        content: str | None,
        status: str | None,
        priority: str | None,
        expected_revision: int | None,
    ) -> tuple[Todo, int, bool]:
        def mutate(state: SessionState) -> _Mutation | None:
            todos, _ = ops.update(state.todos, session_id, todo_id, content, status, priority, self._limits)
            return None if todos is state.todos else _Mutation(ChangeKind.TODO_UPDATED, todos, todo_id)

        written = await self._write(session_id, expected_revision, mutate)
        todos = written.state.todos if written.change is None else written.change.todos
        todo = next(todo for todo in todos if todo.id == todo_id)
        return todo, written.revision, written.change is not None

    async def remove_todo(self, session_id: str, todo_id: str, expected_revision: int | None) -> int:
        def mutate(state: SessionState) -> _Mutation:
            return _Mutation(ChangeKind.TODO_REMOVED, ops.remove(state.todos, session_id, todo_id), todo_id)

        return (await self._write(session_id, expected_revision, mutate)).revision

    async def _write(
        self,
        session_id: str,
        expected_revision: int | None,
        mutate: Callable[[SessionState], _Mutation | None],
        request_id: str = "",
    ) -> _Written:
        """Read, mutate, compare-and-set; retried only when another writer won the race."""
        for _ in range(_COMMIT_ATTEMPTS):
            state = await self.get(session_id)
            if request_id and (previous := await self._store.find_request(session_id, request_id)):
                return _Written(state, previous=previous)
            if expected_revision is not None and expected_revision != state.revision:
                raise RevisionMismatch(session_id, expected_revision, state.revision)
            mutation = mutate(state)
            if mutation is None:
                return _Written(state)
            change = Change(session_id, mutation.kind, state.revision + 1, mutation.todos, mutation.todo_id)
            request = (request_id, mutation.result) if request_id and mutation.result else None
            if await self._store.commit(change, request):
                self._hub.publish(change)
                return _Written(state, mutation, change)
        raise Unavailable(f"session {session_id!r} is under too much write contention; retry")

    def _on_external_change(self, change: Change) -> None:
        if change.kind is ChangeKind.SESSION_REMOVED:
            self._hub.end_session(change)
        else:
            self._hub.publish(change)

    # Watches

    async def watch(self, session_id: str, after_revision: int | None) -> AsyncGenerator[Change, None]:
        """The session's change feed, as documented on ``WatchTodos`` in the proto."""
        ops.check_session_id(session_id, self._limits)
        await self.get(session_id)  # NOT_FOUND before taking a watcher slot
        subscription = self._hub.subscribe(session_id)  # before reading: nothing slips between
        try:
            state = await self.get(session_id)
            if after_revision is None:
                first = [Change(session_id, ChangeKind.SNAPSHOT, state.revision, state.todos)]
            elif after_revision == state.revision:
                first = []
            else:
                missed = await self._store.changes_after(session_id, after_revision)
                first = missed if missed is not None else [_reset(state)]
            last = first[-1].revision if first else state.revision
            for change in first:
                yield change
            while True:
                if not await subscription.wait(self._progress_interval):
                    yield Change(session_id, ChangeKind.PROGRESS, last)
                    continue
                if isinstance(subscription.closed, Unavailable):
                    raise subscription.closed
                lagged = subscription.lagged
                for change in subscription.drain():
                    if change.revision <= last:
                        continue  # already covered by the snapshot or a reset
                    if change.revision != last + 1 and change.kind is not ChangeKind.RESET:
                        lagged = True  # a gap: never skip silently
                        break
                    yield change
                    last = change.revision
                if isinstance(subscription.closed, Change):  # removed: the store holds nothing of ours
                    yield subscription.closed
                    return
                if lagged and (latest := await self._store.get(session_id)) and latest.revision > last:
                    yield _reset(latest)
                    last = latest.revision
        finally:
            self._hub.unsubscribe(subscription)

    def shut_down(self) -> None:
        self._hub.shut_down()


def _reset(state: SessionState) -> Change:
    return Change(state.session_id, ChangeKind.RESET, state.revision, state.todos)

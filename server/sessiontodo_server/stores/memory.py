"""The in-process store: every session in a dict, optionally written through to a journal.

Methods never await, so within one event loop each call is atomic: compare-and-set
always sees the latest revision. With a ``Journal`` (the sqlite one) each write is made
durable before it is applied in memory and acknowledged.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sessiontodo_server.errors import LimitExceeded, ParentMismatch, SessionNotFound
from sessiontodo_server.stores.base import GLOBAL_SESSION_ID, AddResult, SessionState
from sessiontodo_server.todos import Change, ChangeKind, Todo

REQUEST_WINDOW = 1024
"""AddTodo request ids are remembered for retries over a session's last this many revisions."""


@dataclass(slots=True)
class _Session:
    parent_id: str
    revision: int
    todos: tuple[Todo, ...] = ()
    children: set[str] | None = None
    history: deque[Change] | None = None
    requests: OrderedDict[str, AddResult] | None = None


class Journal(Protocol):
    """Durable write-ahead of the memory store; every call must be durable on return."""

    def load(
        self,
    ) -> tuple[int, Sequence[tuple[str, str, int, tuple[Todo, ...]]], Iterable[tuple[str, str, AddResult]]]:
        """(removed high-water revision, sessions, remembered requests)."""

    def create_session(self, session_id: str, parent_id: str, revision: int) -> None: ...

    def commit(self, change: Change, request: tuple[str, AddResult] | None, forget_before: int) -> None:
        """Persist the list after ``change``; drop remembered requests older than ``forget_before``."""

    def remove_sessions(self, session_ids: list[str], high_water: int) -> None: ...

    def close(self) -> None: ...


class MemoryStore:
    def __init__(self, history_limit: int = 64, journal: Journal | None = None) -> None:
        self._history_limit = history_limit
        self._journal = journal
        self._sessions: dict[str, _Session] = {}
        self._removed_high_water = 0

    async def open(self) -> None:
        if self._journal is not None:
            high_water, sessions, requests = self._journal.load()
            self._removed_high_water = high_water
            for session_id, parent_id, revision, todos in sessions:
                self._sessions[session_id] = _Session(parent_id, revision, todos)
            for session_id, parent_id, _, _ in sessions:
                if parent_id in self._sessions:
                    self._adopt(parent_id, session_id)
            for session_id, request_id, result in requests:
                self._remember(self._sessions[session_id], request_id, result)
        if GLOBAL_SESSION_ID not in self._sessions:
            self._insert(GLOBAL_SESSION_ID, "")

    async def close(self) -> None:
        if self._journal is not None:
            self._journal.close()

    def _insert(self, session_id: str, parent_id: str) -> _Session:
        session = _Session(parent_id, self._removed_high_water)
        if self._journal is not None:
            self._journal.create_session(session_id, parent_id, session.revision)
        self._sessions[session_id] = session
        if parent_id:
            self._adopt(parent_id, session_id)
        return session

    def _adopt(self, parent_id: str, child_id: str) -> None:
        parent = self._sessions[parent_id]
        if parent.children is None:
            parent.children = set()
        parent.children.add(child_id)

    async def create_session(self, session_id: str, parent_id: str, max_sessions: int) -> tuple[SessionState, bool]:
        if (existing := self._sessions.get(session_id)) is not None:
            if existing.parent_id != parent_id:
                raise ParentMismatch(session_id, existing.parent_id)
            return _state(session_id, existing), False
        if parent_id and parent_id not in self._sessions:
            raise SessionNotFound(parent_id)
        if len(self._sessions) - 1 >= max_sessions:
            raise LimitExceeded("sessions", max_sessions)
        return _state(session_id, self._insert(session_id, parent_id)), True

    async def remove_session(self, session_id: str) -> list[Change]:
        if session_id not in self._sessions:
            return []
        doomed = [session_id]
        for doomed_id in doomed:  # grows while iterating: a breadth-first walk of descendants
            doomed.extend(self._sessions[doomed_id].children or ())
        return self._remove(doomed)

    async def remove_all_sessions(self) -> list[Change]:
        removals = self._remove([sid for sid in self._sessions if sid != GLOBAL_SESSION_ID])
        self._sessions = dict(self._sessions)  # a dict never shrinks by deletion: give its table back
        return removals

    def _remove(self, session_ids: list[str]) -> list[Change]:
        if not session_ids:
            return []
        removals = [Change(sid, ChangeKind.SESSION_REMOVED, self._sessions[sid].revision + 1) for sid in session_ids]
        high_water = max(self._removed_high_water, *(change.revision + 1 for change in removals))
        if self._journal is not None:
            self._journal.remove_sessions(session_ids, high_water)
        self._removed_high_water = high_water
        for sid in session_ids:
            session = self._sessions.pop(sid)
            if (parent := self._sessions.get(session.parent_id)) and parent.children:
                parent.children.discard(sid)
        return removals

    async def list_sessions(self, after_id: str, limit: int) -> list[SessionState]:
        ids = sorted(sid for sid in self._sessions if sid > after_id)[:limit]
        return [_state(sid, self._sessions[sid]) for sid in ids]

    async def get(self, session_id: str) -> SessionState | None:
        session = self._sessions.get(session_id)
        return None if session is None else _state(session_id, session)

    async def commit(self, change: Change, request: tuple[str, AddResult] | None = None) -> bool:
        session = self._sessions.get(change.session_id)
        if session is None or session.revision != change.revision - 1:
            return False
        if self._journal is not None:
            self._journal.commit(change, request, change.revision - REQUEST_WINDOW)
        session.revision = change.revision
        session.todos = change.todos
        if session.history is None:
            session.history = deque(maxlen=self._history_limit)
        session.history.append(change)
        if request is not None:
            self._remember(session, *request)
        return True

    def _remember(self, session: _Session, request_id: str, result: AddResult) -> None:
        if session.requests is None:
            session.requests = OrderedDict()
        session.requests[request_id] = result
        while not _in_window(session, next(iter(session.requests.values()))):
            session.requests.popitem(last=False)

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        session = self._sessions.get(session_id)
        if session is None or revision > session.revision:
            return None
        history = session.history or ()
        if revision < session.revision - len(history):
            return None
        return list(history)[len(history) - (session.revision - revision) :]

    async def find_request(self, session_id: str, request_id: str) -> AddResult | None:
        session = self._sessions.get(session_id)
        if session is None or session.requests is None:
            return None
        result = session.requests.get(request_id)
        return result if result is not None and _in_window(session, result) else None

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Nothing else writes to this store, so there is nothing to listen for."""

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """An in-process store is always available."""


def _in_window(session: _Session, result: AddResult) -> bool:
    return result.revision >= session.revision - REQUEST_WINDOW


def _state(session_id: str, session: _Session) -> SessionState:
    return SessionState(session_id, session.parent_id, session.revision, session.todos)

"""The default embedded store: the memory store written through to a SQLite journal.

SQLite runs in WAL mode with ``synchronous=NORMAL``: a committed transaction survives
the process being killed (``kill -9``); only an operating-system crash or power loss can
drop the last transactions. Reads are served from memory.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from sessiontodo_server.stores.base import AddResult
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.todos import Change, Todo, TodoPriority, TodoStatus

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    todos TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (session_id, request_id)
);
CREATE INDEX IF NOT EXISTS requests_by_revision ON requests (session_id, revision);
"""


def _dump_todos(todos: Iterable[Todo]) -> str:
    return json.dumps([[t.id, t.content, t.status.value, t.priority.value] for t in todos], separators=(",", ":"))


def _load_todos(text: str) -> tuple[Todo, ...]:
    return tuple(Todo(i, c, TodoStatus(s), TodoPriority(p)) for i, c, s, p in json.loads(text))


def _dump_result(result: AddResult) -> str:
    return json.dumps([_dump_todos([result.todo]), result.index, result.revision])


def _load_result(text: str) -> AddResult:
    todos, index, revision = json.loads(text)
    return AddResult(_load_todos(todos)[0], index, revision)


class SqliteJournal:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    def load(self) -> tuple[int, list[tuple[str, str, int, tuple[Todo, ...]]], list[tuple[str, str, AddResult]]]:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'removed_high_water'").fetchone()
        sessions = [
            (sid, parent, revision, _load_todos(todos))
            for sid, parent, revision, todos in self._db.execute(
                "SELECT session_id, parent_id, revision, todos FROM sessions"
            )
        ]
        requests = [
            (sid, rid, _load_result(result))
            for sid, rid, result in self._db.execute(
                "SELECT session_id, request_id, result FROM requests ORDER BY revision"
            )
        ]
        return (row[0] if row else 0), sessions, requests

    def create_session(self, session_id: str, parent_id: str, revision: int) -> None:
        self._db.execute(
            "INSERT INTO sessions (session_id, parent_id, revision, todos) VALUES (?, ?, ?, '[]')",
            (session_id, parent_id, revision),
        )

    def commit(self, change: Change, request: tuple[str, AddResult] | None, forget_before: int) -> None:
        with self._transaction():
            self._db.execute(
                "UPDATE sessions SET revision = ?, todos = ? WHERE session_id = ?",
                (change.revision, _dump_todos(change.todos), change.session_id),
            )
            if request is not None:
                request_id, result = request
                self._db.execute(
                    "INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)",
                    (change.session_id, request_id, change.revision, _dump_result(result)),
                )
                self._db.execute(
                    "DELETE FROM requests WHERE session_id = ? AND revision < ?", (change.session_id, forget_before)
                )

    def remove_sessions(self, session_ids: list[str], high_water: int) -> None:
        with self._transaction():
            for chunk in _chunks(session_ids, 500):
                marks = ",".join("?" * len(chunk))
                self._db.execute(f"DELETE FROM sessions WHERE session_id IN ({marks})", chunk)
                self._db.execute(f"DELETE FROM requests WHERE session_id IN ({marks})", chunk)
            self._db.execute(
                "INSERT INTO meta VALUES ('removed_high_water', ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (high_water,),
            )

    def _transaction(self) -> sqlite3.Connection:
        """``with`` on a connection in autocommit mode needs an explicit BEGIN."""
        self._db.execute("BEGIN")
        return self._db

    def close(self) -> None:
        self._db.close()


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def open_sqlite_store(path: Path, history_limit: int) -> MemoryStore:
    return MemoryStore(history_limit, journal=SqliteJournal(path))

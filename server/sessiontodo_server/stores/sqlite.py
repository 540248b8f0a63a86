"""The default embedded store: the memory store written through to a SQLite journal.

SQLite runs in WAL mode, and writes are group-committed (``group_commit.py``): the writes
made while one transaction is being written share the next. The durability mode decides
what an acknowledged write survives:

- ``process``: ``synchronous=NORMAL``, each batch written in the event loop. A committed
  transaction is in the OS's page cache: it survives the process being killed (``kill -9``),
  not an operating-system crash or power loss, which can drop the last transactions.
- ``fsync``: ``synchronous=FULL``, each batch written and fsynced in a worker thread (the loop
  goes on accepting the next batch): it survives an OS crash and power loss too, as far as the
  disk honours fsync.

Reads are served from memory. A list up to ``ONE_ROW_BYTES`` is one JSON column of its session's
row, the cheapest form to rewrite whole, which is what most writes do (an agent's plan update
replaces its list). A bigger list is a row per todo, its order kept as links (``next_id``), so a
write on it stores what it changed — one todo and at most one link — and editing a big list
never makes everyone else wait while a megabyte is encoded and written.

One process owns the file (an exclusive ``flock`` held while it runs): two servers on one
file would each serve their own copy and lose each other's writes. A write the file refuses
(disk full, read-only, I/O error) is UNAVAILABLE and changes nothing; the store reports
itself unavailable (health NOT_SERVING) until a probe write succeeds again.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import sqlite3
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Literal

from sessiontodo_server.domain.batch import Outcome
from sessiontodo_server.domain.budget import DEFAULT_MEMORY_BUDGET, TODO_OVERHEAD, MemoryBudget, list_bytes
from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, AddResult, StoreInUseError, StoreStartupError
from sessiontodo_server.domain.values import Change, ChangeKind, SessionInfo, Todo, frozen
from sessiontodo_server.stores.codec import (
    decode_outcomes,
    decode_todos,
    encode_entries,
    encode_outcomes,
    encode_todo,
    encode_todos,
)
from sessiontodo_server.stores.group_commit import Done, GroupCommit
from sessiontodo_server.stores.memory import Loaded, MemoryStore

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    todos TEXT NOT NULL  -- the list when it fits ONE_ROW_BYTES, else '[]' and the list is in todos
);
CREATE TABLE IF NOT EXISTS todos (
    session_id TEXT NOT NULL,
    todo_id TEXT NOT NULL,
    next_id TEXT,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, todo_id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS requests (
    session_id TEXT NOT NULL,
    request_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    result TEXT NOT NULL,
    PRIMARY KEY (session_id, request_id)
);
CREATE INDEX IF NOT EXISTS requests_by_revision ON requests (session_id, revision);
CREATE TABLE IF NOT EXISTS removed (session_id TEXT PRIMARY KEY, revision INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS batches (
    request_id TEXT PRIMARY KEY,  -- the tenant, a newline, the batch's request id
    at REAL NOT NULL,
    fingerprint TEXT NOT NULL,
    outcomes TEXT NOT NULL
);
"""

_SESSION_COLUMNS = {
    "labels": "TEXT NOT NULL DEFAULT '{}'",
    "created_at": "REAL NOT NULL DEFAULT 0",
    "updated_at": "REAL NOT NULL DEFAULT 0",
    "idle_ttl": "REAL NOT NULL DEFAULT 0",
    "cursor": "INTEGER NOT NULL DEFAULT 0",
}
"""Added in 0.2 (``cursor``: 0.3, the feed position of the session's newest change); ALTER TABLE
brings an older file up to date."""

_PUT_TODO = (
    "INSERT INTO todos VALUES (?, ?, ?, ?)"
    " ON CONFLICT (session_id, todo_id) DO UPDATE SET next_id = excluded.next_id, body = excluded.body"
)
_LINK = "UPDATE todos SET next_id = ? WHERE session_id = ? AND todo_id = ?"
_UPDATE_SESSION = (
    "UPDATE sessions SET revision = ?, labels = ?, updated_at = ?, idle_ttl = ?, cursor = ? WHERE session_id = ?"
)
_UPDATE_SESSION_AND_LIST = (
    "UPDATE sessions SET revision = ?, labels = ?, updated_at = ?, idle_ttl = ?, cursor = ?, todos = ?"
    " WHERE session_id = ?"
)

ONE_ROW_BYTES = 16 * 1024
"""Lists up to this size (as the memory budget counts them) are one column; bigger ones a row per todo."""


def _in_rows(todos: Sequence[Todo]) -> bool:
    """The form a list is stored in follows from its size alone (``_load`` makes older files agree);
    a long list is big by its count alone, without a pass over its todos."""
    return TODO_OVERHEAD * len(todos) > ONE_ROW_BYTES or list_bytes(todos) > ONE_ROW_BYTES


def _dump_result(result: AddResult) -> str:
    return json.dumps([encode_todos([result.todo]), result.index, result.revision, result.fingerprint])


def _load_result(text: str) -> AddResult:
    todos, index, revision, *fingerprint = json.loads(text)  # no fingerprint: written by 0.1
    return AddResult(decode_todos(todos)[0], index, revision, *fingerprint)


log = logging.getLogger(__name__)

Durability = Literal["process", "fsync"]
_SYNCHRONOUS: dict[Durability, str] = {"process": "NORMAL", "fsync": "FULL"}

_Record = Callable[[], None]
"""One write's statements, run inside its batch's transaction.

The feed's position is kept where each write puts it anyway: a session's row holds the cursor of
its newest change, and a removal (which deletes rows) writes it to ``meta``; the position is the
highest of them (``_load``). A meta row written by every batch cost a statement and a WAL page
per write."""

PROBE_INTERVAL = 1.0
"""Seconds between probe writes while the file refuses writes."""


def _lock(path: Path) -> int:
    """An exclusive flock on the database file itself, held until the journal closes
    (independent of SQLite's own POSIX locks, which it leaves alone)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise StoreStartupError(f"sqlite file {path} cannot be opened: {error.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StoreInUseError(f"sqlite file {path.resolve()} is in use by another sessiontodo server") from None
    return fd


class SqliteJournal:
    def __init__(self, path: Path, durability: Durability = "process") -> None:
        self._path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock_fd = _lock(path)
        self._listener: Callable[[bool], Awaitable[None]] | None = None
        self._probe: asyncio.Task[None] | None = None
        try:
            # check_same_thread=False: with fsync, batches are written by the journal's one worker thread.
            self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            with self._starting():
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute(f"PRAGMA synchronous={_SYNCHRONOUS[durability]}")
                self._db.executescript(_SCHEMA)
                self._migrate()
        except BaseException:
            os.close(self._lock_fd)
            raise
        self._group = GroupCommit[_Record](self._write_batch, threaded=durability == "fsync", refused=self._refused)

    def _write_batch(self, records: Sequence[_Record]) -> None:
        """One transaction (and with ``fsync``, one fsync of the WAL) for the whole batch."""
        try:
            with self._transaction():  # commits on leaving
                for record in records:
                    record()
        except sqlite3.Error:
            self._rollback()
            raise

    @contextlib.contextmanager
    def _starting(self) -> Iterator[None]:
        """Any SQLite error before serving is one line naming the file, never a traceback."""
        try:
            yield
        except (sqlite3.Error, ValueError) as error:  # ValueError: a row that is not our JSON
            raise StoreStartupError(f"sqlite file {self._path} cannot be used: {error}") from None

    def _rollback(self) -> None:
        """After a failed write (a failed COMMIT leaves its transaction open)."""
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    def _refused(self, error: Exception) -> Exception:
        """The file refused a batch (disk full, read-only, I/O error): the store is unavailable
        until a probe write succeeds; the callers get UNAVAILABLE with the reason."""
        if not isinstance(error, sqlite3.Error):
            log.error("journal write failed", exc_info=error)
            return error
        log.warning("sqlite file %s refused a write: %s", self._path, error)
        if self._probe is None or self._probe.done():
            self._probe = asyncio.get_running_loop().create_task(self._probe_until_writable(), name="sqlite probe")
        return Unavailable(f"the store cannot write right now ({error}); retry later")

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        self._listener = listener

    async def _probe_until_writable(self) -> None:
        if self._listener is not None:
            await self._listener(False)
        while True:
            await asyncio.sleep(PROBE_INTERVAL)
            try:
                await self._group.run_alone(self._probe_write)  # never inside a batch's transaction
            except sqlite3.Error:
                continue
            log.info("sqlite file %s accepts writes again", self._path)
            if self._listener is not None:
                await self._listener(True)
            return

    def _probe_write(self) -> None:
        """A write of some size (64 KiB) that leaves nothing behind."""
        try:
            with self._transaction():
                self._db.execute("INSERT OR REPLACE INTO meta VALUES ('write_probe', zeroblob(65536))")
                self._db.execute("DELETE FROM meta WHERE key = 'write_probe'")
        except sqlite3.Error:
            self._rollback()
            raise

    def _migrate(self) -> None:
        present = {row[1] for row in self._db.execute("PRAGMA table_info(sessions)")}
        for column, definition in _SESSION_COLUMNS.items():
            if column not in present:
                self._db.execute(f"ALTER TABLE sessions ADD COLUMN {column} {definition}")
        # 0.1 kept the global list under the empty id.
        self._db.execute("UPDATE sessions SET session_id = ? WHERE session_id = ''", (GLOBAL_SESSION_ID,))
        self._db.execute("UPDATE requests SET session_id = ? WHERE session_id = ''", (GLOBAL_SESSION_ID,))

    def _meta(self, key: str) -> int | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def _set_meta(self, key: str, value: int) -> None:
        self._db.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value)
        )

    def load(self) -> Loaded:
        with self._starting():
            return self._load()

    def _load(self) -> Loaded:
        epoch = self._meta("feed_epoch")
        if epoch is None:
            epoch = int.from_bytes(os.urandom(6))
            self._set_meta("feed_epoch", epoch)
        in_rows = self._load_lists()
        sessions = [
            (
                sid,
                revision,
                in_rows.get(sid) or decode_todos(todos),
                SessionInfo(parent, frozen(json.loads(labels)), created, updated, ttl),
            )
            for sid, parent, revision, todos, labels, created, updated, ttl in self._db.execute(
                "SELECT session_id, parent_id, revision, todos, labels, created_at, updated_at, idle_ttl FROM sessions"
            )
        ]
        misplaced = [(sid, todos) for sid, _, todos, _ in sessions if _in_rows(todos) != (sid in in_rows)]
        if misplaced:  # big lists written before lists had rows
            with self._transaction():
                for session_id, todos in misplaced:
                    self._db.execute("DELETE FROM todos WHERE session_id = ?", (session_id,))
                    self._db.execute("UPDATE sessions SET todos = '[]' WHERE session_id = ?", (session_id,))
                    self._store_list(session_id, todos, ())
        requests = [
            (sid, rid, _load_result(result))
            for sid, rid, result in self._db.execute(
                "SELECT session_id, request_id, result FROM requests ORDER BY revision"
            )
        ]
        marks = list(self._db.execute("SELECT session_id, revision FROM removed ORDER BY rowid"))
        batches = [
            (key, fingerprint, decode_outcomes(outcomes), at)
            for key, at, fingerprint, outcomes in self._db.execute(
                "SELECT request_id, at, fingerprint, outcomes FROM batches ORDER BY at"
            )
        ]
        newest_write = self._db.execute("SELECT max(cursor) FROM sessions").fetchone()[0] or 0
        return Loaded(
            feed_epoch=epoch,
            cursor=max(self._meta("feed_cursor") or 0, newest_write),  # see ``_Record``
            removed_floor=self._meta("removed_high_water") or 0,
            removed_marks=marks,
            sessions=sessions,
            requests=requests,
            batches=batches,
        )

    def _load_lists(self) -> dict[str, tuple[Todo, ...]]:
        """Every list kept in rows, in order: each one's rows followed from the one no row links to."""
        links: dict[str, dict[str, tuple[str | None, str]]] = {}
        for session_id, todo_id, next_id, body in self._db.execute(
            "SELECT session_id, todo_id, next_id, body FROM todos"
        ):
            links.setdefault(session_id, {})[todo_id] = (next_id, body)
        return {session_id: _follow(session_id, rows) for session_id, rows in links.items()}

    def create_session(
        self, session_id: str, revision: int, info: SessionInfo, cursor: int, done: Done
    ) -> asyncio.Future[None]:
        return self._group.submit(partial(self._create_session, session_id, revision, info, cursor), done)

    def _create_session(self, session_id: str, revision: int, info: SessionInfo, cursor: int) -> None:
        self._db.execute(
            "INSERT INTO sessions"
            " (session_id, parent_id, revision, todos, labels, created_at, updated_at, idle_ttl, cursor)"
            " VALUES (?, ?, ?, '[]', ?, ?, ?, ?, ?)",
            (
                session_id,
                info.parent_id,
                revision,
                encode_entries(info.labels),
                info.created_at,
                info.updated_at,
                info.idle_ttl,
                cursor,
            ),
        )
        self._db.execute("DELETE FROM removed WHERE session_id = ?", (session_id,))

    def commit(
        self,
        change: Change,
        before: tuple[Todo, ...],
        request: tuple[str, AddResult] | None,
        forget_before: int,
        done: Done,
    ) -> asyncio.Future[None]:
        assert change.info is not None, "a committed change carries the session's metadata"
        return self._group.submit(partial(self._commit, change, before, request, forget_before), done)

    def _commit(
        self, change: Change, before: tuple[Todo, ...], request: tuple[str, AddResult] | None, forget_before: int
    ) -> None:
        info = change.info
        assert info is not None
        session = (change.revision, encode_entries(info.labels), info.updated_at, info.idle_ttl, change.cursor)
        lists = change.kind is not ChangeKind.SESSION_UPDATED  # else the list is unchanged
        if lists and not _in_rows(change.todos) and not _in_rows(before):
            # The common case, a list in one column before and after: one statement for the session and its list.
            self._db.execute(_UPDATE_SESSION_AND_LIST, (*session, encode_todos(change.todos), change.session_id))
        else:
            self._db.execute(_UPDATE_SESSION, (*session, change.session_id))
            if lists:
                self._store_list(change.session_id, change.todos, before, change)
        if request is not None:
            request_id, result = request
            self._db.execute(
                "INSERT OR REPLACE INTO requests VALUES (?, ?, ?, ?)",
                (change.session_id, request_id, change.revision, _dump_result(result)),
            )
            self._db.execute(
                "DELETE FROM requests WHERE session_id = ? AND revision < ?", (change.session_id, forget_before)
            )

    def _store_list(
        self, session_id: str, todos: Sequence[Todo], before: Sequence[Todo], change: Change | None = None
    ) -> None:
        """Store ``todos``, which replaced ``before`` (by ``change``, when it is a one-todo write):
        as one column, or as the rows that differ, in the form its size calls for."""
        if not _in_rows(todos):
            self._db.execute("UPDATE sessions SET todos = ? WHERE session_id = ?", (encode_todos(todos), session_id))
            if _in_rows(before):
                self._db.execute("DELETE FROM todos WHERE session_id = ?", (session_id,))
        elif not _in_rows(before):
            self._db.execute("UPDATE sessions SET todos = '[]' WHERE session_id = ?", (session_id,))
            self._write_difference(session_id, (), todos)
        elif change is not None and change.kind is not ChangeKind.TODOS_REPLACED:
            self._write_one_todo(change, before)
        else:
            self._write_difference(session_id, before, todos)

    def _write_one_todo(self, change: Change, before: Sequence[Todo]) -> None:
        """An added, updated or removed todo of a list in rows: that row, and at most one link."""
        session_id, todo_id, todos = change.session_id, change.todo_id, change.todos
        if change.kind is ChangeKind.TODO_REMOVED:
            index = _index(before, todo_id)
            if index:
                following = before[index + 1].id if index + 1 < len(before) else None
                self._db.execute(_LINK, (following, session_id, before[index - 1].id))
            self._db.execute("DELETE FROM todos WHERE session_id = ? AND todo_id = ?", (session_id, todo_id))
            return
        index = _index(todos, todo_id)
        following = todos[index + 1].id if index + 1 < len(todos) else None
        self._db.execute(_PUT_TODO, (session_id, todo_id, following, encode_todo(todos[index])))
        if index and change.kind is ChangeKind.TODO_ADDED:
            self._db.execute(_LINK, (todo_id, session_id, todos[index - 1].id))

    def _write_difference(self, session_id: str, before: Sequence[Todo], after: Sequence[Todo]) -> None:
        """Rows for ``after`` where ``before`` had none or another todo or link; gone rows deleted."""
        was = {todo.id: (todo, following) for todo, following in _linked(before)}
        self._db.executemany(
            _PUT_TODO,
            (
                (session_id, todo.id, following, encode_todo(todo))
                for todo, following in _linked(after)
                if was.get(todo.id) != (todo, following)
            ),
        )
        gone = was.keys() - {todo.id for todo in after}
        self._db.executemany("DELETE FROM todos WHERE session_id = ? AND todo_id = ?", ((session_id, i) for i in gone))

    def remember_batch(
        self, key: str, fingerprint: str, outcomes: tuple[Outcome, ...], at: float, forgotten: list[str], done: Done
    ) -> asyncio.Future[None]:
        record = partial(self._remember_batch, key, fingerprint, encode_outcomes(outcomes), at, forgotten)
        return self._group.submit(record, done)

    def _remember_batch(self, key: str, fingerprint: str, outcomes: str, at: float, forgotten: list[str]) -> None:
        for chunk in _chunks(forgotten, 500):
            self._db.execute(f"DELETE FROM batches WHERE request_id IN ({','.join('?' * len(chunk))})", chunk)
        self._db.execute("INSERT OR REPLACE INTO batches VALUES (?, ?, ?, ?)", (key, at, fingerprint, outcomes))

    def remove_sessions(
        self,
        session_ids: list[str],
        marks: list[tuple[str, int]],
        forgotten: list[str],
        floor: int,
        cursor: int,
        done: Done,
    ) -> asyncio.Future[None]:
        record = partial(self._remove_sessions, session_ids, marks, forgotten, floor, cursor)
        return self._group.submit(record, done)

    def _remove_sessions(
        self, session_ids: list[str], marks: list[tuple[str, int]], forgotten: list[str], floor: int, cursor: int
    ) -> None:
        for chunk in _chunks(session_ids, 500):
            places = ",".join("?" * len(chunk))
            self._db.execute(f"DELETE FROM sessions WHERE session_id IN ({places})", chunk)
            self._db.execute(f"DELETE FROM todos WHERE session_id IN ({places})", chunk)
            self._db.execute(f"DELETE FROM requests WHERE session_id IN ({places})", chunk)
        for chunk in _chunks(forgotten, 500):
            self._db.execute(f"DELETE FROM removed WHERE session_id IN ({','.join('?' * len(chunk))})", chunk)
        self._db.executemany("INSERT OR REPLACE INTO removed VALUES (?, ?)", marks)
        self._set_meta("removed_high_water", floor)
        self._set_meta("feed_cursor", cursor)  # the removed sessions' rows held it

    def _transaction(self) -> sqlite3.Connection:
        """``with`` on a connection in autocommit mode needs an explicit BEGIN."""
        self._db.execute("BEGIN")
        return self._db

    async def close(self) -> None:
        await self._group.drain()
        self._group.close()
        if self._probe is not None:
            self._probe.cancel()
        self._db.close()
        if self._lock_fd >= 0:  # after SQLite let go of the file; closing twice is harmless
            os.close(self._lock_fd)
            self._lock_fd = -1


def _index(todos: Sequence[Todo], todo_id: str) -> int:
    """Where ``todo_id`` is in ``todos`` (a change's own todo: always there)."""
    if todos[-1].id == todo_id:  # appended: the common add
        return len(todos) - 1
    return next(index for index, todo in enumerate(todos) if todo.id == todo_id)


def _linked(todos: Sequence[Todo]) -> Iterable[tuple[Todo, str | None]]:
    """Each todo with the id of the one after it (None for the last)."""
    return zip(todos, [*(todo.id for todo in todos[1:]), None] if todos else [], strict=True)


def _follow(session_id: str, rows: dict[str, tuple[str | None, str]]) -> tuple[Todo, ...]:
    """A list from its rows (todo id -> (next todo id, body)); anything but one chain through
    every row is a damaged file (a ValueError: one line at start-up)."""
    damaged = ValueError(f"the todos of session {session_id!r} are not one list")
    heads = rows.keys() - {next_id for next_id, _ in rows.values()}
    if len(heads) != 1:
        raise damaged
    todo_id: str | None = heads.pop()
    bodies: list[str] = []
    while todo_id is not None:
        if todo_id not in rows or len(bodies) == len(rows):
            raise damaged
        todo_id, body = rows[todo_id]
        bodies.append(body)
    if len(bodies) != len(rows):
        raise damaged
    return decode_todos(f"[{','.join(bodies)}]")  # one JSON parse per list, not per todo


def _chunks(items: list[str], size: int) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def open_sqlite_store(
    path: Path,
    history_limit: int,
    feed_history: int,
    budget: MemoryBudget = DEFAULT_MEMORY_BUDGET,
    durability: Durability = "process",
) -> MemoryStore:
    journal = SqliteJournal(path, durability)
    return MemoryStore(history_limit, journal=journal, feed_history=feed_history, budget=budget)

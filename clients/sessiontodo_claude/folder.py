"""A Claude Code task list folder, read and written the way the real CLI does, under its locks.

Claude Code (2.1.x) keeps a list in ``<home>/.claude/tasks/<list>/``: one ``<id>.json`` per task,
``.highwatermark`` (the highest id ever deleted), and two kinds of lock, both directories made
with ``mkdir`` (the ``proper-lockfile`` convention; no ``flock``): the list lock ``.lock.lock``
(around creating a task) and a task lock ``<id>.json.lock`` (around updating one). Claude retries
a taken lock 30 times, waiting 5 ms doubling to 100 ms, and takes a lock over when it is older
than 10 s (its holder died).

Claude writes in place, so a reader can see half a file: reads here retry a file that does not
parse yet. Writes here never leave half a file: the new text goes to a dot-named temporary file
(not ending in ``.json``, which Claude would read as a task) and is renamed over the task's.
Every write takes the lock Claude takes for it and merges into the file as re-read under that
lock, so an edit Claude made a moment before is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from sessiontodo_claude.tasks import TASK_SUFFIX, NotATask, Task, decode, encode, task_id_of

log = logging.getLogger(__name__)

HIGHWATERMARK = ".highwatermark"
LIST_LOCK_TARGET = ".lock"
"""The file Claude's list lock is taken on (it creates it empty); the lock itself is ``.lock.lock``."""
LOCK_SUFFIX = ".lock"

LOCK_RETRIES = 30
LOCK_FIRST_WAIT = 0.005
LOCK_LONGEST_WAIT = 0.1
STALE_LOCK_AGE = 10.0
"""Seconds after which a lock is taken over (proper-lockfile's default, which Claude keeps)."""
READ_RETRIES = 20
READ_RETRY_WAIT = 0.01
"""A file that does not parse is read again this often, this far apart, before it counts as unreadable."""


class LockTimeout(TimeoutError):
    """A lock stayed taken through every retry."""


@dataclass(frozen=True)
class Listing:
    """The tasks of a folder at one moment, and the task files that could not be read as tasks."""

    tasks: dict[str, Task]
    unreadable: frozenset[str]


class TaskFolder:
    """One task list's folder (``<home>/.claude/tasks/<list>``)."""

    def __init__(
        self,
        path: Path,
        *,
        lock_retries: int = LOCK_RETRIES,
        stale_lock_age: float = STALE_LOCK_AGE,
        read_retries: int = READ_RETRIES,
    ) -> None:
        self.path = path
        self._lock_retries = lock_retries
        self._stale_lock_age = stale_lock_age
        self._read_retries = read_retries

    def file_of(self, task_id: str) -> Path:
        return self.path / f"{task_id}{TASK_SUFFIX}"

    def ensure(self) -> None:
        """Make the folder and the list lock's target file, as Claude does before its first task."""
        self.path.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            (self.path / LIST_LOCK_TARGET).open("x").close()

    # reading

    def task_ids(self) -> set[str]:
        """The ids of the task files present (no folder: none)."""
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            return set()
        return {task_id for task_id in map(task_id_of, names) if task_id is not None}

    async def read(self, task_id: str) -> Task | None:
        """The task in ``<task_id>.json``, or None when there is no such file. A file that does not
        parse is read again (Claude may be half-way through writing it); one that still does not
        after the retries raises ``NotATask``."""
        for attempt in range(self._read_retries + 1):
            try:
                text = self.file_of(task_id).read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            try:
                task = decode(text)
            except NotATask:
                if attempt == self._read_retries:
                    raise
                await asyncio.sleep(READ_RETRY_WAIT)
                continue
            if task.id != task_id:
                raise NotATask(f"{self.file_of(task_id).name} holds task {task.id!r}")
            return task
        raise AssertionError("unreachable")

    async def read_all(self) -> Listing:
        tasks: dict[str, Task] = {}
        unreadable: set[str] = set()
        for task_id in sorted(self.task_ids(), key=int):
            try:
                task = await self.read(task_id)
            except NotATask as error:
                log.warning("task file %s is not a task Claude reads: %s", self.file_of(task_id), error)
                unreadable.add(task_id)
                continue
            if task is not None:
                tasks[task_id] = task
        return Listing(tasks, frozenset(unreadable))

    def highwatermark(self) -> int:
        """The highest id Claude will never give again (deleted or reset ones); 0 without the file."""
        try:
            return int((self.path / HIGHWATERMARK).read_text(encoding="utf-8").strip() or 0)
        except (FileNotFoundError, ValueError):
            return 0

    # locks

    @contextlib.asynccontextmanager
    async def _locked(self, target: Path) -> AsyncIterator[None]:
        """Hold ``<target>.lock`` (a directory), retrying as Claude does and taking over a stale one."""
        lock = target.with_name(target.name + LOCK_SUFFIX)
        wait = LOCK_FIRST_WAIT
        for attempt in range(self._lock_retries + 1):
            try:
                lock.mkdir()
                break
            except FileExistsError:
                if self._stale(lock):
                    log.warning("taking over the stale lock %s", lock)
                    with contextlib.suppress(FileNotFoundError, OSError):
                        lock.rmdir()
                    continue
                if attempt == self._lock_retries:
                    raise LockTimeout(f"{lock} stayed locked") from None
                await asyncio.sleep(wait)
                wait = min(wait * 2, LOCK_LONGEST_WAIT)
        try:
            yield
        finally:
            with contextlib.suppress(FileNotFoundError):
                lock.rmdir()

    def _stale(self, lock: Path) -> bool:
        try:
            return time.time() - lock.stat().st_mtime > self._stale_lock_age
        except FileNotFoundError:
            return False

    def _list_locked(self) -> contextlib.AbstractAsyncContextManager[None]:
        self.ensure()
        return self._locked(self.path / LIST_LOCK_TARGET)

    # writing

    def _write(self, task_id: str, document: Mapping[str, Any]) -> None:
        """Replace ``<task_id>.json`` whole: a dot-named temporary file (Claude and the watcher skip it), renamed."""
        temporary = self.path / f".{task_id}{TASK_SUFFIX}.{uuid.uuid4().hex[:12]}.tmp"
        temporary.write_text(encode(document), encoding="utf-8")
        os.replace(temporary, self.file_of(task_id))

    async def create(self, task: Task) -> Task:
        """Add ``task`` (its ``id`` is ignored) under the next id, max(files, ``.highwatermark``) + 1, as
        Claude allocates them; its ``blocked_by`` / ``blocks`` are written on the other tasks' sides too."""
        async with self._list_locked():
            highest = max([self.highwatermark(), *map(int, self.task_ids())])
            created = replace(task, id=str(highest + 1), blocks=(), blocked_by=())
            self._write(created.id, created.to_json())
        for blocker in task.blocked_by:
            await self.link(blocker, created.id)
        for blocked in task.blocks:
            await self.link(created.id, blocked)
        return await self.read(created.id) or created

    async def update(self, task_id: str, fields: Mapping[str, Any], *, metadata: Mapping[str, Any] = {}) -> Task | None:
        """Set the given top-level fields (Claude's names; None removes one, as Claude drops an undefined
        owner) and metadata keys (None removes one) in the file as re-read under the task's lock; the rest
        of the file is kept. Returns the task written, or None when the file is gone."""
        async with self._locked(self.file_of(task_id)):
            current = await self.read(task_id)
            if current is None:
                return None
            document = current.to_json() | dict(fields)
            merged = dict(current.metadata)
            for key, value in metadata.items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            document["metadata"] = merged
            document = {key: value for key, value in document.items() if value is not None}
            if not merged:
                document.pop("metadata")
            updated = decode(encode(document))  # checked before it reaches Claude
            if updated != current:
                self._write(task_id, document)
            return updated

    async def link(self, blocker: str, blocked: str) -> bool:
        """Make ``blocked`` wait for ``blocker``, on both sides (``blocks`` of one, ``blockedBy`` of the
        other), one file after the other as Claude does; False when either task is missing."""
        first, second = await self.read(blocker), await self.read(blocked)
        if first is None or second is None:
            return False
        if blocked not in first.blocks:
            await self._edit_list(blocker, "blocks", add=blocked)
        if blocker not in second.blocked_by:
            await self._edit_list(blocked, "blockedBy", add=blocker)
        return True

    async def unlink(self, blocker: str, blocked: str) -> None:
        """Undo ``link``, on both sides (a side already without it is left alone)."""
        await self._edit_list(blocker, "blocks", remove=blocked)
        await self._edit_list(blocked, "blockedBy", remove=blocker)

    async def _edit_list(self, task_id: str, name: str, *, add: str = "", remove: str = "") -> None:
        async with self._locked(self.file_of(task_id)):
            current = await self.read(task_id)
            if current is None:
                return
            document = current.to_json()
            ids: list[str] = document[name]
            if add and add not in ids:
                ids.append(add)
            elif remove and remove in ids:
                ids.remove(remove)
            else:
                return
            self._write(task_id, document)

    async def delete(self, task_id: str) -> bool:
        """Delete a task as Claude does: ``.highwatermark`` raised to its id (never given again), the file
        removed, and the id taken out of every other task's ``blocks`` and ``blockedBy`` under their locks.
        False when there was no such file."""
        async with self._list_locked():
            if int(task_id) > self.highwatermark():
                (self.path / HIGHWATERMARK).write_text(task_id, encoding="utf-8")
            try:
                self.file_of(task_id).unlink()
            except FileNotFoundError:
                return False
        listing = await self.read_all()
        for other in listing.tasks.values():
            if task_id in other.blocks:
                await self._edit_list(other.id, "blocks", remove=task_id)
            if task_id in other.blocked_by:
                await self._edit_list(other.id, "blockedBy", remove=task_id)
        return True

    async def set_blocked_by(self, task_id: str, blocked_by: Sequence[str]) -> None:
        """Make ``task_id`` wait for exactly ``blocked_by`` (ids of this folder), both sides of every edge."""
        current = await self.read(task_id)
        if current is None:
            return
        for gone in [blocker for blocker in current.blocked_by if blocker not in blocked_by]:
            await self.unlink(gone, task_id)
        for blocker in blocked_by:
            await self.link(blocker, task_id)

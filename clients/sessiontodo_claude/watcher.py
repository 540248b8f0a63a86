"""Following a task list folder with inotify (``watchfiles``, on Rust's ``notify``): no polling loop here."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import watchfiles

from sessiontodo_claude.tasks import task_id_of

STEP_MS = 5
"""Milliseconds ``watchfiles`` waits for more changes before it reports a batch: Claude writes a task in
one go, and a dependency is two files a few milliseconds apart."""
LONGEST_BATCH_MS = 50
"""The longest a busy folder's changes are held back to be reported together."""


def _task_file(change: watchfiles.Change, path: str) -> bool:
    """Task files only: not dot files (temporary files, ``.highwatermark``, the list lock), not lock directories."""
    return task_id_of(os.path.basename(path)) is not None


async def changed_task_ids(folder: Path, stop: asyncio.Event | None = None) -> AsyncIterator[set[str]]:
    """The ids of the task files added, changed or removed in ``folder``, a batch at a time, until ``stop``.
    The folder must exist; a batch only says which ids to read again."""
    async for changes in watchfiles.awatch(
        folder,
        watch_filter=_task_file,
        step=STEP_MS,
        debounce=LONGEST_BATCH_MS,
        recursive=False,
        stop_event=stop,
    ):
        yield {task_id for task_id in (task_id_of(os.path.basename(path)) for _, path in changes) if task_id}


def _present(folder: Path) -> bool:
    """One stat of a local folder: too quick to hand to a thread."""
    return folder.is_dir()


async def until_made(folder: Path) -> None:
    """Return once ``folder`` exists (again): its parent is followed meanwhile."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    if _present(folder):
        return
    async for _ in watchfiles.awatch(
        folder.parent,
        watch_filter=lambda change, path: os.path.basename(path) == folder.name,
        step=STEP_MS,
        recursive=False,
    ):
        if _present(folder):
            return

"""The suite's markers, applied by folder where a whole folder needs the same, and checked where they
can be: a test that starts a process without the ``process`` marker fails."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

HEAVY_MARKERS = frozenset({"slow", "process", "peer", "redis", "etcd"})
"""What the unit tier never holds."""
ON_REDIS = (pytest.mark.redis, pytest.mark.peer, pytest.mark.process)
"""The marks of a test run against a real redis-server of its own."""
ON_ETCD = (pytest.mark.etcd, pytest.mark.peer, pytest.mark.process)
"""The marks of a test run against a real etcd of its own."""

_STARTING_A_PROCESS = frozenset(
    {"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec", "os.fork", "os.forkpty"}
)
"""The audit events (``sys.addaudithook``) raised when Python starts a process, directly or for asyncio."""


def mark_folder(items: list[pytest.Item], folder: Path, *marks: pytest.MarkDecorator) -> None:
    """Add ``marks`` to every collected test under ``folder`` (called by that folder's conftest)."""
    for item in items:
        if folder in item.path.parents:
            for mark in marks:
                item.add_marker(mark)


class ProcessAudit:
    """Hears, through an audit hook, the processes started while an unmarked test runs."""

    def __init__(self) -> None:
        self._started: list[str] | None = None
        sys.addaudithook(self._hear)  # audit hooks cannot be removed: one for the whole run

    def _hear(self, event: str, args: tuple[object, ...]) -> None:
        if self._started is not None and event in _STARTING_A_PROCESS:
            self._started.append(f"{event}: {str(args[:2])[:200]}")

    @contextmanager
    def listening(self) -> Iterator[list[str]]:
        """The processes started inside the block, as one line each."""
        started: list[str] = []
        self._started = started
        try:
            yield started
        finally:
            self._started = None

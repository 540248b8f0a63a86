"""What only the domain can see, reported through a hook so the domain imports no metrics library.

The composition passes an implementation that counts (``metrics.Metrics``); the
default does nothing.
"""

from __future__ import annotations

from typing import Literal, Protocol

ResetReason = Literal["lagged", "history"]
"""``lagged``: a watcher's buffer overflowed; ``history``: a resume revision could not be bridged."""

ConflictReason = Literal["expected_revision"]
"""``expected_revision``: answered ABORTED. (Stores apply writes atomically: no other conflict exists.)"""


class BookObserver(Protocol):
    def watch_reset(self, reason: ResetReason) -> None: ...

    def write_conflict(self, reason: ConflictReason) -> None: ...


class NoObserver:
    def watch_reset(self, reason: ResetReason) -> None:
        pass

    def write_conflict(self, reason: ConflictReason) -> None:
        pass

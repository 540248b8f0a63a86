"""The changes kept for resuming: the feed (for WatchChanges) and each session's history (for
WatchTodos), each change counted once against the history's share of the memory budget."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Mapping

from sessiontodo_server.domain.budget import Held
from sessiontodo_server.domain.values import Change
from sessiontodo_server.stores.session_record import SessionRecord

log = logging.getLogger(__name__)

FEED_PURGE_BYTES = 1 << 20
"""A removed session whose changes in the feed hold more than this has them dropped at once."""


class RetainedChanges:
    def __init__(
        self, records: Mapping[str, SessionRecord], *, history_limit: int, feed_limit: int, budget_bytes: int
    ) -> None:
        self._records = records
        self._history_limit = history_limit
        self._feed_limit = feed_limit
        self._budget_bytes = budget_bytes
        self._held = Held(ordered=True)
        self._feed: deque[Change] = deque()
        self._feed_floor = 0
        """Changes at or below this cursor may be missing from the feed (a removed session's)."""

    @property
    def bytes(self) -> int:
        return self._held.bytes

    def keep_in_history(self, record: SessionRecord, change: Change) -> None:
        if not self._history_limit:
            return
        if record.history is None:
            record.history = deque()
        record.history.append(change)
        self._held.hold(change)
        if len(record.history) > self._history_limit:
            self._held.release(record.history.popleft())

    def append_to_feed(self, change: Change) -> None:
        """Append, then let go of the oldest changes beyond the count and the budget's share
        (from the feed and their session's history alike)."""
        self._feed.append(change)
        self._held.hold(change)
        if len(self._feed) > self._feed_limit:
            self._held.release(self._feed.popleft())
        while self._held.bytes > self._budget_bytes and (oldest := self._held.oldest()) is not None:
            if self._feed and self._feed[0] is oldest:
                self._held.release(self._feed.popleft())
            record = self._records.get(oldest.session_id)
            if record is not None and record.history and record.history[0] is oldest:
                self._held.release(record.history.popleft())
            if oldest in self._held:  # held elsewhere than at a front: never expected, never loop on it
                log.error("retained change %s@%d is at no front; trimming stopped", oldest.session_id, oldest.revision)
                return

    def forget_histories(self, gone: Mapping[str, SessionRecord]) -> None:
        """Removed sessions: their histories go. Their changes in the feed go too when they are big
        (``FEED_PURGE_BYTES``: their history is gone); smaller ones stay for resuming feeds until
        the feed moves past them."""
        for record in gone.values():
            for change in record.history or ():
                self._held.release(change)
        if sum(self._held.size(change) for change in self._feed if change.session_id in gone) <= FEED_PURGE_BYTES:
            return
        kept: deque[Change] = deque()
        for change in self._feed:
            if change.session_id in gone:
                self._held.release(change)
                self._feed_floor = max(self._feed_floor, change.cursor)
            else:
                kept.append(change)
        self._feed = kept

    def feed_after(self, cursor: int, durable_cursor: int) -> list[Change] | None:
        """The feed's changes after ``cursor``; None when some of them are no longer kept."""
        if cursor > durable_cursor or cursor < self._feed_floor:
            return None
        missed = durable_cursor - cursor
        if missed > len(self._feed):
            return None
        return list(self._feed)[len(self._feed) - missed :] if missed else []

    @staticmethod
    def history_after(record: SessionRecord, revision: int) -> list[Change] | None:
        """The session's changes after ``revision``; None when some of them are no longer kept."""
        if revision > record.revision:
            return None
        history = record.history or ()
        if revision < record.revision - len(history):
            return None
        return list(history)[len(history) - (record.revision - revision) :]

"""WatchTodos and WatchChanges in domain terms: a snapshot or the missed changes, then the live
changes the ``WatchHub`` hands over, PROGRESS while quiet, RESET when history ran out or a
watcher lagged. The contract, message by message, is written on the rpcs in the proto."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass

from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.errors import InvalidArgument, Unavailable
from sessiontodo_server.domain.observer import BookObserver, NoObserver, ResetReason
from sessiontodo_server.domain.store import SessionState, TodoStore
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, SessionFilter
from sessiontodo_server.domain.watch import Subscription, WatchHub


@dataclass(frozen=True, slots=True)
class FeedMessage:
    """One message of ``WatchChanges``: a change and the cursor to resume after it ("" for none)."""

    change: Change
    cursor: str


class TodoStreams:
    """The streaming side of the service, over the book (for reads and their checks) and the hub."""

    def __init__(
        self,
        book: TodoBook,
        store: TodoStore,
        hub: WatchHub,
        limits: Limits,
        *,
        progress_interval: float,
        observer: BookObserver | None = None,
    ) -> None:
        self._book = book
        self._store = store
        self._hub = hub
        self._limits = limits
        self._progress_interval = progress_interval
        self._observer = observer or NoObserver()

    async def watch(self, session_id: str, after_revision: int | None) -> AsyncGenerator[Change, None]:
        """The session's change feed, as documented on ``WatchTodos`` in the proto."""
        ops.check_session_id(session_id, self._limits)
        await self._book.get(session_id)  # NOT_FOUND before taking a watcher slot
        subscription = self._hub.subscribe(session_id)  # before reading: nothing slips between
        try:
            state = await self._book.get(session_id)
            if after_revision is None:
                first = [_whole(state, ChangeKind.SNAPSHOT)]
            elif after_revision == state.revision:
                first = []
            else:
                missed = await self._store.changes_after(session_id, after_revision)
                if missed is None:
                    self._observer.watch_reset("history")
                first = missed if missed is not None else [_whole(state, ChangeKind.RESET)]
            last = first[-1].revision if first else state.revision
            for change in first:
                yield self._hub.hand_over(subscription, change)
            while True:
                if not await subscription.wait(self._progress_interval):
                    yield self._hub.hand_over(subscription, Change(session_id, ChangeKind.PROGRESS, last))
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
                    yield self._hub.hand_over(subscription, change)
                    last = change.revision
                if isinstance(subscription.closed, Change):  # removed: the store holds nothing of ours
                    yield self._hub.hand_over(subscription, subscription.closed)
                    return
                if lagged and (latest := await self._store.get(session_id)) and latest.revision > last:
                    self._observer.watch_reset("lagged")
                    yield self._hub.hand_over(subscription, _whole(latest, ChangeKind.RESET))
                    last = latest.revision
        finally:
            self._hub.unsubscribe(subscription)

    async def feed(
        self, after_cursor: str, include_snapshot: bool, only: SessionFilter
    ) -> AsyncGenerator[FeedMessage, None]:
        """Every matching session's changes, as documented on ``WatchChanges`` in the proto."""
        resume = self._parse_cursor(after_cursor)
        if violations := self._book.filter_violations(only, "filter."):
            raise InvalidArgument(violations)
        subscription = self._hub.subscribe_feed(only)  # before reading: nothing slips between
        try:
            missed = await self._store.feed_after(resume) if resume is not None and resume >= 0 else None
            if missed is not None:
                last = resume or 0
                for change in missed:
                    if only.shows(change):
                        shown = self._hub.hand_over(subscription, _as_shown(change, only))
                        yield FeedMessage(shown, self._cursor(change.cursor))
                    last = change.cursor
            elif resume is not None or include_snapshot:
                last = 0
                async for message in self._feed_snapshot(only, reset="history" if resume is not None else None):
                    self._hub.hand_over(subscription, message.change)
                    yield message
                    last = message.change.cursor
            else:
                last = self._hub.position
            async for message in self._feed_changes(subscription, only, last):
                self._hub.hand_over(subscription, message.change)
                yield message
        finally:
            self._hub.unsubscribe(subscription)

    async def _feed_changes(
        self, subscription: Subscription, only: SessionFilter, last: int
    ) -> AsyncGenerator[FeedMessage, None]:
        while True:
            if not await subscription.wait(self._progress_interval):
                last = max(last, self._hub.position)  # nothing pending: every change up to there was seen
                yield FeedMessage(Change("", ChangeKind.PROGRESS, 0, cursor=last), self._cursor(last))
                continue
            if isinstance(subscription.closed, Unavailable):
                raise subscription.closed
            lagged = subscription.lagged
            for change in subscription.drain():
                if change.cursor > last:
                    yield FeedMessage(_as_shown(change, only), self._cursor(change.cursor))
                    last = change.cursor
            if lagged:
                async for message in self._feed_snapshot(only, reset="lagged"):
                    yield message
                    last = message.change.cursor

    async def _feed_snapshot(
        self, only: SessionFilter, reset: ResetReason | None = None
    ) -> AsyncGenerator[FeedMessage, None]:
        """One SNAPSHOT per matching session, then the PROGRESS bookmark carrying the snapshot's cursor;
        after a RESET marker when the snapshot replaces what the feed held (``reset`` says why)."""
        if reset:
            self._observer.watch_reset(reset)
            yield FeedMessage(Change("", ChangeKind.RESET, 0), "")
        cursor, states = await self._store.snapshot(only.tenant)
        for state in states:
            if only.matches(state.session_id, state.info):
                yield FeedMessage(_whole(state, ChangeKind.SNAPSHOT), "")
        yield FeedMessage(Change("", ChangeKind.PROGRESS, 0, cursor=cursor), self._cursor(cursor))

    def _cursor(self, position: int) -> str:
        return f"{self._store.feed_epoch}.{position}"

    def _parse_cursor(self, cursor: str) -> int | None:
        """The position of a cursor; -1 for one from another store (never resumable); None for none."""
        if not cursor:
            return None
        epoch, _, position = cursor.rpartition(".")
        if not epoch or not (position.isascii() and position.isdigit()):  # "²" is a digit to isdigit(), not to int()
            raise InvalidArgument([("after_cursor", "is not a cursor this service issued")])
        return int(position) if epoch == self._store.feed_epoch else -1


def _as_shown(change: Change, only: SessionFilter) -> Change:
    """A change as a feed with filter ``only`` shows it (which ``only.shows``): itself, or the
    SESSION_LEFT_VIEW of a session whose labels no longer match."""
    if not only.leaves_view(change):
        return change
    return Change(
        change.session_id,
        ChangeKind.SESSION_LEFT_VIEW,
        change.revision,
        info=change.info,
        origin=change.origin,
        cursor=change.cursor,
    )


def _whole(state: SessionState, kind: ChangeKind) -> Change:
    """A message carrying a session's whole state: SNAPSHOT or RESET."""
    return Change(state.session_id, kind, state.revision, state.todos, info=state.info)

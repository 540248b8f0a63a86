"""The board: ONE ``WatchChanges`` feed of sessiontodo, held as every session's state, fanned out to pages.

- The feed starts with a snapshot of every session (the token's tenant's); the board replaces its
  state with it at the bookmark that ends it, and then applies each change. A RESET from
  sessiontodo (history lost, another server) is applied the same way: pages get a ``reset``.
- Every change becomes one SSE frame, encoded once, whose id is the change's feed cursor. The last
  ``resume_window`` frames are kept: a page reconnecting with ``Last-Event-ID`` gets exactly the
  frames after its cursor, or the whole board (``reset``) when its cursor is not among them (too
  old, or from before a restart or a RESET), so nothing is missed and nothing arrives twice.
- When the feed's stream ends (sessiontodo stopped, restarted, crashed), pages are told at once that
  it is unreachable, and live again when the client's new stream is accepted (it reconnects and
  resumes by cursor). sessiontodo also sends PROGRESS on a quiet feed: a stream that stays open but
  brings nothing for ``feed_timeout`` seconds (a silent network) is unreachable too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime

from sessiontodo_client import (
    ChangeKind,
    Connection,
    ConnectionState,
    FeedEvent,
    NotFound,
    ServiceError,
    Session,
    Todo,
    TodoClient,
)
from sessiontodo_web.changes import describe
from sessiontodo_web.models import (
    BoardView,
    ChangeEvent,
    ChangeView,
    FeedState,
    FeedStatus,
    RemovedEvent,
    SessionDetail,
    SessionView,
    todo_views,
)
from sessiontodo_web.pages import PageStream, frame

log = logging.getLogger(__name__)

RETRY_DELAY = 1.0
"""Seconds before the feed is opened again after an error the client does not retry (e.g. a bad token)."""


@dataclass
class SessionState:
    """One session as the feed last reported it, and the changes the board saw."""

    session: Session
    todos: list[Todo]
    changes: deque[ChangeView]
    origin: str = ""

    def view(self) -> SessionView:
        return SessionView.of(self.session, self.todos, self.origin)


@dataclass
class _Snapshot:
    """Sessions received since a snapshot started, until its bookmark."""

    sessions: dict[str, FeedEvent] = field(default_factory=dict)


class Board:
    """Every session of one sessiontodo service (as ``client``'s token sees it), live.

    Use as ``async with Board(client) as board`` (or ``start()`` / ``aclose()``).
    """

    def __init__(
        self,
        client: TodoClient,
        *,
        resume_window: int = 10_000,
        changes_per_session: int = 50,
        subscriber_buffer: int = 1024,
        feed_timeout: float = 30.0,
        ready_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._changes_per_session = changes_per_session
        self._subscriber_buffer = subscriber_buffer
        self._feed_timeout = feed_timeout
        self._ready_timeout = ready_timeout
        self._clock = clock
        self._sessions: dict[str, SessionState] = {}
        self._cursor = ""
        """The feed position the sessions are at."""
        self._sequence = 0
        """How many change frames were published: a frame's number is its place in the stream."""
        self._recent: deque[tuple[int, bytes]] = deque(maxlen=resume_window)
        """(number, frame) of the last frames, for pages that resume."""
        self._positions: OrderedDict[str, int] = OrderedDict()
        """Cursor → the number of the last frame at or before it, for every cursor still resumable."""
        self._pages: set[PageStream] = set()
        self._whole_board_frames: bytes | None = None
        self._state: FeedState = "loading"
        self._last_message = clock()
        self._loaded = asyncio.Event()
        self._progressed = asyncio.Event()
        self._running: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Board:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Open the feed and wait (at most ``ready_timeout``) for its snapshot."""
        self._running = asyncio.get_running_loop().create_task(self._run())
        try:
            await asyncio.wait_for(self._loaded.wait(), self._ready_timeout)
        except TimeoutError:
            log.warning("sessiontodo's feed has not delivered its snapshot yet; pages wait for it")

    async def aclose(self) -> None:
        for page in self._pages:
            page.close()
        if self._running is not None:
            self._running.cancel()
            await asyncio.gather(self._running, return_exceptions=True)

    # What pages and answers read

    @property
    def state(self) -> FeedState:
        return self._state

    @property
    def page_count(self) -> int:
        return len(self._pages)

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    async def loaded(self) -> None:
        """Return once the board holds a whole snapshot."""
        await self._loaded.wait()

    def board_view(self) -> BoardView:
        return BoardView(cursor=self._cursor, sessions=[state.view() for state in self._sessions.values()])

    def detail(self, session_id: str) -> SessionDetail | None:
        state = self._sessions.get(session_id)
        if state is None:
            return None
        return SessionDetail(session=state.view(), todos=todo_views(state.todos), changes=list(state.changes))

    async def read(self, session_id: str) -> SessionDetail | None:
        """The session as of now (None if sessiontodo or the board does not hold it): its revision is read from
        sessiontodo, and the answer waits until the feed has delivered it, so a read made after a write
        acknowledged anywhere shows that write or a newer one, never the list before it."""
        try:
            revision = (await self._client.get_session(session_id)).revision
        except NotFound:
            return None
        await self.delivered(session_id, revision)
        return self.detail(session_id)

    def todos(self, session_id: str) -> tuple[int, list[Todo]] | None:
        """The session's revision and list as the board holds them."""
        state = self._sessions.get(session_id)
        return None if state is None else (state.session.revision, state.todos)

    async def delivered(self, session_id: str, revision: int) -> None:
        """Wait (at most ``ready_timeout``) until the board holds ``revision`` of the session (or a later one)."""

        def reached() -> bool:
            state = self._sessions.get(session_id)
            return state is not None and state.session.revision >= revision

        try:
            async with asyncio.timeout(self._ready_timeout):
                while not reached():
                    await self._progressed.wait()
        except TimeoutError:
            log.warning("sessiontodo's feed has not delivered revision %d of %s in time", revision, session_id)

    @contextmanager
    def subscribe(self, last_event_id: str | None = None) -> Iterator[PageStream]:
        """The frames for one page: those after ``last_event_id`` if the board still has them all, else the
        whole board first. Call once ``loaded()``."""
        position = self._positions.get(last_event_id) if last_event_id else None
        oldest = self._recent[0][0] if self._recent else self._sequence + 1
        page = PageStream(self._subscriber_buffer, self._whole_board, [self._status_frame()])
        if position is None or position < oldest - 1:
            page.fall_behind()
        else:
            for number, data in self._recent:
                if number > position:
                    page.push(data)
        self._pages.add(page)
        try:
            yield page
        finally:
            self._pages.discard(page)

    def _whole_board(self) -> bytes:
        """The ``reset`` and ``feed`` frames, encoded once for every page that needs them until anything changes
        (after a RESET, every page at once)."""
        if self._whole_board_frames is None:
            self._whole_board_frames = frame("reset", self.board_view(), self._cursor) + self._status_frame()
        return self._whole_board_frames

    def _status_frame(self) -> bytes:
        return frame("feed", FeedStatus(state=self._state))

    # Following the feed

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._follow())
            tasks.create_task(self._watch_the_clock())

    async def _follow(self) -> None:
        """Apply the feed for as long as the board runs; the client resumes it across reconnects."""
        while True:
            try:
                await self._apply_feed()
            except ServiceError as error:
                log.warning("sessiontodo's feed failed (%s); opening it again", error)
                await asyncio.sleep(RETRY_DELAY)

    async def _apply_feed(self) -> None:
        snapshot: _Snapshot | None = None if self._loaded.is_set() else _Snapshot()
        feed = self._client.watch_changes(
            self._cursor or None,
            include_snapshot=not self._cursor,
            include_progress=True,
            on_connection=self._feed_connection,
        )
        try:
            async for event in feed:
                self._heard_from_sessiontodo()
                if event.kind is ChangeKind.RESET:
                    snapshot = _Snapshot()
                elif event.kind is ChangeKind.SNAPSHOT:
                    assert snapshot is not None, "a SNAPSHOT outside a snapshot"
                    snapshot.sessions[event.session_id] = event
                elif event.kind is ChangeKind.PROGRESS:
                    if snapshot is not None:
                        self._replace(snapshot, event.cursor)
                        snapshot = None
                    else:
                        self._cursor = event.cursor
                        self._remember_position(event.cursor)
                else:
                    self._apply_change(event)
                self._wake()
        finally:
            await feed.aclose()

    def _replace(self, snapshot: _Snapshot, cursor: str) -> None:
        """Take a whole snapshot as the board, and send it to every page (they drop what they held)."""
        before = self._sessions
        self._sessions = {}
        for session_id, event in snapshot.sessions.items():
            assert event.session is not None
            known = before.get(session_id)
            self._sessions[session_id] = SessionState(
                event.session,
                event.todos,
                known.changes if known else deque(maxlen=self._changes_per_session),
                known.origin if known else "",
            )
        self._cursor = cursor
        self._recent.clear()
        self._positions.clear()
        self._remember_position(cursor)
        self._loaded.set()
        for page in self._pages:
            page.fall_behind()
        log.info("following %d sessions", len(self._sessions))

    def _apply_change(self, event: FeedEvent) -> None:
        state = self._sessions.get(event.session_id)
        removed = event.kind is ChangeKind.SESSION_REMOVED
        change = ChangeView(
            revision=event.revision,
            origin=event.origin,
            time=datetime.now(UTC) if removed or event.session is None else event.session.updated_at,
            kind=event.kind.value,
            todo_id=event.todo_id,
            summary=describe(event, state.todos if state else [], state.session.labels if state else {}),
        )
        if removed:
            self._sessions.pop(event.session_id, None)
            self._publish("removed", RemovedEvent(session_id=event.session_id, change=change), event.cursor)
            return
        assert event.session is not None, f"a {event.kind} without its session"
        if state is None:
            state = SessionState(event.session, [], deque(maxlen=self._changes_per_session))
            self._sessions[event.session_id] = state
        state.session = event.session
        state.todos = event.todos  # every change but a removal carries the whole list after it
        state.origin = event.origin
        state.changes.append(change)
        data = ChangeEvent(session=state.view(), todos=todo_views(state.todos), change=change)
        self._publish("change", data, event.cursor)

    def _publish(self, event: str, data: ChangeEvent | RemovedEvent, cursor: str) -> None:
        self._cursor = cursor
        self._sequence += 1
        encoded = frame(event, data, cursor)
        self._recent.append((self._sequence, encoded))
        self._remember_position(cursor)
        for page in self._pages:
            page.push(encoded)

    def _remember_position(self, cursor: str) -> None:
        self._whole_board_frames = None  # every new position comes with a new cursor or new sessions
        self._positions[cursor] = self._sequence
        self._positions.move_to_end(cursor)
        oldest = self._recent[0][0] if self._recent else self._sequence
        while self._positions and next(iter(self._positions.values())) < oldest - 1:
            self._positions.popitem(last=False)

    # Is sessiontodo there?

    def _feed_connection(self, connection: Connection) -> None:
        """The feed's stream broke: pages hear it at once (not after ``feed_timeout`` of silence), and hear
        it is back as soon as sessiontodo takes the new stream."""
        if not self._loaded.is_set():
            return
        if connection.state is ConnectionState.RECONNECTING and self._state == "live":
            log.warning("sessiontodo's feed broke (%s): telling pages it is unreachable", connection.error)
            self._set_state("unreachable")
        elif connection.state is ConnectionState.RESUMED:
            self._heard_from_sessiontodo()

    def _heard_from_sessiontodo(self) -> None:
        self._last_message = self._clock()
        if self._state == "unreachable" and self._loaded.is_set():
            self._set_state("live")

    async def _watch_the_clock(self) -> None:
        """Tell pages when sessiontodo has been silent too long, and when the snapshot is in."""
        await self._loaded.wait()
        self._set_state("live")
        while True:
            silent_for = self._clock() - self._last_message
            if self._state == "live" and silent_for > self._feed_timeout:
                log.warning("no message from sessiontodo for %.0f s: telling pages it is unreachable", silent_for)
                self._set_state("unreachable")
            remaining = self._feed_timeout - silent_for
            # Back to "live" happens as soon as a message arrives (_heard_from_sessiontodo), not here.
            await asyncio.sleep(remaining + 0.05 if remaining > 0 else self._feed_timeout / 2)

    def _set_state(self, state: FeedState) -> None:
        self._state = state
        self._whole_board_frames = None
        status = self._status_frame()
        for page in self._pages:
            page.push(status)

    def _wake(self) -> None:
        self._progressed.set()
        self._progressed = asyncio.Event()

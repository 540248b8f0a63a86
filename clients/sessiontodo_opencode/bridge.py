"""TodoBridge: sessiontodo's sessions and lists as OpenCode sessions, todos and bus events.

An OpenCode-compatible server embeds one bridge over an injected ``TodoClient``. The bridge
follows ONE server-wide ``WatchChanges`` feed (never a watch per session): its snapshot
gives the current sessions, and every later change becomes an OpenCode event
(``session.created`` / ``session.updated`` / ``session.deleted`` with the full Session,
``todo.updated`` with the full list), whichever client of the service made it. Events go
through ``fanout`` to subscribers, each through its own bounded buffer.

Calls that change something answer once the feed has delivered their change, so the event
is already in every subscription's buffer when the HTTP answer leaves.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import grpc

from sessiontodo_client import ChangeKind, FeedEvent, NotFound, ServiceError, TodoClient, __version__
from sessiontodo_client import Session as ServiceSession
from sessiontodo_client import Todo as ServiceTodo
from sessiontodo_client.plans import replace_plan
from sessiontodo_opencode.fanout import FanOut, Subscription
from sessiontodo_opencode.models import (
    BusEvent,
    ModelRef,
    Project,
    ProjectTime,
    Session,
    SessionCreated,
    SessionDeleted,
    SessionEvent,
    SessionProperties,
    SessionUpdated,
    Todo,
    TodoUpdated,
)
from sessiontodo_opencode.translate import (
    DIRECTORY,
    PROJECT,
    TITLE,
    milliseconds,
    plan_to_service,
    run_labels,
    session_info,
    todo_updated,
    todos_from_service,
)

log = logging.getLogger(__name__)

GLOBAL_SESSION_ID = "sessiontodo:global"
"""The service's sessionless list: not an OpenCode session."""
ORIGIN = "opencode-sidecar"
"""The origin of the bridge's writes, as the service's watchers see it."""
RETRY_DELAY = 1.0
"""Seconds before the feed is opened again after an unexpected error."""


class TodoBridge:
    """Sessions, lists and events of OpenCode, backed by one sessiontodo service.

    ``directory`` and ``project`` are this instance's (sessions without those labels belong
    to it, as upstream's ``/event`` belongs to the directory it serves). Use as
    ``async with TodoBridge(client, …) as bridge`` (or ``start()`` / ``aclose()``).
    """

    def __init__(
        self,
        client: TodoClient,
        *,
        directory: str,
        project: str = "global",
        version: str = f"sessiontodo-{__version__}",
        subscriber_buffer: int = 1024,
        catch_up_window: float = 2.0,
        ready_timeout: float = 10.0,
    ) -> None:
        self._client = client
        self.directory = directory
        self.project = project
        self.version = version
        self._started_at = milliseconds(datetime.now(UTC))
        self._ready_timeout = ready_timeout
        self._fan_out = FanOut[BusEvent](subscriber_buffer=subscriber_buffer, catch_up_window=catch_up_window)
        self._sessions: dict[str, ServiceSession] = {}
        """Every session as the feed last reported it."""
        self._loaded = asyncio.Event()
        self._progressed = asyncio.Event()
        self._following: asyncio.Task[None] | None = None

    async def __aenter__(self) -> TodoBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Open the feed and wait (at most ``ready_timeout``) for its snapshot of every session."""
        self._following = asyncio.get_running_loop().create_task(self._follow())
        try:
            await asyncio.wait_for(self._loaded.wait(), self._ready_timeout)
        except TimeoutError:
            log.warning("the sessiontodo feed has not delivered its snapshot yet; serving meanwhile")

    async def aclose(self) -> None:
        self._fan_out.close()
        if self._following is not None:
            self._following.cancel()
            await asyncio.gather(self._following, return_exceptions=True)

    @property
    def subscriber_count(self) -> int:
        return self._fan_out.subscriber_count

    @property
    def session_count(self) -> int:
        return len(self._sessions)

    # Sessions

    def info(self, session: ServiceSession) -> Session:
        return session_info(
            session, default_directory=self.directory, default_project=self.project, version=self.version
        )

    def directory_of(self, session: ServiceSession) -> str:
        return session.labels.get(DIRECTORY) or self.directory

    async def create_session(
        self,
        session_id: str = "",
        parent_id: str = "",
        *,
        title: str | None = None,
        directory: str | None = None,
        agent: str | None = None,
        model: ModelRef | None = None,
    ) -> Session:
        """Create the session (or get the existing one); an empty id is generated."""
        labels = {DIRECTORY: directory or self.directory, PROJECT: self.project} | ({TITLE: title} if title else {})
        labels |= run_labels(agent, model)
        session, _ = await self._client.create_session(session_id, parent_id, labels=labels, origin=ORIGIN)
        await self._delivered(session.session_id, session.revision)
        return self.info(session)

    async def get_session(self, session_id: str) -> Session:
        """Raises ``NotFound`` for an unknown session."""
        return self.info(await self._client.get_session(self._opencode_id(session_id)))

    async def list_sessions(self, directory: str | None = None) -> list[Session]:
        """Every session of ``directory`` (None: of any), most recently updated first."""
        return self._newest_first(
            session for session in await self._client.list_sessions() if directory in (None, self.directory_of(session))
        )

    async def list_project_sessions(self, directory: str) -> list[Session]:
        """Every session of the directory's project, in any directory, most recently updated first."""
        sessions = await self._client.list_sessions()
        project_id = self._project_id_of_directory(directory, sessions)
        return self._newest_first(session for session in sessions if self._project_of(session) == project_id)

    async def children(self, session_id: str) -> list[Session]:
        """The session's children, most recently updated first. Raises ``NotFound`` for an unknown session."""
        await self._client.get_session(self._opencode_id(session_id))
        return self._newest_first(await self._client.list_sessions(parent_id=session_id))

    def _newest_first(self, sessions: Iterable[ServiceSession]) -> list[Session]:
        listed = [session for session in sessions if session.session_id != GLOBAL_SESSION_ID]
        listed.sort(key=lambda session: milliseconds(session.updated_at), reverse=True)
        return [self.info(session) for session in listed]

    # Projects

    async def projects(self) -> list[Project]:
        """Every project a session names (and this instance's), read from sessiontodo.

        A project's worktree is this instance's directory for its own project, else the directory of
        its oldest session; its times span its sessions'.
        """
        sessions: dict[str, list[ServiceSession]] = {self.project: []}
        for session in await self._client.list_sessions():
            sessions.setdefault(self._project_of(session), []).append(session)
        return [self._project(project_id, members) for project_id, members in sorted(sessions.items())]

    async def project_of_directory(self, directory: str) -> Project:
        """The project of the directory's most recently updated session (this instance's if it has none),
        with the directory as its worktree, as upstream's instance for that directory sees it.

        Read from sessiontodo, not the feed's copy: a session created a moment ago counts.
        """
        sessions = await self._client.list_sessions()
        project_id = self._project_id_of_directory(directory, sessions)
        project = self._project(project_id, [s for s in sessions if self._project_of(s) == project_id])
        return project.model_copy(update={"worktree": directory})

    def _project_id_of_directory(self, directory: str, sessions: Sequence[ServiceSession]) -> str:
        """The project of the directory's most recently updated session; this instance's if it has none."""
        members = [session for session in sessions if self.directory_of(session) == directory]
        newest = max(members, key=lambda session: milliseconds(session.updated_at), default=None)
        return self.project if newest is None else self._project_of(newest)

    def _project(self, project_id: str, members: Sequence[ServiceSession]) -> Project:
        if project_id == self.project or not members:
            worktree = self.directory
        else:
            worktree = self.directory_of(min(members, key=lambda session: milliseconds(session.created_at)))
        created = min((milliseconds(session.created_at) for session in members), default=self._started_at)
        updated = max((milliseconds(session.updated_at) for session in members), default=self._started_at)
        return Project(id=project_id, worktree=worktree, time=ProjectTime(created=created, updated=updated))

    async def rename_session(self, session_id: str, title: str) -> Session:
        """Set the title; upstream answers (and publishes ``session.updated``) even when nothing changed."""
        session, changed = await self._client.update_session(
            self._opencode_id(session_id), labels={TITLE: title}, origin=ORIGIN
        )
        if changed:
            await self._delivered(session_id, session.revision)
        else:
            self._publish(self._session_event(SessionUpdated, session))
        return self.info(session)

    async def delete_session(self, session_id: str) -> bool:
        """Remove the session and its children (``session.deleted`` for each); False if it did not exist."""
        removed = await self._client.remove_session(self._opencode_id(session_id), origin=ORIGIN)
        await self._until(lambda: not any(removed_id in self._sessions for removed_id in removed))
        return bool(removed)

    # Lists

    async def get_todos(self, session_id: str) -> list[Todo]:
        """The session's list, in order. Raises ``NotFound`` for an unknown session.

        The answer waits until the feed has delivered the revision read, so events published
        later are never older than the answer.
        """
        todo_list = await self._client.get_todos(self._opencode_id(session_id))
        await self._delivered(session_id, todo_list.revision)
        return todos_from_service(todo_list.todos)

    async def write_todos(self, session_id: str, todos: Sequence[Todo]) -> list[Todo]:
        """Replace the session's whole list (OpenCode's ``todowrite``); returns it as stored.

        Like upstream, a ``todo.updated`` follows every write, also one that changed nothing.
        OpenCode's todos have no owners or dependencies: each keeps those of the stored todo it
        continues (same id, else same content; ``sessiontodo_client.plans``), and its id.
        Raises ``InvalidArgument`` (nothing changed) or ``NotFound``.
        """
        read_at, written = await replace_plan(
            self._client, self._opencode_id(session_id), lambda stored: plan_to_service(todos, stored), origin=ORIGIN
        )
        await self._delivered(session_id, written.revision)  # a session created a moment ago is known then
        if written.revision == read_at and (session := self._sessions.get(session_id)) is not None:
            self._publish(self._todos_event(session, written.todos))
        return todos_from_service(written.todos)

    # Events

    @contextmanager
    def subscribe(
        self, directory: str | None = None, session_id: str | None = None
    ) -> Iterator[Subscription[BusEvent]]:
        """Events of the sessions of ``directory`` (None: every directory), or of one session.

        No replay of the past but the changes of the catch-up window (see ``fanout``); once
        the bridge is closed, subscriptions end at once.
        """

        def follows(event: BusEvent) -> bool:
            return directory in (None, event.directory) and session_id in (None, event.session_id)

        with self._fan_out.subscribe(follows) as subscription:
            yield subscription

    def _publish(self, event: BusEvent) -> None:
        self._fan_out.publish(event)

    def _session_event(
        self, kind: type[SessionEvent], session: ServiceSession, revision: int | None = None
    ) -> BusEvent:
        """The event; ``revision``: the session's at the event (its last known one if None)."""
        properties = SessionProperties(sessionID=session.session_id, info=self.info(session))
        return kind(
            properties=properties,
            directory=self.directory_of(session),
            project=self._project_of(session),
            seq=session.revision if revision is None else revision,
        )

    def _todos_event(self, session: ServiceSession, todos: Iterable[ServiceTodo]) -> TodoUpdated:
        return todo_updated(session.session_id, todos, self.directory_of(session), self._project_of(session))

    def _project_of(self, session: ServiceSession) -> str:
        return session.labels.get(PROJECT) or self.project

    # The feed

    async def _follow(self) -> None:
        """Apply the feed for as long as the bridge runs; the client resumes it across reconnects."""
        while True:
            try:
                await self._apply_feed()
            except ServiceError as error:
                log.warning("the sessiontodo feed failed (%s); opening it again", error)
                await asyncio.sleep(RETRY_DELAY)

    async def _apply_feed(self) -> None:
        before_reset: dict[str, ServiceSession] | None = None
        snapshot: dict[str, FeedEvent] = {}
        feed = self._client.watch_changes(include_snapshot=True, include_progress=True)
        try:
            async for event in feed:
                if event.session_id == GLOBAL_SESSION_ID:
                    continue
                if event.kind is ChangeKind.RESET:
                    before_reset = self._sessions if before_reset is None else before_reset
                    self._sessions, snapshot = {}, {}
                elif event.kind is ChangeKind.SNAPSHOT:
                    assert event.session is not None
                    self._sessions[event.session_id] = event.session
                    snapshot[event.session_id] = event
                elif event.kind is ChangeKind.PROGRESS:
                    if before_reset is not None:
                        self._publish_resync(before_reset, snapshot)
                        before_reset = None
                    snapshot = {}
                    self._loaded.set()
                else:
                    self._apply_change(event)
                self._wake()
        finally:
            await feed.aclose()

    def _apply_change(self, event: FeedEvent) -> None:
        if event.kind is ChangeKind.SESSION_REMOVED:
            known = self._sessions.pop(event.session_id, None) or event.session
            if known is not None:
                self._publish(self._session_event(SessionDeleted, known, event.revision))
            return
        session = event.session
        assert session is not None
        self._sessions[event.session_id] = session
        if event.kind is ChangeKind.SESSION_CREATED:
            self._publish(self._session_event(SessionCreated, session))
        elif event.kind is ChangeKind.SESSION_UPDATED:
            self._publish(self._session_event(SessionUpdated, session))
        else:
            self._publish(self._todos_event(session, event.todos))

    def _publish_resync(self, before: dict[str, ServiceSession], snapshot: dict[str, FeedEvent]) -> None:
        """After the feed started over: the events that turn what subscribers saw into what is."""
        for session_id, gone in before.items():
            if session_id not in self._sessions:
                self._publish(self._session_event(SessionDeleted, gone))
        for session_id, event in snapshot.items():
            session = self._sessions[session_id]
            old = before.get(session_id)
            if old is None:
                self._publish(self._session_event(SessionCreated, session))
            elif old.labels != session.labels:
                self._publish(self._session_event(SessionUpdated, session))
            if old is None or old.revision != session.revision:
                self._publish(self._todos_event(session, event.todos))

    def _wake(self) -> None:
        self._progressed.set()
        self._progressed = asyncio.Event()

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait (at most ``ready_timeout``) until the feed's state satisfies ``condition``."""
        try:
            async with asyncio.timeout(self._ready_timeout):
                while not condition():
                    await self._progressed.wait()
        except TimeoutError:
            log.warning("the sessiontodo feed has not delivered a change in %.1fs", self._ready_timeout)

    async def _delivered(self, session_id: str, revision: int) -> None:
        def reached() -> bool:
            session = self._sessions.get(session_id)
            return session is not None and session.revision >= revision

        await self._until(reached)

    @staticmethod
    def _opencode_id(session_id: str) -> str:
        """The id, unless it is the service's global list (no OpenCode session): then NotFound."""
        if session_id == GLOBAL_SESSION_ID:
            raise NotFound(grpc.StatusCode.NOT_FOUND, f"Session not found: {session_id}")
        return session_id

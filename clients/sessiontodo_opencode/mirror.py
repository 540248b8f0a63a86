"""The other direction: follow a real OpenCode server and mirror its sessions into sessiontodo.

``OpenCodeImporter`` reads OpenCode's ``/global/event`` stream (every directory's events) and
applies, one event at a time and in order: ``session.created`` / ``session.updated`` →
CreateSession / UpdateSession (labels ``title``, ``directory``, ``project``, ``slug``, and
``opencode.server`` naming the server); ``todo.updated`` → ReplaceTodos with the full list;
``session.deleted`` → RemoveSession. Every write carries origin ``opencode``.

Events missed while disconnected (an OpenCode restart, a network cut) are recovered by a
resync after every (re)connect, before any later event is applied: the sessions OpenCode
lists and the ones mirrored before are read again (``GET /session/{id}`` and
``/session/{id}/todo``); gone ones are removed. So an OpenCode restart loses nothing. What differs
from what sessiontodo holds is written in ``BatchWrite`` calls (``sessiontodo_opencode.batches``),
up to 1000 writes a call, a session created together with its list so it is never seen empty;
by single calls where a batch cannot carry it. OpenCode's ``todo.updated`` cannot be replayed,
and a connection it accepts while starting up may never be answered: a (re)connection that does
not deliver ``server.connected`` within ``connected_deadline`` is given up and made again, so
the resync comes within seconds.

A list equal to what sessiontodo holds is not written again. What sessiontodo holds is followed
on its feed (``WatchChanges`` of the imported sessions): a change another client made there is
known, so OpenCode's next list is written even when it equals the one imported before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from sessiontodo_client import (
    ChangeKind,
    CreateSessionWrite,
    FailedPrecondition,
    FeedEvent,
    NotFound,
    RemoveSessionWrite,
    ReplaceTodosWrite,
    RetryPolicy,
    ServiceError,
    TodoClient,
    Unavailable,
    UpdateSessionWrite,
    Write,
    WriteResult,
)
from sessiontodo_client import Session as ServiceSession
from sessiontodo_client.plans import replace_plan
from sessiontodo_opencode.batches import BatchWriter
from sessiontodo_opencode.models import Session, Todo
from sessiontodo_opencode.translate import (
    DIRECTORY,
    PROJECT,
    SLUG,
    TITLE,
    plan_to_service,
    run_labels,
    todo_to_service,
    todos_from_service,
)

log = logging.getLogger(__name__)

ORIGIN = "opencode"
SERVER_LABEL = "opencode.server"
"""The label naming the OpenCode server a mirrored session comes from."""

SILENCE_TIMEOUT = 30.0
"""Seconds without a byte after which the stream is opened again: OpenCode sends a heartbeat every 10 s."""
CONNECTED_DEADLINE = 5.0
"""Seconds a (re)connection gets to deliver ``server.connected`` (OpenCode sends it at once) before it is
given up and made again: a connection OpenCode accepted while starting up may never be answered."""
FEED_WAIT = 10.0
"""Seconds a resync waits for sessiontodo's feed to say what it holds; past that, lists are written anyway."""
MAX_TITLE = 1024
"""Characters of a title kept in its label (far below the service's label limit)."""
LISTED_PER_DIRECTORY = 1000
"""Sessions a resync asks OpenCode to list per directory (``limit``), most recently updated first:
OpenCode lists 100 unless told, and some of its versions refuse more than 1000."""

_TODOS = TypeAdapter(list[Todo])
_SESSIONS = TypeAdapter(list[Session])

TodoKey = tuple[tuple[str, str, str], ...]

_GONE = frozenset({ChangeKind.SESSION_REMOVED, ChangeKind.SESSION_LEFT_VIEW})
"""Feed messages after which the session is no longer among the imported ones (left: its label changed)."""
_WITH_THE_LIST = frozenset(
    {
        ChangeKind.SNAPSHOT,
        ChangeKind.SESSION_CREATED,
        ChangeKind.SESSION_UPDATED,
        ChangeKind.TODOS_REPLACED,
        ChangeKind.TODO_ADDED,
        ChangeKind.TODO_UPDATED,
        ChangeKind.TODO_REMOVED,
    }
)
"""Feed messages that carry the session's full list."""


def _key(todos: Iterable[Todo]) -> TodoKey:
    return tuple((todo.content, todo.status, todo.priority) for todo in todos)


@dataclass(frozen=True)
class _Held:
    """A session's list as sessiontodo holds it, at a revision."""

    key: TodoKey
    revision: int


class NotConnected(Exception):
    """OpenCode did not send ``server.connected`` in time on a new connection."""


def _reason(error: BaseException) -> str:
    """What went wrong, also for errors whose text is empty (httpx's timeouts)."""
    return str(error) or type(error).__name__


class OpenCodeImporter:
    """Imports one OpenCode server (``http``'s base URL) into the sessiontodo service behind ``client``:
    one way, OpenCode to sessiontodo (the sidecar serves the other way)."""

    def __init__(
        self,
        client: TodoClient,
        http: httpx.AsyncClient,
        *,
        retry: RetryPolicy = RetryPolicy(),
        connected_deadline: float = CONNECTED_DEADLINE,
        silence_timeout: float = SILENCE_TIMEOUT,
    ) -> None:
        self._client = client
        self._http = http
        self._retry = retry
        self._connected_deadline = connected_deadline
        self._silence_timeout = silence_timeout
        self._server = str(http.base_url).rstrip("/")
        self._held: dict[str, _Held] = {}
        """What sessiontodo holds of each imported session (from the feed and from the importer's own
        writes), so that a list it already holds is not written again."""
        self._feed_loaded = asyncio.Event()
        self.resyncs = 0
        """How many times the mirror re-read everything (once per (re)connect)."""
        self.skipped = 0
        """Events and sessions skipped because sessiontodo refused them or they were malformed."""

    async def run(self) -> None:
        """Follow the server and sessiontodo's feed for ever: reconnect with backoff, resync after every connect."""
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._follow_sessiontodo())
            tasks.create_task(self._follow_opencode())

    def held_revision(self, session_id: str) -> int | None:
        """sessiontodo's revision of an imported session as the importer last heard of it (None: unknown)."""
        held = self._held.get(session_id)
        return None if held is None else held.revision

    async def _follow_opencode(self) -> None:
        attempt = 0
        while True:
            try:
                async for event in self._events():
                    attempt = 0
                    async with self._skipping_refusals(f"event {event}"):
                        await self._apply(event)
                log.info("OpenCode's event stream ended; reconnecting")
            except (httpx.HTTPError, ServiceError, ValueError, NotConnected) as error:
                log.warning("mirroring %s interrupted: %s; reconnecting", self._server, _reason(error))
            await asyncio.sleep(self._retry.delay(attempt))
            attempt += 1

    async def _follow_sessiontodo(self) -> None:
        """Keep ``_held`` in step with sessiontodo: a snapshot of the imported sessions, then every change,
        whoever made it (the client resumes the feed across reconnects)."""
        attempt = 0
        while True:
            feed = self._client.watch_changes(
                include_snapshot=True, include_progress=True, labels={SERVER_LABEL: self._server}
            )
            try:
                async for event in feed:
                    attempt = 0
                    self._note(event)
            except ServiceError as error:
                log.warning("sessiontodo's feed failed (%s); opening it again", _reason(error))
            finally:
                await feed.aclose()
            await asyncio.sleep(self._retry.delay(attempt))
            attempt += 1

    def _note(self, event: FeedEvent) -> None:
        if event.kind is ChangeKind.RESET:
            self._held = {}
        elif event.kind is ChangeKind.PROGRESS:
            self._feed_loaded.set()
        elif event.kind in _GONE:
            self._held.pop(event.session_id, None)
        elif event.kind in _WITH_THE_LIST:
            self._hold(event.session_id, todos_from_service(event.todos), event.revision)

    def _hold(self, session_id: str, todos: Iterable[Todo], revision: int) -> None:
        held = self._held.get(session_id)
        if held is None or revision >= held.revision:
            self._held[session_id] = _Held(_key(todos), revision)

    @asynccontextmanager
    async def _skipping_refusals(self, what: str) -> AsyncIterator[None]:
        """Log and skip what sessiontodo refuses or OpenCode sent malformed: retrying cannot help.

        UNAVAILABLE and HTTP errors go on up: the mirror reconnects and resyncs.
        """
        try:
            yield
        except Unavailable:
            raise
        except (ServiceError, ValidationError, KeyError, TypeError) as error:
            self.skipped += 1
            log.warning("skipped %.200s: %s", what, error)

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        """``/global/event`` frames as dicts, ``server.connected`` first; raises ``NotConnected`` if the
        first frame does not come within ``connected_deadline``."""
        timeout = httpx.Timeout(10.0, read=self._silence_timeout)
        async with contextlib.AsyncExitStack() as stack:
            try:
                async with asyncio.timeout(self._connected_deadline):
                    response = await stack.enter_async_context(
                        self._http.stream("GET", "/global/event", timeout=timeout)
                    )
                    response.raise_for_status()
                    frames = _frames(response)
                    stack.push_async_callback(frames.aclose)
                    first = await anext(frames, None)
            except TimeoutError:
                raise NotConnected(f"no server.connected within {self._connected_deadline:g}s") from None
            if first is None:
                return
            yield first
            async for frame in frames:
                yield frame

    async def _apply(self, frame: Mapping[str, Any]) -> None:
        payload = frame.get("payload") or {}
        kind, properties = payload.get("type"), payload.get("properties") or {}
        if kind == "server.connected":
            await self.resync()
        elif kind in ("session.created", "session.updated"):
            await self._mirror_session(Session.model_validate(properties["info"]))
        elif kind == "session.deleted":
            await self._remove(properties["sessionID"])
        elif kind == "todo.updated":
            await self._mirror_todos(properties["sessionID"], _TODOS.validate_python(properties["todos"]), frame)

    # Sessions

    def _labels(self, session: Session) -> dict[str, str]:
        return {
            TITLE: session.title[:MAX_TITLE],
            DIRECTORY: session.directory,
            PROJECT: session.project_id,
            SLUG: session.slug,
            SERVER_LABEL: self._server,
        } | run_labels(session.agent, session.model, session.summary)

    async def _mirror_session(self, session: Session) -> None:
        labels = self._labels(session)
        try:
            mirrored, created = await self._client.create_session(
                session.id, session.parent_id or "", labels=labels, origin=ORIGIN
            )
        except (NotFound, FailedPrecondition):  # the parent is gone, or it moved: mirror it as a root
            mirrored, created = await self._client.create_session(session.id, labels=labels, origin=ORIGIN)
        if not created and any(mirrored.labels.get(key) != value for key, value in labels.items()):
            await self._client.update_session(session.id, labels=labels, origin=ORIGIN)

    async def _remove(self, session_id: str) -> None:
        for removed in await self._client.remove_session(session_id, origin=ORIGIN):
            self._held.pop(removed, None)

    # Lists

    async def _mirror_todos(self, session_id: str, todos: list[Todo], frame: Mapping[str, Any]) -> None:
        if session_id not in self._held:  # not known to be in sessiontodo: make sure it exists
            await self._ensure_session(session_id, frame.get("directory"))
        await self._write(session_id, todos)

    async def _ensure_session(self, session_id: str, directory: str | None) -> None:
        response = await self._http.get(f"/session/{session_id}", params=_directory(directory))
        if response.status_code == 200:
            await self._mirror_session(Session.model_validate_json(response.content))

    async def _write(self, session_id: str, todos: list[Todo]) -> None:
        """Replace the session's list, unless sessiontodo holds that list already; each todo keeps the owner
        and dependencies of the one it continues (``sessiontodo_client.plans``)."""
        held = self._held.get(session_id)
        if held is not None and held.key == _key(todos):
            return
        _, written = await replace_plan(
            self._client, session_id, lambda stored: plan_to_service(todos, stored), origin=ORIGIN
        )
        self._hold(session_id, todos_from_service(written.todos), written.revision)

    # Resync

    async def resync(self) -> None:
        """Make sessiontodo match OpenCode now: every listed session and list, and no removed session.

        OpenCode is read first, session by session; what differs from what sessiontodo holds is
        written in batches (``sessiontodo_opencode.batches``), a session's writes in one batch.
        """
        self.resyncs += 1
        with contextlib.suppress(TimeoutError):  # unknown lists are written again: harmless
            await asyncio.wait_for(self._feed_loaded.wait(), FEED_WAIT)
        mirrored = {
            session.session_id: session
            for session in await self._client.list_sessions(labels={SERVER_LABEL: self._server})
        }
        directories = {session.labels.get(DIRECTORY, "") for session in mirrored.values()} | await self._directories()
        listed: dict[str, Session] = {}
        for directory in sorted(filter(None, directories)):
            response = await self._http.get("/session", params=_directory(directory) | {"limit": LISTED_PER_DIRECTORY})
            response.raise_for_status()
            listed |= {session.id: session for session in _SESSIONS.validate_json(response.content)}
        batches = BatchWriter[_SessionSync](
            self._client.batch_write, origin=ORIGIN, written=self._synced, fallback=self._sync_unary
        )
        gone: list[str] = []
        found: list[Session] = []
        for unlisted in _missing(mirrored.values(), listed):
            async with self._skipping_refusals(f"session {unlisted.session_id}"):
                if (upstream := await self._reread(unlisted)) is None:
                    gone.append(unlisted.session_id)
                else:
                    found.append(upstream)
        for session_id in gone:  # first: removals usually came before newer sessions
            await batches.add(_SessionSync(session_id, (RemoveSessionWrite(session_id=session_id),)))
        for session in _parents_first([*found, *listed.values()]):
            todos: list[Todo] | None = None
            async with self._skipping_refusals(f"session {session.id}"):
                todos = await self._read_todos(session.id, session.directory)
            if todos is not None:  # (None: gone since it was listed; its session.deleted comes next)
                await batches.add(self._sync_of(session, todos, mirrored.get(session.id)))
        await batches.flush()
        log.info(
            "resynced %d OpenCode sessions from %s (batches: %d, writes in them: %d, sessions by single calls: %d)",
            len(listed),
            self._server,
            batches.batches,
            batches.batched_writes,
            batches.unbatched,
        )

    def _sync_of(self, session: Session, todos: list[Todo], mirrored: ServiceSession | None) -> _SessionSync:
        """What makes sessiontodo hold ``session`` and its list: nothing, when it holds them already."""
        labels = self._labels(session)
        writes: list[Write] = []
        if mirrored is None:
            writes.append(CreateSessionWrite(session_id=session.id, parent_id=session.parent_id or "", labels=labels))
        elif any(mirrored.labels.get(key) != value for key, value in labels.items()):
            writes.append(UpdateSessionWrite(session_id=session.id, labels=labels))
        held = self._held.get(session.id)
        if held is not None:
            unchanged = held.key == _key(todos)
        else:
            unchanged = mirrored is None and not todos  # a session created now is empty already
        if not unchanged:
            writes.append(ReplaceTodosWrite(session_id=session.id, todos=[todo_to_service(todo) for todo in todos]))
        return _SessionSync(session.id, tuple(writes), session, todos)

    async def _synced(self, sync: _SessionSync, results: Sequence[WriteResult]) -> None:
        """Note what a batch wrote for one session."""
        if sync.todos is None:
            for removed in results[0].removed_session_ids:
                self._held.pop(removed, None)
            return
        created = results[0] if isinstance(sync.writes[0], CreateSessionWrite) else None
        existed = created is not None and not created.changed
        if not existed or isinstance(sync.writes[-1], ReplaceTodosWrite):
            self._hold(sync.session_id, sync.todos, results[-1].revision)
        if existed:  # without this server's label (so not listed): label it, and write its list unless done
            await self._sync_unary(sync)

    async def _sync_unary(self, sync: _SessionSync) -> None:
        """A session's resync by unary calls: what a batch could not carry."""
        async with self._skipping_refusals(f"session {sync.session_id}"):
            if sync.session is None:
                await self._remove(sync.session_id)
                return
            await self._mirror_session(sync.session)
            if sync.todos is not None:
                await self._write(sync.session_id, sync.todos)

    async def _directories(self) -> set[str]:
        """The directories OpenCode knows: its own and every project's worktree."""
        found: set[str] = set()
        path = await self._http.get("/path")
        if path.status_code == 200:
            found.add(path.json().get("directory", ""))
        projects = await self._http.get("/project")
        if projects.status_code == 200:
            found |= {project.get("worktree", "") for project in projects.json()}
        return found

    async def _read_todos(self, session_id: str, directory: str) -> list[Todo] | None:
        """The session's current list in OpenCode; None if OpenCode no longer has the session."""
        response = await self._http.get(f"/session/{session_id}/todo", params=_directory(directory))
        if response.status_code == 404:
            return None
        response.raise_for_status()
        try:
            return _TODOS.validate_json(response.content)
        except ValidationError as error:
            raise ValueError(f"OpenCode's list of {session_id} is not a todo list: {error}") from error

    async def _reread(self, session: ServiceSession) -> Session | None:
        """A session mirrored before but not listed now: removed upstream (None), or of an unlisted directory."""
        directory = session.labels.get(DIRECTORY, "")
        response = await self._http.get(f"/session/{session.session_id}", params=_directory(directory))
        if response.status_code == 404:
            return None
        response.raise_for_status()
        return Session.model_validate_json(response.content)


@dataclass(frozen=True)
class _SessionSync:
    """What a resync writes for one session, in one batch: its removal (``session`` None), or its
    creation or label change and its list (``todos``)."""

    session_id: str
    writes: tuple[Write, ...]
    session: Session | None = None
    todos: list[Todo] | None = None


async def _frames(response: httpx.Response) -> AsyncGenerator[dict[str, Any], None]:
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            frame: dict[str, Any] = json.loads(line.removeprefix("data:"))
            yield frame


def _directory(directory: str | None) -> dict[str, str]:
    return {"directory": directory} if directory else {}


def _parents_first(sessions: Iterable[Session]) -> list[Session]:
    """Sessions ordered so that a parent is mirrored before its children."""
    by_id = {session.id: session for session in sessions}

    def depth(session: Session) -> int:
        seen = 0
        while (parent := by_id.get(session.parent_id or "")) is not None and seen < len(by_id):
            session, seen = parent, seen + 1
        return seen

    return sorted(by_id.values(), key=depth)


def _missing(mirrored: Iterable[ServiceSession], listed: Mapping[str, Session]) -> list[ServiceSession]:
    return [session for session in mirrored if session.session_id not in listed]

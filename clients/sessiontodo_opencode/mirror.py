"""The other direction: follow a real OpenCode server and mirror its sessions into sessiontodo.

``OpenCodeImporter`` reads OpenCode's ``/global/event`` stream (every directory's events) and
applies, one event at a time and in order: ``session.created`` / ``session.updated`` →
CreateSession / UpdateSession (labels ``title``, ``directory``, ``project``, ``slug``, and
``opencode.server`` naming the server); ``todo.updated`` → ReplaceTodos with the full list;
``session.deleted`` → RemoveSession. Every write carries origin ``opencode``.

Events missed while disconnected (an OpenCode restart, a network cut) are recovered by a
resync after every (re)connect, before any later event is applied: the sessions OpenCode
lists and the ones mirrored before are read again (``GET /session/{id}`` and
``/session/{id}/todo``); gone ones are removed. So an OpenCode restart loses nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx
from pydantic import TypeAdapter, ValidationError

from sessiontodo_client import FailedPrecondition, NotFound, RetryPolicy, ServiceError, TodoClient, Unavailable
from sessiontodo_client import Session as ServiceSession
from sessiontodo_opencode.models import Session, Todo
from sessiontodo_opencode.translate import DIRECTORY, PROJECT, SLUG, TITLE, todo_to_service, todos_from_service

log = logging.getLogger(__name__)

ORIGIN = "opencode"
SERVER_LABEL = "opencode.server"
"""The label naming the OpenCode server a mirrored session comes from."""

SILENCE_TIMEOUT = 30.0
"""Seconds without a byte after which the stream is opened again: OpenCode sends a heartbeat every
10 s, and a connection it accepted while starting up may never be answered."""
MAX_TITLE = 1024
"""Characters of a title kept in its label (far below the service's label limit)."""
BATCH = 500
"""Sessions read per BatchGetTodos during a resync."""

_TODOS = TypeAdapter(list[Todo])
_SESSIONS = TypeAdapter(list[Session])

TodoKey = tuple[tuple[str, str, str], ...]


def _key(todos: Iterable[Todo]) -> TodoKey:
    return tuple((todo.content, todo.status, todo.priority) for todo in todos)


class OpenCodeImporter:
    """Imports one OpenCode server (``http``'s base URL) into the sessiontodo service behind ``client``:
    one way, OpenCode to sessiontodo (the sidecar serves the other way)."""

    def __init__(self, client: TodoClient, http: httpx.AsyncClient, *, retry: RetryPolicy = RetryPolicy()) -> None:
        self._client = client
        self._http = http
        self._retry = retry
        self._server = str(http.base_url).rstrip("/")
        self._written: dict[str, TodoKey] = {}
        """The list last written per session, so an unchanged list is not written again."""
        self.resyncs = 0
        """How many times the mirror re-read everything (once per (re)connect)."""
        self.skipped = 0
        """Events and sessions skipped because sessiontodo refused them or they were malformed."""

    async def run(self) -> None:
        """Follow the server for ever: reconnect with backoff, resync after every connect."""
        attempt = 0
        while True:
            try:
                async for event in self._events():
                    attempt = 0
                    async with self._skipping_refusals(f"event {event}"):
                        await self._apply(event)
                log.info("OpenCode's event stream ended; reconnecting")
            except (httpx.HTTPError, ServiceError, ValueError) as error:
                log.warning("mirroring %s interrupted: %s", self._server, error)
            await asyncio.sleep(self._retry.delay(attempt))
            attempt += 1

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
        """``/global/event`` frames as dicts; ``server.connected`` comes first on every connection."""
        timeout = httpx.Timeout(10.0, read=SILENCE_TIMEOUT)
        async with self._http.stream("GET", "/global/event", timeout=timeout) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    frame: dict[str, Any] = json.loads(line.removeprefix("data:"))
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
        }

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
            self._written.pop(removed, None)

    # Lists

    async def _mirror_todos(self, session_id: str, todos: list[Todo], frame: Mapping[str, Any]) -> None:
        if session_id not in self._written:  # not mirrored yet by this process: make sure it exists
            await self._ensure_session(session_id, frame.get("directory"))
        await self._write(session_id, todos)

    async def _ensure_session(self, session_id: str, directory: str | None) -> None:
        response = await self._http.get(f"/session/{session_id}", params=_directory(directory))
        if response.status_code == 200:
            await self._mirror_session(Session.model_validate_json(response.content))

    async def _write(self, session_id: str, todos: list[Todo]) -> None:
        key = _key(todos)
        if self._written.get(session_id) == key:
            return
        await self._client.replace_todos(session_id, [todo_to_service(todo) for todo in todos], origin=ORIGIN)
        self._written[session_id] = key

    # Resync

    async def resync(self) -> None:
        """Make sessiontodo match OpenCode now: every listed session and list, and no removed session."""
        self.resyncs += 1
        mirrored = await self._client.list_sessions(labels={SERVER_LABEL: self._server})
        await self._load_written([session.session_id for session in mirrored])
        directories = {session.labels.get(DIRECTORY, "") for session in mirrored} | await self._directories()
        listed: dict[str, Session] = {}
        for directory in sorted(filter(None, directories)):
            response = await self._http.get("/session", params=_directory(directory))
            response.raise_for_status()
            listed |= {session.id: session for session in _SESSIONS.validate_json(response.content)}
        for unlisted in _missing(mirrored, listed):  # first: removals usually came before newer sessions
            async with self._skipping_refusals(f"session {unlisted.session_id}"):
                await self._reread(unlisted)
        for session in _parents_first(listed.values()):
            async with self._skipping_refusals(f"session {session.id}"):
                await self._mirror_session(session)
                await self._reread_todos(session.id, session.directory)
        log.info("resynced %d OpenCode sessions from %s", len(listed), self._server)

    async def _load_written(self, session_ids: list[str]) -> None:
        """What sessiontodo holds now, so that a list that did not change is not written again."""
        self._written = {}
        for start in range(0, len(session_ids), BATCH):
            found, _ = await self._client.batch_get_todos(session_ids[start : start + BATCH])
            self._written |= {entry.session.session_id: _key(todos_from_service(entry.todos)) for entry in found}

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

    async def _reread_todos(self, session_id: str, directory: str) -> bool:
        """Copy the session's current list; False if OpenCode no longer has the session."""
        response = await self._http.get(f"/session/{session_id}/todo", params=_directory(directory))
        if response.status_code == 404:
            return False
        response.raise_for_status()
        try:
            todos = _TODOS.validate_json(response.content)
        except ValidationError as error:
            raise ValueError(f"OpenCode's list of {session_id} is not a todo list: {error}") from error
        await self._write(session_id, todos)
        return True

    async def _reread(self, session: ServiceSession) -> None:
        """A session mirrored before but not listed now: removed upstream, or of an unlisted directory."""
        directory = session.labels.get(DIRECTORY, "")
        response = await self._http.get(f"/session/{session.session_id}", params=_directory(directory))
        if response.status_code == 404:
            await self._remove(session.session_id)
            return
        response.raise_for_status()
        await self._mirror_session(Session.model_validate_json(response.content))
        await self._reread_todos(session.session_id, directory)


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

"""What the proxy does with the traffic it observes: keep sessiontodo and the editor's plan in step.

Everything here starts from synchronous ``from_editor`` / ``from_agent`` calls made by the
forwarding loops, in wire order, and never delays forwarding: sessiontodo writes go through
per-session job queues, and the proxy's own plan updates to the editor are written under
the editor output's lock, between forwarded lines.

Echo suppression: each stored agent plan yields a revision the proxy remembers as its own.
A watch event is shown to the editor only when (checked under the output lock) no write of
the proxy's for that session is queued or running, its revision is newer than the proxy's
latest own write, and its list differs from what the editor was last shown. So the agent's
own plans never come back, a change by someone else that an agent plan has already
overtaken is not shown, and everything else is.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessiontodo_acp._session_jobs import SessionJobs
from sessiontodo_acp.conversions import keep_known_ids, plan_notification, read_plan_entries, same_plan
from sessiontodo_acp.publisher import PlanPublisher
from sessiontodo_client import InvalidArgument, NotFound, RetryPolicy, Todo, TodoClient, WatchEvent

log = logging.getLogger(__name__)

SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_CLOSE = "session/close"
SESSION_UPDATE = "session/update"
_OPENED_BY_RESULT = frozenset({SESSION_NEW, SESSION_FORK})
_OPENED_BY_PARAMS = frozenset({SESSION_LOAD, SESSION_RESUME})
_TRACKED_REQUESTS = _OPENED_BY_RESULT | _OPENED_BY_PARAMS | {SESSION_CLOSE}


class ByteWriter(Protocol):
    """Where bytes go: an ``asyncio.StreamWriter`` or anything with its ``write`` and ``drain``."""

    def write(self, data: bytes) -> object: ...

    async def drain(self) -> None: ...


class EditorOutput:
    """The editor's side of the proxy (its stdout): forwarded lines and the proxy's own messages, never interleaved."""

    def __init__(self, writer: ByteWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()

    def exclusive(self) -> asyncio.Lock:
        """Hold this while writing one whole line."""
        return self._lock

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def write_message(self, message: dict[str, Any]) -> None:
        await self.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")


@dataclass
class _Session:
    """What the proxy knows of one ACP session."""

    editor_view: list[Todo] = field(default_factory=list)
    """The plan the editor was last shown, by the agent or by the proxy."""
    stored: list[Todo] = field(default_factory=list)
    """The newest list known to be in sessiontodo, for keeping todo ids."""
    stored_revision: int = -1
    own_revision: int = -1
    """The revision of the proxy's latest own write."""
    opened: bool = False
    loading: bool = False
    replayed: list[Todo] | None = None
    """The last plan the agent replayed during a pending ``session/load``."""
    unmirrored: bool = False
    """sessiontodo refused the session id: forward only."""

    def remember(self, todos: list[Todo], revision: int) -> None:
        if revision >= self.stored_revision:
            self.stored, self.stored_revision = list(todos), revision


def _request_key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


class PlanMirror:
    """Mirrors each ACP session's plan between the agent, sessiontodo and the editor."""

    def __init__(self, todos: TodoClient, output: EditorOutput, backoff: RetryPolicy = RetryPolicy()) -> None:
        self._todos = todos
        self._output = output
        self._jobs = SessionJobs(backoff)
        self._publisher = PlanPublisher(todos, self._deliver)
        self._sessions: dict[str, _Session] = {}
        self._requests: dict[str, tuple[str, str | None]] = {}

    # Observing (synchronous, in wire order)

    def from_editor(self, message: dict[str, Any]) -> None:
        """Note the session lifecycle requests the editor sends the agent."""
        method = message.get("method")
        if method not in _TRACKED_REQUESTS or "id" not in message:
            return
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session_id = session_id if isinstance(session_id, str) else None
        self._requests[_request_key(message["id"])] = (str(method), session_id)
        if method in _OPENED_BY_PARAMS and session_id is not None:
            session = self._session(session_id)
            session.loading, session.replayed = True, None

    def from_agent(self, message: dict[str, Any]) -> None:
        """Act on lifecycle responses and plan updates the agent sends the editor."""
        if "method" not in message:
            if "id" in message:
                self._on_response(message)
            return
        if message["method"] != SESSION_UPDATE:
            return
        params = message.get("params")
        if not isinstance(params, dict):
            return
        session_id, update = params.get("sessionId"), params.get("update")
        if isinstance(session_id, str) and isinstance(update, dict) and update.get("sessionUpdate") == "plan":
            self._on_plan(session_id, update.get("entries"))

    def _on_response(self, message: dict[str, Any]) -> None:
        request = self._requests.pop(_request_key(message["id"]), None)
        if request is None:
            return
        method, session_id = request
        result = message.get("result")
        succeeded = "error" not in message
        if method in _OPENED_BY_RESULT:
            new_id = result.get("sessionId") if isinstance(result, dict) else None
            if succeeded and isinstance(new_id, str):
                self._open(new_id, replayed=None)
        elif method in _OPENED_BY_PARAMS and session_id is not None:
            session = self._session(session_id)
            replayed, session.loading, session.replayed = session.replayed, False, None
            if succeeded:
                self._open(session_id, replayed)
            elif not session.opened:
                del self._sessions[session_id]
        elif method == SESSION_CLOSE and session_id is not None and succeeded:
            self._close(session_id)

    def _on_plan(self, session_id: str, entries: Any) -> None:
        reading = read_plan_entries(entries)
        for problem in reading.problems:
            log.warning("session %s: plan %s", session_id, problem)
        session = self._session(session_id)
        session.editor_view = reading.todos
        if session.loading:
            session.replayed = reading.todos
            return
        if not session.opened:
            self._open(session_id, replayed=None)

        async def store() -> None:
            await self._store(session_id, reading.todos)

        self._jobs.submit(session_id, store, f"storing a plan of {len(reading.todos)} entries", replaceable=True)

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session()
        return session

    def _open(self, session_id: str, replayed: list[Todo] | None) -> None:
        self._session(session_id).opened = True

        async def open_session() -> None:
            await self._open_session(session_id, replayed)

        self._jobs.submit(session_id, open_session, "registering the session")

    def _close(self, session_id: str) -> None:
        async def close_session() -> None:
            await self._publisher.unwatch(session_id)
            session = self._sessions.get(session_id)
            if session is None or not session.unmirrored:
                await self._todos.remove_session(session_id)
            self._sessions.pop(session_id, None)

        self._jobs.submit(session_id, close_session, "removing the session")

    # Jobs (one at a time per session)

    async def _open_session(self, session_id: str, replayed: list[Todo] | None) -> None:
        """Create the session; keep a replayed plan if sessiontodo had none, else show the editor its plan."""
        session = self._sessions.get(session_id)
        if session is None or session.unmirrored:
            return
        try:
            created_session, created = await self._todos.create_session(session_id)
        except InvalidArgument as error:
            session.unmirrored = True
            log.error("session %s cannot be kept in sessiontodo (%s); forwarding only", session_id, error)
            return
        if replayed is not None and (created or created_session.todo_count == 0):
            await self._write(session_id, session, replayed)
            self._publisher.watch(session_id, after_revision=session.own_revision)
            return
        current = await self._todos.get_todos(session_id)
        session.remember(current.todos, current.revision)
        await self._show(session_id, session, current.todos, newest=lambda: self._jobs.pending(session_id) <= 1)
        self._publisher.watch(session_id, after_revision=current.revision)

    async def _store(self, session_id: str, todos: list[Todo]) -> None:
        session = self._sessions.get(session_id)
        if session is not None and not session.unmirrored:
            await self._write(session_id, session, todos)

    async def _write(self, session_id: str, session: _Session, todos: list[Todo]) -> None:
        try:
            stored = await self._todos.replace_todos(session_id, keep_known_ids(todos, session.stored))
        except NotFound:
            log.info("session %s was removed from sessiontodo; creating it again", session_id)
            await self._todos.create_session(session_id)
            session.stored, session.stored_revision, session.own_revision = [], -1, -1
            stored = await self._todos.replace_todos(session_id, keep_known_ids(todos, []))
            self._publisher.watch(session_id, after_revision=stored.revision, restart=True)
        session.own_revision = stored.revision
        session.remember(stored.todos, stored.revision)

    # Showing sessiontodo's changes to the editor

    async def _deliver(self, session_id: str, event: WatchEvent) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.remember(event.todos, event.revision)
        await self._jobs.wait_idle(session_id)
        await self._show(
            session_id,
            session,
            event.todos,
            newest=lambda: self._jobs.pending(session_id) == 0 and event.revision > session.own_revision,
        )

    async def _show(self, session_id: str, session: _Session, todos: list[Todo], newest: Callable[[], bool]) -> None:
        """Show ``todos`` to the editor if ``newest()`` still holds under the output lock and they are news."""
        async with self._output.exclusive():
            if not newest() or same_plan(todos, session.editor_view):
                return
            await self._output.write_message(plan_notification(session_id, todos))
            session.editor_view = list(todos)
            log.debug("session %s: showed the editor a plan of %d entries", session_id, len(todos))

    async def aclose(self, drain_timeout: float) -> None:
        """Give pending writes ``drain_timeout`` seconds, then stop every job and watch."""
        if not await self._jobs.wait_all_idle(drain_timeout):
            log.warning("sessiontodo writes still pending after %.1fs are dropped", drain_timeout)
        await self._jobs.aclose()
        await self._publisher.aclose()

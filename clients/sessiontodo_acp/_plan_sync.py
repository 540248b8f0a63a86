"""What the proxy does with the traffic it observes: keep sessiontodo and the editor's plan in step.

Everything here starts from synchronous ``from_editor`` / ``from_agent`` calls made by the
forwarding loops, in wire order, and never delays forwarding: sessiontodo writes go through
per-session job queues, and the proxy's own plan updates to the editor are written under
the editor output's lock, between forwarded lines.

Lifecycle, as ACP means it: ``session/close`` frees the proxy's resources for the session (its
watch, its state) and keeps the plan; ``session/delete`` removes the session from sessiontodo.
An agent's plan is its ``plan`` updates, or (OpenCode, which sends none since 1.16) the list of
its ``todowrite`` tool call. A plan sessiontodo refuses (or that cannot be written before its
deadline) pauses the session's mirroring toward the editor until an agent plan is stored again,
so sessiontodo's older list can never overwrite the editor's newer one.

Echo suppression: every write carries this proxy's ``origin`` (``acp-proxy/<random>``), and a
watch event with that origin is never shown. Any other change is shown to the editor only when
(checked under the output lock) no write of the proxy's for that session is queued or running,
its revision is newer than the proxy's latest own write, and its list differs from what the
editor was last shown: a change by someone else that an agent plan has already overtaken is
not shown, and everything else is.

Load and resume: a plan the agent replays is its truth and is stored. Without a replay, the
proxy reads the session's recent changes and shows the editor sessiontodo's list only if the
last change to the list came from another origin than an ACP proxy (that is, after the agent's
last plan); if sessiontodo no longer holds that history, nothing is shown.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sessiontodo_acp._lines import LineOutput
from sessiontodo_acp._opencode import TodoWriteCalls
from sessiontodo_acp._session_jobs import SessionJobs
from sessiontodo_acp.conversions import keep_known_ids, plan_notification, read_plan_entries, same_plan
from sessiontodo_acp.publisher import PlanPublisher
from sessiontodo_client import ChangeKind, InvalidArgument, NotFound, RetryPolicy, Todo, TodoClient, WatchEvent
from sessiontodo_client.retry import DEFAULT_RETRY

log = logging.getLogger(__name__)

SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_UPDATE = "session/update"
_OPENED_BY_RESULT = frozenset({SESSION_NEW, SESSION_FORK})
_OPENED_BY_PARAMS = frozenset({SESSION_LOAD, SESSION_RESUME})
_TRACKED_REQUESTS = _OPENED_BY_RESULT | _OPENED_BY_PARAMS | {SESSION_CLOSE, SESSION_DELETE}

ORIGIN_PREFIX = "acp-proxy/"
"""Every ACP proxy writes as ``acp-proxy/<random>``: its own echoes are skipped, and any such origin
counts as an agent's plan when a reloaded session is checked for changes made elsewhere."""
_LIST_CHANGES = frozenset(
    {ChangeKind.TODOS_REPLACED, ChangeKind.TODO_ADDED, ChangeKind.TODO_UPDATED, ChangeKind.TODO_REMOVED}
)


def new_origin() -> str:
    return f"{ORIGIN_PREFIX}{uuid.uuid4().hex[:12]}"


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
    paused: bool = False
    """sessiontodo does not hold the agent's latest plan: show the editor nothing from it."""
    catching_up_to: int | None = None
    """After a load or resume without replay: the revision whose history decides what the editor is shown."""
    last_list_origin: str | None = None
    """While catching up: who made the latest list change seen so far (None: no change seen)."""
    history_lost: bool = False
    """While catching up: sessiontodo no longer had the changes, so who made them is unknown."""

    def remember(self, todos: list[Todo], revision: int) -> None:
        if revision >= self.stored_revision:
            self.stored, self.stored_revision = list(todos), revision


def _request_key(request_id: Any) -> str:
    return json.dumps(request_id, sort_keys=True)


class PlanSync:
    """Keeps each ACP session's plan in step both ways: the agent's plans into sessiontodo, and
    sessiontodo's changes by others out to the editor."""

    def __init__(
        self,
        todos: TodoClient,
        output: LineOutput,
        policy: RetryPolicy = DEFAULT_RETRY,
        *,
        idle_ttl: float | None = None,
        origin: str | None = None,
    ) -> None:
        self._todos = todos
        self._idle_ttl = idle_ttl
        self.origin = origin or new_origin()
        self._output = output
        self._jobs = SessionJobs(policy)
        self._publisher = PlanPublisher(todos, self._deliver)
        self._sessions: dict[str, _Session] = {}
        self._requests: dict[str, tuple[str, str | None]] = {}
        self._todowrite = TodoWriteCalls()

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
        """Act on lifecycle responses and plans (``plan`` updates, OpenCode's ``todowrite``) from the agent."""
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
        if not isinstance(session_id, str) or not isinstance(update, dict):
            return
        if update.get("sessionUpdate") == "plan":
            self._on_plan(session_id, update.get("entries"), update.get("_meta"))
        elif (todos := self._todowrite.observe(session_id, update)) is not None:
            self._on_plan(session_id, todos)

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
                self._open(new_id, replayed=None, reopened=False)
        elif method in _OPENED_BY_PARAMS and session_id is not None:
            session = self._session(session_id)
            replayed, session.loading, session.replayed = session.replayed, False, None
            if succeeded:
                self._open(session_id, replayed, reopened=True)
            elif not session.opened:
                self._release(session_id)
        elif method == SESSION_CLOSE and session_id is not None and succeeded:
            self._release(session_id)
        elif method == SESSION_DELETE and session_id is not None and succeeded:
            self._delete(session_id)

    def _on_plan(self, session_id: str, entries: Any, plan_meta: Any = None) -> None:
        reading = read_plan_entries(entries, plan_meta)
        for problem in reading.problems:
            log.warning("session %s: plan %s", session_id, problem)
        session = self._session(session_id)
        session.editor_view = reading.todos
        if session.loading:
            session.replayed = reading.todos
            return
        if not session.opened:
            self._open(session_id, replayed=None, reopened=False)

        async def store() -> None:
            await self._store(session_id, reading.todos)

        def refused(error: Exception) -> None:
            self._pause(session_id, error)

        self._jobs.submit(
            session_id,
            store,
            f"storing a plan of {len(reading.todos)} entries",
            replaceable=True,
            on_failure=refused,
        )

    def _session(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = _Session()
        return session

    def _open(self, session_id: str, replayed: list[Todo] | None, *, reopened: bool) -> None:
        self._session(session_id).opened = True

        async def open_session() -> None:
            await self._open_session(session_id, replayed, reopened)

        def failed(error: Exception) -> None:
            if replayed is not None:
                self._pause(session_id, error)

        self._jobs.submit(session_id, open_session, "registering the session", on_failure=failed)

    def _release(self, session_id: str) -> None:
        """``session/close``: after the session's pending writes, stop watching it and forget it; the plan stays."""

        closed = self._sessions.get(session_id)
        if closed is not None:
            closed.opened = False

        async def release() -> None:
            if closed is not None and (closed.opened or closed.loading):
                return  # reopened since (its load or resume comes next in this queue)
            await self._publisher.unwatch(session_id)
            if self._sessions.get(session_id) is closed:
                del self._sessions[session_id]
            self._todowrite.forget(session_id)
            log.info("session %s closed: no longer watched; its plan stays in sessiontodo", session_id)

        self._jobs.submit(session_id, release, "releasing the closed session")

    def _delete(self, session_id: str) -> None:
        """``session/delete``: remove the session from sessiontodo; its pending plans are moot."""

        async def delete() -> None:
            await self._publisher.unwatch(session_id)
            session = self._sessions.pop(session_id, None)
            self._todowrite.forget(session_id)
            if session is None or not session.unmirrored:
                await self._todos.remove_session(session_id, origin=self.origin)
            log.info("session %s deleted: removed from sessiontodo", session_id)

        self._jobs.submit(session_id, delete, "removing the deleted session", supersedes=True)

    def _pause(self, session_id: str, error: Exception) -> None:
        session = self._sessions.get(session_id)
        if session is not None and not session.paused:
            session.paused = True
            log.warning(
                "session %s: sessiontodo does not hold the agent's latest plan (%s); the editor is shown no "
                "changes from sessiontodo until the agent's next plan is stored",
                session_id,
                error,
            )

    # Jobs (one at a time per session)

    async def _open_session(self, session_id: str, replayed: list[Todo] | None, reopened: bool) -> None:
        """Create the session and watch it. A replayed plan is the agent's truth and is stored as is;
        a reopened session without one is checked for changes made elsewhere since the agent's last plan."""
        session = self._sessions.get(session_id)
        if session is None or session.unmirrored:
            return
        try:
            await self._ensure_session(session_id)
        except InvalidArgument as error:
            session.unmirrored = True
            log.error("session %s cannot be kept in sessiontodo (%s); forwarding only", session_id, error)
            return
        if replayed is not None:
            await self._write(session_id, session, replayed)
            return
        current = await self._todos.get_todos(session_id)
        session.remember(current.todos, current.revision)
        if reopened and current.revision > 0 and not self._publisher.watching(session_id):
            session.catching_up_to, session.last_list_origin, session.history_lost = current.revision, None, False
            self._watch(session_id, 0)
        else:
            self._watch(session_id, current.revision)

    async def _ensure_session(self, session_id: str) -> None:
        """Get or create the session, with the proxy's idle TTL (so that abandoned sessions expire)."""
        session, created = await self._todos.create_session(session_id, idle_ttl=self._idle_ttl, origin=self.origin)
        if not created and session.idle_ttl != self._idle_ttl and self._idle_ttl is not None:
            await self._todos.update_session(session_id, idle_ttl=self._idle_ttl, origin=self.origin)

    async def _store(self, session_id: str, todos: list[Todo]) -> None:
        session = self._sessions.get(session_id)
        if session is not None and not session.unmirrored:
            await self._write(session_id, session, todos)

    async def _write(self, session_id: str, session: _Session, todos: list[Todo]) -> None:
        try:
            stored = await self._todos.replace_todos(
                session_id, keep_known_ids(todos, session.stored), origin=self.origin
            )
        except NotFound:
            log.info("session %s was removed from sessiontodo (or expired); creating it again", session_id)
            await self._ensure_session(session_id)
            session.stored, session.stored_revision, session.own_revision = [], -1, -1
            stored = await self._todos.replace_todos(session_id, keep_known_ids(todos, []), origin=self.origin)
            session.catching_up_to = None
            self._publisher.watch(session_id, after_revision=stored.revision, restart=True)
        session.own_revision = stored.revision
        session.remember(stored.todos, stored.revision)
        if session.paused:
            session.paused = False
            log.info("session %s: the agent's plan is stored again; mirroring resumes", session_id)
        self._watch(session_id, stored.revision)

    def _watch(self, session_id: str, after_revision: int) -> None:
        """Show the editor the session's changes after ``after_revision`` (if not watching it already)."""
        if not self._publisher.watching(session_id):
            self._publisher.watch(session_id, after_revision=after_revision)
            log.info("session %s: watching sessiontodo's changes after revision %d", session_id, after_revision)

    # Showing sessiontodo's changes to the editor

    async def _deliver(self, session_id: str, event: WatchEvent) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        session.remember(event.todos, event.revision)
        if session.catching_up_to is not None:
            if not self._caught_up(session_id, session, event):
                return
        elif event.origin == self.origin:
            return  # the agent's own plan, stored by this proxy
        await self._jobs.wait_idle(session_id)
        await self._show(
            session_id,
            session,
            event.todos,
            newest=lambda: self._jobs.pending(session_id) == 0 and event.revision > session.own_revision,
        )

    @staticmethod
    def _caught_up(session_id: str, session: _Session, event: WatchEvent) -> bool:
        """Follow a reopened session's history up to the revision it had; then whether to show its list:
        only if the last list change is known and came from elsewhere than an ACP proxy."""
        if event.kind in (ChangeKind.RESET, ChangeKind.SNAPSHOT):
            session.history_lost = True  # who changed the list last is unknown
        elif event.kind in _LIST_CHANGES:
            session.last_list_origin = event.origin
        assert session.catching_up_to is not None
        if event.revision < session.catching_up_to:
            return False
        last, lost = session.last_list_origin, session.history_lost
        session.catching_up_to, session.last_list_origin, session.history_lost = None, None, False
        changed_elsewhere = not lost and last is not None and not last.startswith(ORIGIN_PREFIX)
        if changed_elsewhere:
            log.info("session %s: changed by %r since the agent's last plan; showing it", session_id, last)
        return changed_elsewhere

    async def _show(self, session_id: str, session: _Session, todos: list[Todo], newest: Callable[[], bool]) -> None:
        """Show ``todos`` to the editor if ``newest()`` still holds under the output lock and they are news."""
        async with self._output.exclusive():
            if session.paused or not newest() or same_plan(todos, session.editor_view):
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

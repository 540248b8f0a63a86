"""What the proxy does with the traffic it observes: keep sessiontodo and the editor's plan in step.

Everything here starts from synchronous ``from_editor`` / ``from_agent`` calls made by the
forwarding loops, in wire order, and never delays forwarding: sessiontodo writes go through
per-session job queues, and the proxy's own plan updates to the editor are written under
the editor output's lock, between forwarded lines.

Lifecycle, as ACP means it: ``session/close`` frees the proxy's resources for the session (its
watch, its state) and keeps the plan; ``session/delete`` removes the session from sessiontodo.
An agent's plan is its ``plan`` updates, or (OpenCode, which sends none since 1.16) the list of
its ``todowrite`` tool call. Each plan is stored (every one, in order) as the agent's changes to its
previous plan applied onto the current list (``plan_merge``), by a write conditional on the list's
revision, merged again if someone wrote first: a plan never undoes a newer acknowledged write, and
the editor is shown the merged list when it differs from the plan. A plan sessiontodo refuses (or
that cannot be written before its deadline) pauses the session's mirroring toward the editor until
an agent plan is stored again, so sessiontodo's older list can never overwrite the editor's newer one.

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

Several plans (``plan_update`` / ``plan_removed``, see ``plan_operations``): the plan ``"main"``
is the session's own list; every other plan is a child session of it, kept and watched like a
session of its own, and removed when the agent removes the plan. Others' changes go to the editor
in the form it takes (negotiated at ``initialize``): ``plan_update`` for every plan if it takes
them, else ``plan`` for ``"main"`` only; a removed plan session is ``plan_removed``.
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
from sessiontodo_acp.conversions import (
    PlanReading,
    keep_known_ids,
    plan_notification,
    read_plan_entries,
    same_plan,
)
from sessiontodo_acp.plan_merge import merge_plan
from sessiontodo_acp.plan_operations import (
    MAIN_PLAN_ID,
    PLAN_ID_LABEL,
    EditorPlans,
    plan_removed,
    plan_session_id,
    plan_update,
    read_plan_content,
    session_update,
)
from sessiontodo_acp.publisher import PlanPublisher
from sessiontodo_client import (
    Aborted,
    ChangeKind,
    CreateSessionWrite,
    InvalidArgument,
    NotFound,
    ReplaceTodosWrite,
    RetryPolicy,
    Todo,
    TodoClient,
    TodoList,
    WatchEvent,
)
from sessiontodo_client.plans import keeping_graph
from sessiontodo_client.retry import DEFAULT_RETRY

log = logging.getLogger(__name__)

SESSION_NEW = "session/new"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_UPDATE = "session/update"
INITIALIZE = "initialize"
_OPENED_BY_RESULT = frozenset({SESSION_NEW, SESSION_FORK})
_OPENED_BY_PARAMS = frozenset({SESSION_LOAD, SESSION_RESUME})
_TRACKED_REQUESTS = _OPENED_BY_RESULT | _OPENED_BY_PARAMS | {SESSION_CLOSE, SESSION_DELETE, INITIALIZE}

ORIGIN_PREFIX = "acp-proxy/"
"""Every ACP proxy writes as ``acp-proxy/<random>``: its own echoes are skipped, and any such origin
counts as an agent's plan when a reloaded session is checked for changes made elsewhere."""
_LIST_CHANGES = frozenset(
    {ChangeKind.TODOS_REPLACED, ChangeKind.TODO_ADDED, ChangeKind.TODO_UPDATED, ChangeKind.TODO_REMOVED}
)


_MERGE_ATTEMPTS = 50
"""How often a plan is merged again because someone else wrote first, before it is given up (and mirroring paused)."""


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
    agent_plan: list[Todo] = field(default_factory=list)
    """The agent's latest stored plan, with its todos' ids: the base its next plan is read against."""
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
    plan: tuple[str, str] | None = None
    """For a plan's child session: the ACP session and the plan id; None for an ACP session's own list."""

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
        self._publisher = PlanPublisher(todos, self._deliver, deliver_removals=True)
        self._sessions: dict[str, _Session] = {}
        self._requests: dict[str, tuple[str, str | None]] = {}
        self._todowrite = TodoWriteCalls()
        self._editor = EditorPlans()
        """Which plan updates the editor takes; known once the agent answered ``initialize``."""
        self._capabilities: dict[str, Any] = {}
        """The capabilities of a pending ``initialize``, by request id."""

    # Observing (synchronous, in wire order)

    def from_editor(self, message: dict[str, Any]) -> None:
        """Note the session lifecycle requests the editor sends the agent."""
        method = message.get("method")
        if method not in _TRACKED_REQUESTS or "id" not in message:
            return
        params = message.get("params")
        if method == INITIALIZE and isinstance(params, dict):  # v1 says clientCapabilities, the v2 draft capabilities
            self._capabilities[_request_key(message["id"])] = params.get(
                "clientCapabilities", params.get("capabilities")
            )
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        session_id = session_id if isinstance(session_id, str) else None
        self._requests[_request_key(message["id"])] = (str(method), session_id)
        if method in _OPENED_BY_PARAMS and session_id is not None:
            session = self._session(session_id)
            session.loading, session.replayed = True, None

    def from_agent(self, message: dict[str, Any]) -> None:
        """Act on lifecycle responses and plans (``plan``, ``plan_update``, ``plan_removed``, OpenCode's
        ``todowrite``) from the agent."""
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
        kind = update.get("sessionUpdate")
        if kind == "plan":
            self._on_plan(session_id, read_plan_entries(update.get("entries"), update.get("_meta")))
        elif kind == "plan_update":
            self._on_plan_update(session_id, update.get("plan"))
        elif kind == "plan_removed":
            self._on_plan_removed(session_id, update.get("planId"))
        elif (todos := self._todowrite.observe(session_id, update)) is not None:
            self._on_plan(session_id, read_plan_entries(todos))

    def _on_response(self, message: dict[str, Any]) -> None:
        request = self._requests.pop(_request_key(message["id"]), None)
        if request is None:
            return
        method, session_id = request
        result = message.get("result")
        succeeded = "error" not in message
        if method == INITIALIZE:
            capabilities = self._capabilities.pop(_request_key(message["id"]), None)
            if succeeded and isinstance(result, dict):
                self._editor = EditorPlans.negotiated(capabilities, result.get("protocolVersion"))
                log.info("the editor takes %s", self._editor)
        elif method in _OPENED_BY_RESULT:
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

    def _on_plan_update(self, session_id: str, plan: Any) -> None:
        content = read_plan_content(plan)
        if content.refused is not None:
            log.warning("session %s: %s; forwarded, not stored", session_id, content.refused)
        elif content.plan_id == MAIN_PLAN_ID:
            self._on_plan(session_id, content.reading)
        else:
            child_id = plan_session_id(session_id, content.plan_id)
            self._session(child_id).plan = (session_id, content.plan_id)
            self._on_plan(child_id, content.reading)

    def _on_plan_removed(self, session_id: str, plan_id: Any) -> None:
        if not isinstance(plan_id, str) or not plan_id:
            log.warning("session %s: plan_removed without a planId; forwarded only", session_id)
        elif plan_id == MAIN_PLAN_ID:
            self._on_plan(session_id, PlanReading([]))
        else:
            self._delete(plan_session_id(session_id, plan_id))

    def _on_plan(self, session_id: str, reading: PlanReading) -> None:
        """Store an agent's plan: the session's own list, or (``plan_update``) a plan's child session."""
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

    def _plans_of(self, session_id: str) -> list[str]:
        """The child sessions of the plans of an ACP session that the proxy knows."""
        return [child_id for child_id, child in self._sessions.items() if child.plan and child.plan[0] == session_id]

    def _release(self, session_id: str) -> None:
        """``session/close``: after the session's pending writes, stop watching it (and its plans) and forget
        them; the plans stay."""
        for child_id in self._plans_of(session_id):
            self._release(child_id)
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
        """``session/delete`` (or ``plan_removed``): remove the session, with its plans, from sessiontodo;
        its pending plans are moot."""
        for child_id in self._plans_of(session_id):
            self._delete(child_id)

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
            created_at = await self._ensure_session(session_id)
        except InvalidArgument as error:
            session.unmirrored = True
            log.error("session %s cannot be kept in sessiontodo (%s); forwarding only", session_id, error)
            return
        if replayed is not None:
            await self._write(session_id, session, replayed, replace=True)
            return
        current = await self._todos.get_todos(session_id)
        session.remember(current.todos, current.revision)
        session.agent_plan = [] if created_at is not None else current.todos
        if reopened and current.revision > 0 and not self._publisher.watching(session_id):
            session.catching_up_to, session.last_list_origin, session.history_lost = current.revision, None, False
            self._watch(session_id, 0)
        else:  # a session created just now: what others wrote since its creation is news to the editor
            self._watch(session_id, current.revision if created_at is None else created_at)

    async def _ensure_session(self, session_id: str) -> int | None:
        """Get or create the session, with the proxy's idle TTL (so that abandoned sessions expire); a plan's
        session as a child of its ACP session, labelled with the plan id. Returns the revision of a session
        created now, None if it existed."""
        known = self._sessions.get(session_id)
        if known is not None and known.plan is not None:
            parent_id, plan_id = known.plan
            labels = {PLAN_ID_LABEL: plan_id}
            try:
                return await self._create(session_id, parent_id, labels)
            except NotFound:  # the ACP session's own registration has not run (or it expired)
                await self._ensure_session(parent_id)
                return await self._create(session_id, parent_id, labels)
        return await self._create(session_id)

    async def _create(self, session_id: str, parent_id: str = "", labels: dict[str, str] | None = None) -> int | None:
        session, created = await self._todos.create_session(
            session_id, parent_id, labels=labels, idle_ttl=self._idle_ttl, origin=self.origin
        )
        if not created and session.idle_ttl != self._idle_ttl and self._idle_ttl is not None:
            await self._todos.update_session(session_id, idle_ttl=self._idle_ttl, origin=self.origin)
        return session.revision if created else None

    async def _store(self, session_id: str, todos: list[Todo]) -> None:
        session = self._sessions.get(session_id)
        if session is not None and not session.unmirrored:
            await self._write(session_id, session, todos)

    async def _write(self, session_id: str, session: _Session, todos: list[Todo], *, replace: bool = False) -> None:
        """Store an agent's plan: its changes applied onto the current list (``plan_merge``), or (a plan the
        agent replays, its truth) the list replaced; then tell the editor the merged result if it differs."""
        try:
            if replace:
                replayed = keeping_graph(keep_known_ids(todos, session.stored), session.stored)
                stored = await self._todos.replace_todos(session_id, replayed, origin=self.origin)
                session.agent_plan = stored.todos
            else:
                stored = await self._merge(session_id, session, todos)
        except NotFound:
            log.info("session %s was removed from sessiontodo (or expired); creating it again", session_id)
            session.stored, session.stored_revision, session.own_revision = [], -1, -1
            stored = await self._recreate(session_id, keep_known_ids(todos, []))
            session.agent_plan = stored.todos
            session.catching_up_to = None
            self._publisher.watch(session_id, after_revision=stored.revision, restart=True)
        session.own_revision = stored.revision
        session.remember(stored.todos, stored.revision)
        if session.paused:
            session.paused = False
            log.info("session %s: the agent's plan is stored again; mirroring resumes", session_id)
        self._watch(session_id, stored.revision)
        if not same_plan(stored.todos, todos):
            await self._show(
                session_id,
                session,
                stored.todos,
                newest=lambda: self._jobs.pending(session_id) <= 1 and session.stored_revision <= stored.revision,
            )

    async def _merge(self, session_id: str, session: _Session, todos: list[Todo]) -> TodoList:
        """Write the plan merged onto the newest list known, on condition that it is still the newest;
        merged again onto a fresh read when someone else wrote in between."""
        current, revision = session.stored, session.stored_revision
        if revision < 0:
            fresh = await self._todos.get_todos(session_id)
            current, revision = fresh.todos, fresh.revision
        for attempt in range(1, _MERGE_ATTEMPTS + 1):
            merged = merge_plan(session.agent_plan, todos, current)
            try:
                stored = await self._todos.replace_todos(
                    session_id, merged.todos, expected_revision=revision, origin=self.origin
                )
            except Aborted:
                if attempt == _MERGE_ATTEMPTS:
                    raise
                fresh = await self._todos.get_todos(session_id)
                session.remember(fresh.todos, fresh.revision)
                current, revision = fresh.todos, fresh.revision
                log.debug("session %s: written to since revision %d; merging the plan again", session_id, revision)
                continue
            session.agent_plan = merged.stored_plan(stored.todos)
            return stored
        raise AssertionError("unreachable")

    async def _recreate(self, session_id: str, todos: list[Todo]) -> TodoList:
        """The session created again with its plan: one atomic BatchWrite, so no one sees it empty."""
        create = CreateSessionWrite(session_id=session_id, idle_ttl=self._idle_ttl)
        replace = ReplaceTodosWrite(session_id=session_id, todos=todos)
        replaced = (await self._todos.batch_write([create, replace], origin=self.origin))[1]
        stored = [
            todo.model_copy(update={"id": todo_id}) for todo, todo_id in zip(todos, replaced.todo_ids, strict=True)
        ]
        return TodoList(todos=stored, revision=replaced.revision)

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
        if event.kind is ChangeKind.SESSION_REMOVED:
            if session.plan is not None and event.origin != self.origin:
                await self._show_removed(session_id, session.plan)
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
        message = self._plan_message(session_id, session, todos)
        async with self._output.exclusive():
            if message is None or session.paused or not newest() or same_plan(todos, session.editor_view):
                return
            await self._output.write_message(message)
            session.editor_view = list(todos)
            log.debug("session %s: showed the editor a plan of %d entries", session_id, len(todos))

    def _plan_message(self, session_id: str, session: _Session, todos: list[Todo]) -> dict[str, Any] | None:
        """The notification that shows a stored plan in the form the editor takes; None if it takes none."""
        if session.plan is not None:
            parent_id, plan_id = session.plan
            return (
                session_update(parent_id, plan_update(plan_id, todos, self._editor))
                if self._editor.plan_updates
                else None
            )
        if self._editor.plain_plans:
            return plan_notification(session_id, todos)
        return session_update(session_id, plan_update(MAIN_PLAN_ID, todos, self._editor))

    async def _show_removed(self, session_id: str, plan: tuple[str, str]) -> None:
        """A plan's session removed by someone else: the editor is told the plan is gone (if it takes that)."""
        self._sessions.pop(session_id, None)
        if self._editor.plan_updates:
            async with self._output.exclusive():
                await self._output.write_message(session_update(plan[0], plan_removed(plan[1])))
            log.info("session %s: plan %r removed elsewhere; the editor is told", plan[0], plan[1])

    async def aclose(self, drain_timeout: float) -> None:
        """Give pending writes ``drain_timeout`` seconds, then stop every job and watch."""
        if not await self._jobs.wait_all_idle(drain_timeout):
            log.warning("sessiontodo writes still pending after %.1fs are dropped", drain_timeout)
        await self._jobs.aclose()
        await self._publisher.aclose()

"""Client side: store the plans a remote ACP agent sends as its session's todos.

This settles RFC-0034's open ``client_handler.py`` question ("AgentPlanUpdate handling is
complex…"): an ``AgentPlanUpdate`` is the agent's complete plan, so it *replaces* that
session's list — no merging — and only that session's.
"""

from __future__ import annotations

import logging
from typing import Any

from acp.schema import AgentPlanUpdate

from sessiontodo_acp._session_jobs import SessionJobs
from sessiontodo_acp.conversions import keep_known_ids, read_plan_update
from sessiontodo_client import NotFound, RetryPolicy, Todo, TodoClient
from sessiontodo_client.retry import DEFAULT_RETRY

log = logging.getLogger(__name__)


class PlanSink:
    """Applies each session's plan updates to sessiontodo strictly in the order they were received.

    The Python SDK runs every incoming notification in its own task, so two plans of one
    session can reach an awaiting handler out of order. ``apply`` therefore does not await:
    it queues the replacement synchronously (arrival order) and one task per session writes
    the queue in order, every one of them, so updates are never applied out of order and none
    is lost. While sessiontodo is unreachable the latest plan is retried with backoff until it
    is stored, however long that takes (an older plan that is failing gives way to a newer one);
    errors are logged, never raised into the ACP connection. Give it a client whose calls wait
    briefly for a connection (``TodoClient.connect(…, ready_timeout=0.5)``): the sink retries on
    its own, and a write waiting the client's whole timeout holds up the plans behind it.
    """

    def __init__(self, todos: TodoClient, backoff: RetryPolicy = DEFAULT_RETRY) -> None:
        self._todos = todos
        self._jobs = SessionJobs(backoff)
        self._stored: dict[str, list[Todo]] = {}

    def apply(self, session_id: str, update: AgentPlanUpdate) -> None:
        """Queue ``update`` as the replacement of the session's todos; call it before any await."""
        reading = read_plan_update(update)
        for problem in reading.problems:
            log.warning("session %s: plan %s", session_id, problem)

        async def replace() -> None:
            await self._replace(session_id, reading.todos)

        self._jobs.submit(session_id, replace, f"plan of {len(reading.todos)} entries", replaceable=True)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Drop-in ``acp.Client.session_update``: plan updates are applied, others ignored."""
        if isinstance(update, AgentPlanUpdate):
            self.apply(session_id, update)

    def session_new(self, session_id: str) -> None:
        """A new ACP session: queue the creation of its sessiontodo session."""

        async def create() -> None:
            await self._todos.create_session(session_id)

        self._jobs.submit(session_id, create, "create session")

    def session_close(self, session_id: str) -> None:
        """A closed ACP session (``session/close``): forget it once its pending plans are written; the plan stays."""

        async def forget() -> None:
            self._stored.pop(session_id, None)

        self._jobs.submit(session_id, forget, "forget the closed session")

    def session_delete(self, session_id: str) -> None:
        """A deleted ACP session (``session/delete``): remove its sessiontodo session; pending plans are moot."""

        async def remove() -> None:
            await self._todos.remove_session(session_id)
            self._stored.pop(session_id, None)

        self._jobs.submit(session_id, remove, "remove session", supersedes=True)

    async def flush(self, session_id: str) -> None:
        """Wait until every update received so far for the session has been applied (or dropped);
        while sessiontodo is down, that is once it is back."""
        await self._jobs.wait_idle(session_id)

    async def aclose(self, timeout: float = 2.0) -> None:
        """Give queued writes ``timeout`` seconds, then drop what is left."""
        if not await self._jobs.wait_all_idle(timeout):
            log.warning("plan writes still pending after %.1fs are dropped", timeout)
        await self._jobs.aclose()

    async def __aenter__(self) -> PlanSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _replace(self, session_id: str, todos: list[Todo]) -> None:
        with_ids = keep_known_ids(todos, self._stored.get(session_id, []))
        try:
            stored = await self._todos.replace_todos(session_id, with_ids)
        except NotFound:
            await self._todos.create_session(session_id)
            stored = await self._todos.replace_todos(session_id, keep_known_ids(todos, []))
        self._stored[session_id] = stored.todos

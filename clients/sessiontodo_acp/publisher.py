"""Agent side: show each ACP session's sessiontodo list to the editor as ACP plan updates."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from sessiontodo_acp.conversions import plan_update_from_todos
from sessiontodo_client import ChangeKind, NotFound, TodoClient, WatchEvent

log = logging.getLogger(__name__)

Deliver = Callable[[str, WatchEvent], Awaitable[None]]
"""Shows one session's list (``event.todos``, at ``event.revision``) to the editor."""


class EditorConnection(Protocol):
    """What the publisher needs of an ACP agent-side connection (``acp.AgentSideConnection``)."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None: ...


class PlanPublisher:
    """Watches sessions' todos and sends each change to the editor: the full list, in revision order.

    One watch task per session, owned by the publisher: a session's updates are delivered one
    after another in revision order, and a watch only ever sees its own session. Watches
    survive sessiontodo restarts (the client resumes after the last revision delivered).
    """

    def __init__(self, todos: TodoClient, deliver: Deliver, *, deliver_removals: bool = False) -> None:
        self._todos = todos
        self._deliver = deliver
        self._deliver_removals = deliver_removals
        """Also hand ``deliver`` the SESSION_REMOVED that ends a watch (the proxy tells the editor a plan is gone)."""
        self._watches: dict[str, asyncio.Task[None]] = {}

    @classmethod
    def to_editor(cls, todos: TodoClient, editor: EditorConnection) -> PlanPublisher:
        """A publisher that sends ``session/update`` plan notifications over an ACP connection."""

        async def deliver(session_id: str, event: WatchEvent) -> None:
            await editor.session_update(session_id=session_id, update=plan_update_from_todos(event.todos))

        return cls(todos, deliver)

    async def session_new(self, session_id: str) -> None:
        """A new ACP session: create its sessiontodo session and publish its changes from now on."""
        session, _ = await self._todos.create_session(session_id)
        self.watch(session_id, after_revision=session.revision)

    async def session_load(self, session_id: str) -> None:
        """A loaded ACP session: create its session if need be, re-send its current plan, then its changes."""
        await self._todos.create_session(session_id)
        self.watch(session_id, restart=True)

    async def session_close(self, session_id: str) -> None:
        """A closed ACP session (``session/close``): stop publishing; the session and its plan stay."""
        await self.unwatch(session_id)

    async def session_delete(self, session_id: str) -> None:
        """A deleted ACP session (``session/delete``): stop publishing and remove its sessiontodo session."""
        await self.unwatch(session_id)
        await self._todos.remove_session(session_id)

    def watch(self, session_id: str, after_revision: int | None = None, *, restart: bool = False) -> None:
        """Publish the session's list: its current state first, or only changes after ``after_revision``.

        Does nothing if the session is already watched, unless ``restart``.
        """
        running = self._watches.get(session_id)
        if running is not None and not running.done():
            if not restart:
                return
            running.cancel()
        task = asyncio.get_running_loop().create_task(self._publish(session_id, after_revision))
        self._watches[session_id] = task
        task.add_done_callback(lambda done: self._forget(session_id, done))

    def watching(self, session_id: str) -> bool:
        task = self._watches.get(session_id)
        return task is not None and not task.done()

    async def unwatch(self, session_id: str) -> None:
        """Stop publishing the session; waits until its watch has ended."""
        task = self._watches.pop(session_id, None)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def aclose(self) -> None:
        """Stop every watch."""
        tasks = list(self._watches.values())
        self._watches.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def __aenter__(self) -> PlanPublisher:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _forget(self, session_id: str, task: asyncio.Task[None]) -> None:
        if self._watches.get(session_id) is task:
            del self._watches[session_id]

    async def _publish(self, session_id: str, after_revision: int | None) -> None:
        events = self._todos.watch(session_id, after_revision)
        try:
            async for event in events:
                if event.kind is ChangeKind.SESSION_REMOVED:
                    log.info("session %s was removed; no more plan updates", session_id)
                    if self._deliver_removals:
                        await self._deliver(session_id, event)
                    return
                await self._deliver(session_id, event)
        except NotFound:
            log.warning("session %s does not exist in sessiontodo; not publishing its plan", session_id)
        except Exception:
            log.exception("publishing the plan of session %s failed", session_id)
        finally:
            await events.aclose()

"""TodoBridge: sessiontodo's per-session lists as OpenCode todo calls and ``todo.updated`` events.

An OpenCode-compatible server embeds one bridge over an injected ``TodoClient``: it
reports its session lifecycle (created, deleted), reads and writes lists, and forwards
the bridge's events to its own bus. The bridge owns exactly one WatchTodos per known
session and fans each change out to every subscription that follows that session,
through a bounded buffer per subscription, so one slow consumer never delays the others.

A session becomes known when it is created, read or written through the bridge, or
when a subscription names it; it is forgotten when it is removed (through the bridge
or any other client of the service).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import asynccontextmanager
from typing import Any

import grpc

from sessiontodo_client import ChangeKind, NotFound, ServiceError, TodoClient, Unavailable, WatchEvent
from sessiontodo_opencode.fanout import FanOut, Subscription
from sessiontodo_opencode.models import SessionInfo, Todo, TodoUpdated
from sessiontodo_opencode.translate import session_info, todo_to_service, todo_updated, todos_from_service

log = logging.getLogger(__name__)


class _SessionWatch:
    """The one WatchTodos of a session, and the latest list it delivered."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.latest: TodoUpdated | None = None
        self.revision = -1
        self.error: ServiceError | None = None
        """Why the watch could not start (NOT_FOUND for an unknown session)."""
        self.announced_removal = False
        self.ready = asyncio.Event()
        """Set once the first snapshot arrived, or the watch ended without one."""
        self.ended = asyncio.Event()
        self._progressed = asyncio.Event()

    def advance(self, event: WatchEvent) -> TodoUpdated:
        self.latest = todo_updated(self.session_id, event.todos)
        self.revision = event.revision
        self._wake()
        return self.latest

    def end(self) -> None:
        self.ready.set()
        self.ended.set()
        self._wake()

    def _wake(self) -> None:
        self._progressed.set()
        self._progressed = asyncio.Event()

    async def reached(self, revision: int) -> None:
        """Return once the watch has delivered ``revision``, or has ended."""
        while self.revision < revision and not self.ended.is_set():
            await self._progressed.wait()


class TodoBridge:
    """Session lifecycle, lists and events of OpenCode, backed by one sessiontodo service.

    Use as ``async with TodoBridge(client) as bridge``; closing cancels every watch and
    ends every subscription. ``ready_timeout`` bounds how long a call waits for a new
    session's watch to start (and for a write's event to be published).
    """

    def __init__(
        self,
        client: TodoClient,
        *,
        subscriber_buffer: int = 1024,
        catch_up_window: float = 2.0,
        ready_timeout: float = 10.0,
    ) -> None:
        self._client = client
        self._ready_timeout = ready_timeout
        self._watches: dict[str, _SessionWatch] = {}
        self._fan_out = FanOut[TodoUpdated](subscriber_buffer=subscriber_buffer, catch_up_window=catch_up_window)
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> TodoBridge:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        self._fan_out.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def subscriber_count(self) -> int:
        return self._fan_out.subscriber_count

    @property
    def watched_sessions(self) -> list[str]:
        return sorted(self._watches)

    # Session lifecycle

    async def create_session(self, session_id: str = "", parent_id: str = "") -> SessionInfo:
        """Create the session (or get the existing one) and start following it; empty id: generated."""
        session, _ = await self._client.create_session(session_id, parent_id)
        await self._watched(session.session_id)
        return session_info(session)

    async def delete_session(self, session_id: str) -> bool:
        """Remove the session and its children; each gets a final ``todo.updated`` with ``[]``.

        Returns False if the session did not exist. When this returns, the final events
        are in every subscription's buffer.
        """
        watches = dict(self._watches)  # a watch may announce its removal and go before the call returns
        removed = await self._client.remove_session(session_id)
        for removed_id in removed:
            watch = watches.get(removed_id) or self._watches.get(removed_id)
            if watch is not None:
                try:
                    await asyncio.wait_for(watch.ended.wait(), self._ready_timeout)
                except TimeoutError:
                    log.warning("watch of removed session %s did not end in time", removed_id)
            if watch is None or not watch.announced_removal:
                self._publish(todo_updated(removed_id, []))
        return bool(removed)

    async def watch_session(self, session_id: str) -> None:
        """Follow the session: from now on each of its changes becomes a ``todo.updated`` event.

        Raises ``NotFound`` for an unknown session.
        """
        await self._watched(session_id)

    # Lists

    async def get_todos(self, session_id: str) -> list[Todo]:
        """The session's list, in order. Raises ``NotFound`` for an unknown session.

        The session is followed first and the answer waits until its watch has delivered
        the revision read, so events published later are never older than the answer.
        """
        watch = await self._watched(session_id)
        todo_list = await self._client.get_todos(session_id)
        await self._published(watch, todo_list.revision)
        return todos_from_service(todo_list.todos)

    async def write_todos(self, session_id: str, todos: Sequence[Todo]) -> list[Todo]:
        """Replace the session's whole list (OpenCode's ``todowrite``); returns it as stored.

        When this returns, the change's ``todo.updated`` is in every subscription's buffer.
        Raises ``InvalidArgument`` (nothing changed) or ``NotFound``.
        """
        watch = await self._watched(session_id)  # before writing, so the change arrives as an event
        todo_list = await self._client.replace_todos(session_id, [todo_to_service(todo) for todo in todos])
        await self._published(watch, todo_list.revision)
        return todos_from_service(todo_list.todos)

    # Events

    @asynccontextmanager
    async def subscribe(self, session_id: str | None = None) -> AsyncIterator[Subscription[TodoUpdated]]:
        """Changes of one session, or of every known session when ``session_id`` is None.

        No replay of the past but the lists changed within the catch-up window (see ``fanout``).
        Raises ``NotFound`` for an unknown session and ``Unavailable`` once the bridge is closed.
        """
        if session_id is not None:
            await self._watched(session_id)
        if self._closed:
            raise _closed_error()
        with self._fan_out.subscribe(lambda event: session_id in (None, event.session_id)) as subscription:
            yield subscription

    def _publish(self, event: TodoUpdated) -> None:
        self._fan_out.publish(event)

    # Watches

    async def _watched(self, session_id: str) -> _SessionWatch:
        if self._closed:
            raise _closed_error()
        watch = self._watches.get(session_id)
        if watch is None:
            watch = self._watches[session_id] = _SessionWatch(session_id)
            self._own(self._follow(watch))
        await watch.ready.wait()
        if watch.error is not None:
            raise watch.error
        return watch

    async def _published(self, watch: _SessionWatch, revision: int) -> None:
        try:
            await asyncio.wait_for(watch.reached(revision), self._ready_timeout)
        except TimeoutError:
            log.warning("watch of %s has not delivered revision %d yet", watch.session_id, revision)

    def _own(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _follow(self, watch: _SessionWatch) -> None:
        """Run the session's watch until it is removed, publishing each change as a full list."""
        events = self._client.watch(watch.session_id)
        try:
            async with asyncio.timeout(self._ready_timeout):
                snapshot = await anext(events, None)
            if snapshot is None:
                raise Unavailable(grpc.StatusCode.UNAVAILABLE, f"the watch of session {watch.session_id} ended at once")
            watch.advance(snapshot)  # the current state, not a change: subscriptions start from it
            watch.ready.set()
            async for event in events:
                if event.kind is ChangeKind.SESSION_REMOVED:
                    self._announce_removal(watch)
                    return
                self._publish(watch.advance(event))
            log.warning("watch of session %s ended without its removal", watch.session_id)
        except NotFound as error:
            if watch.ready.is_set():  # removed while the watch was reconnecting
                self._announce_removal(watch)
            else:
                watch.error = error
        except TimeoutError:
            watch.error = Unavailable(
                grpc.StatusCode.UNAVAILABLE, f"the watch of session {watch.session_id} did not start"
            )
        except ServiceError as error:
            log.warning("watch of session %s failed: %s", watch.session_id, error)
            watch.error = error
        finally:
            await events.aclose()
            if not watch.ready.is_set() and watch.error is None:  # cancelled by aclose() while starting
                watch.error = _closed_error()
            if self._watches.get(watch.session_id) is watch:
                del self._watches[watch.session_id]
            watch.end()

    def _announce_removal(self, watch: _SessionWatch) -> None:
        watch.announced_removal = True
        self._publish(todo_updated(watch.session_id, []))


def _closed_error() -> Unavailable:
    return Unavailable(grpc.StatusCode.UNAVAILABLE, "the OpenCode bridge is shutting down")

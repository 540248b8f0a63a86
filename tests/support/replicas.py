"""Several stores on one Redis or etcd standing for replicas (no gRPC): opening them, and the writes,
reads and listening the replica tests share (the replica contract and each store's own tests)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.mutations import Mutation, ReplaceTodos
from sessiontodo_server.domain.store import Written
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, SessionInfo, Todo
from sessiontodo_server.stores.etcd import EtcdStore
from sessiontodo_server.stores.redis import RedisStore
from tests.support import eventually

HISTORY = 8
LIMITS = Limits()

SharedStore = RedisStore | EtcdStore
"""A store several replicas can share."""
S = TypeVar("S", bound=SharedStore)
OpenReplica = Callable[..., Awaitable[S]]
"""``open_replica(url=None, history_limit=HISTORY, feed_history=4096)``: another opened store."""


@asynccontextmanager
async def replicas(make_store: Callable[[str, int, int], S], url: str) -> AsyncIterator[OpenReplica[S]]:
    """Open stores of one backend at ``url`` (or another URL given), each one a replica; all closed on exit."""
    opened: list[S] = []

    async def open_replica(other_url: str | None = None, history_limit: int = HISTORY, feed_history: int = 4096) -> S:
        store = make_store(other_url or url, history_limit, feed_history)
        await store.open()
        opened.append(store)
        return store

    try:
        yield open_replica
    finally:
        for store in opened:
            await store.close()


def listen(store: SharedStore) -> list[Change]:
    """Every change ``store`` reports from other replicas, in the order reported."""
    heard: list[Change] = []
    store.on_external_change(heard.append)
    return heard


async def heard_up_to(heard: list[Change], barrier: Change) -> None:
    """Wait until ``barrier`` is heard: changes are heard in feed order, so every change before it in
    the feed has been heard by then, or never will be."""
    await eventually(lambda: barrier.cursor in [change.cursor for change in heard])


async def write(store: SharedStore, session_id: str, mutation: Mutation, expected: int | None = None) -> Written:
    return await store.write(Write(session_id, mutation, expected), WriteContext("", "test", 1.0, LIMITS))


async def replace(store: SharedStore, session_id: str, *contents: str) -> Change:
    """Replace the session's list with todos of ``contents``; the change it made."""
    todos = tuple(Todo(f"t{n}", content) for n, content in enumerate(contents))
    written = await write(store, session_id, ReplaceTodos(todos))
    assert written.change is not None
    return written.change


async def create(store: SharedStore, session_id: str, parent_id: str = "", max_sessions: int = 1000) -> Change | None:
    _, created = await store.create_session(session_id, SessionInfo(parent_id), max_sessions, "test")
    return created


def summary(changes: list[Change]) -> list[tuple[ChangeKind, str, int, tuple[str, ...]]]:
    return [(c.kind, c.session_id, c.revision, tuple(t.content for t in c.todos)) for c in changes]


async def pause_following(store: SharedStore) -> None:
    """What a replica that is slow to read the feed looks like: it stops following until resumed."""
    task = store._task
    assert task is not None
    # Cancelled until it stops, as RedisStore._stop_following does: Python 3.11 can swallow one.
    while not task.done():
        task.cancel()
        await asyncio.wait([task], timeout=0.1)


def resume_following(store: SharedStore) -> None:
    store._task = asyncio.create_task(store._follower.run())

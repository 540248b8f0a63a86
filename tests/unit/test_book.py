"""TodoStreams' watch feed driven directly, where exact interleavings can be forced (no gRPC)."""

from __future__ import annotations

import asyncio
import time

from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID
from sessiontodo_server.domain.streams import TodoStreams
from sessiontodo_server.domain.values import EVERY_SESSION, ChangeKind, Limits, TodoDraft
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.stores.memory import MemoryStore


async def make_book(progress_interval: float = 60) -> tuple[TodoBook, TodoStreams]:
    store = MemoryStore()
    await store.open()
    hub = WatchHub(buffer_size=8, max_watchers=10)
    book = TodoBook(store, hub, Limits())
    return book, TodoStreams(book, store, hub, Limits(), progress_interval=progress_interval)


async def test_a_watch_of_a_removed_session_never_sees_the_recreated_session() -> None:
    book, streams = await make_book()
    await book.create_session("s")
    old = streams.watch("s", None)
    snapshot = await anext(old)
    # Removal, re-creation and a write all happen before the old watcher runs again.
    await book.remove_session("s")
    await book.create_session("s")
    await book.add("s", TodoDraft(content="new incarnation"))

    final = await anext(old)
    assert (final.kind, final.revision) == (ChangeKind.SESSION_REMOVED, snapshot.revision + 1)
    assert [change async for change in old] == []
    assert book.watcher_count == 0


async def test_every_watch_ends_with_its_own_unavailable_error_on_shutdown() -> None:
    book, streams = await make_book()
    watches = [streams.watch(GLOBAL_SESSION_ID, None) for _ in range(2)]
    for watch in watches:
        await anext(watch)
    book.shut_down()
    errors = []
    for watch in watches:
        try:
            await anext(watch)
        except Exception as error:  # the error itself is what is checked
            errors.append(error)
    assert [type(error).__name__ for error in errors] == ["Unavailable", "Unavailable"]
    assert errors[0] is not errors[1]


async def test_a_change_published_as_a_quiet_feeds_progress_timer_fires_is_delivered_not_skipped() -> None:
    """The feed's PROGRESS bookmark says every change up to the hub's position was seen. A change
    published after the feed's timer woke it with "nothing came" but before the feed ran again
    (a busy event loop: a write resuming as the feed's quiet second ends) was then covered by that
    bookmark and dropped as already seen: a silent gap (issue 36, seen on etcd after an outage)."""
    progress_interval = 0.05
    book, streams = await make_book(progress_interval)
    await book.create_session("s")
    feed = streams.feed("", False, EVERY_SESSION)
    first = asyncio.create_task(anext(feed))
    await asyncio.sleep(0)  # the feed runs up to its wait: its progress timer is armed
    await asyncio.sleep(0)
    time.sleep(progress_interval * 2)  # noqa: ASYNC251 (the loop kept busy past the feed's deadline, on purpose)
    # The next turn runs this task first, then the timer that fell due: it wakes the feed, whose
    # step is queued behind this task's next one. So the write below comes after the timer fired
    # and before the feed runs again.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    written = await book.replace("s", [TodoDraft(content="written as the feed woke")])
    try:
        message = await asyncio.wait_for(first, 10)
    finally:
        await feed.aclose()
    # Nothing else happened: the feed's next message is that change, not a bookmark past it.
    assert (message.change.kind, message.change.revision) == (ChangeKind.TODOS_REPLACED, written.revision)

"""TodoStreams' watch feed driven directly, where exact interleavings can be forced (no gRPC)."""

from __future__ import annotations

from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID
from sessiontodo_server.domain.streams import TodoStreams
from sessiontodo_server.domain.values import ChangeKind, Limits, TodoDraft
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.stores.memory import MemoryStore


async def make_book() -> tuple[TodoBook, TodoStreams]:
    store = MemoryStore()
    await store.open()
    hub = WatchHub(buffer_size=8, max_watchers=10)
    book = TodoBook(store, hub, Limits())
    return book, TodoStreams(book, store, hub, Limits(), progress_interval=60)


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

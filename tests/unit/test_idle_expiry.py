"""Idle expiry on a manual clock: writes keep a session with a TTL alive, and idleness past its TTL
ends it. TodoBook takes its clock, so nothing here waits on real time; the path of an expiry
through gRPC is in tests/system/test_session_metadata.py."""

from __future__ import annotations

from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.values import Limits, TodoDraft
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.stores.memory import MemoryStore
from tests.support import ManualClock


async def make_book(clock: ManualClock, default_idle_ttl: float) -> TodoBook:
    store = MemoryStore()
    await store.open()
    hub = WatchHub(buffer_size=8, max_watchers=10)
    return TodoBook(store, hub, Limits(), default_idle_ttl=default_idle_ttl, clock=clock)


async def test_writes_keep_a_session_with_a_ttl_alive() -> None:
    clock = ManualClock()
    book = await make_book(clock, default_idle_ttl=1)
    session, _ = await book.create_session("busy")
    assert session.info.idle_ttl == 1  # the book's default applies

    for n in range(8):
        await book.add("busy", TodoDraft(content=str(n)))
        clock.now += 0.25
        assert await book.expire_due() == []
    assert (await book.get("busy")).revision == 8  # 2 s of life, with a TTL of 1 s

    clock.now += 0.5  # idle for 0.75 s
    assert await book.expire_due() == []
    clock.now += 0.5  # idle for 1.25 s
    assert await book.expire_due() == ["busy"]
    sessions, _ = await book.list_sessions()
    assert sessions == []

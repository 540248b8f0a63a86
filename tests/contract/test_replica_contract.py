"""The replica contract: several stores on one Redis or one etcd stand for replicas of a server, and
every store several replicas can share keeps it alike (no gRPC). What only one store does (Redis
cluster slots and scripts, etcd leases, compaction and Txn limits) lives in ``tests/peers/<store>``."""

from __future__ import annotations

import asyncio

import pytest

from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.errors import LimitExceeded, RevisionMismatch, SessionNotFound, Unavailable
from sessiontodo_server.domain.mutations import AddTodo, ClaimTodo, ReplaceTodos
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, Written
from sessiontodo_server.domain.values import RemovalReason, SessionInfo, Todo
from sessiontodo_server.domain.watch import WatchHub
from tests.contract.conftest import SharedBackend
from tests.support import eventually
from tests.support.replicas import (
    LIMITS,
    OpenReplica,
    SharedStore,
    create,
    heard_up_to,
    listen,
    replace,
    summary,
    write,
)

Open = OpenReplica[SharedStore]


async def test_a_replica_hears_every_change_others_make_in_feed_order(open_replica: Open) -> None:
    first, second, reader = await open_replica(), await open_replica(), await open_replica()
    heard = listen(reader)
    made = [await create(first, "s")]
    for n in range(10):
        made.append(await replace([first, second][n % 2], "s", f"v{n}"))
    made += await second.remove_session("s", RemovalReason.REMOVED)
    await eventually(lambda: len(heard) == len(made))
    assert summary(heard) == summary([c for c in made if c is not None])
    assert [c.cursor for c in heard] == [c.cursor for c in made if c is not None]


async def test_a_replica_does_not_hear_its_own_changes(open_replica: Open) -> None:
    writer, other = await open_replica(), await open_replica()
    heard_by_writer = listen(writer)
    await create(writer, "s")
    await replace(writer, "s", "mine")
    theirs = await replace(other, "s", "theirs")
    barrier = await replace(other, "s", "later")
    await heard_up_to(heard_by_writer, barrier)
    assert summary(heard_by_writer) == summary([theirs, barrier])


async def test_a_write_is_answered_after_every_earlier_change_of_other_replicas_was_heard(
    open_replica: Open,
) -> None:
    first, second = await open_replica(), await open_replica()
    heard = listen(second)
    created = await create(first, "s")
    assert created is not None
    earlier = [created, *[await replace(first, "s", f"elsewhere {n}") for n in range(5)]]
    await replace(second, "s", "mine")
    assert summary(heard) == summary(earlier)  # already, before its own change is published


async def test_a_replica_hears_a_removal_made_by_another_replica_with_its_reason(open_replica: Open) -> None:
    remover, other = await open_replica(), await open_replica()
    heard = listen(other)
    await create(remover, "parent")
    await create(remover, "child", "parent")
    removed = await remover.remove_session("parent", RemovalReason.EXPIRED)
    await eventually(lambda: len(heard) == 4)
    assert summary(heard[2:]) == summary(removed)
    assert {c.reason for c in heard[2:]} == {RemovalReason.EXPIRED}


async def test_conditional_writes_racing_through_several_replicas_have_exactly_one_winner(open_replica: Open) -> None:
    replicas = [await open_replica() for _ in range(3)]
    await create(replicas[0], "s")
    for round_ in range(10):
        state = await replicas[1].get("s")
        assert state is not None
        attempts = [
            write(r, "s", ReplaceTodos((Todo("t", f"round {round_} by {n}"),)), state.revision)
            for n, r in enumerate(replicas)
        ]
        outcomes = await asyncio.gather(*attempts, return_exceptions=True)
        winners = [o for o in outcomes if isinstance(o, Written)]
        assert len(winners) == 1
        assert all(isinstance(o, RevisionMismatch) for o in outcomes if o is not winners[0])
        assert await replicas[2].get("s") == winners[0].state


async def test_unconditional_writers_on_two_replicas_never_fail_on_contention(open_replica: Open) -> None:
    """0.1 gave up after 32 compare-and-set attempts: 10% UNAVAILABLE with 32 writers on two replicas."""
    replicas = [await open_replica(), await open_replica()]
    await create(replicas[0], "s")
    writers = [
        write(replicas[n % 2], "s", AddTodo(Todo(f"w{n}-{k}", f"writer {n} #{k}"), None, True))
        for n in range(32)
        for k in range(5)
    ]
    written = await asyncio.gather(*writers)
    assert sorted(w.state.revision for w in written) == list(range(1, 161))
    state = await replicas[1].get("s")
    assert state is not None
    assert len(state.todos) == 160


async def test_a_request_id_recorded_through_one_replica_is_honoured_through_another(open_replica: Open) -> None:
    first, second = await open_replica(), await open_replica()
    await create(first, "s")
    add = AddTodo(Todo("t", "once"), None, False)
    original = await first.write(Write("s", add), WriteContext("req", "", 1.0, LIMITS))
    await replace(second, "s", "moved on")  # what the first replica may have cached is stale now
    retried = await first.write(Write("s", add), WriteContext("req", "", 2.0, LIMITS))
    elsewhere = await second.write(Write("s", add), WriteContext("req", "", 2.0, LIMITS))
    assert retried.change is None
    assert retried.result == original.result
    assert elsewhere.change is None
    assert elsewhere.result == original.result


async def test_a_refusal_is_decided_on_the_current_version_not_a_cached_one(open_replica: Open) -> None:
    first, second = await open_replica(), await open_replica()
    await create(first, "s")
    stale = await replace(first, "s", "cached here")
    current = await replace(second, "s", "written elsewhere")
    written = await write(first, "s", ReplaceTodos((Todo("t0", "written elsewhere"),)), expected=stale.revision + 1)
    assert written.change is None
    assert written.state.revision == current.revision
    with pytest.raises(RevisionMismatch) as refused:
        await write(first, "s", ReplaceTodos(()), expected=stale.revision)
    assert refused.value.actual == current.revision


async def test_the_session_limit_counts_sessions_created_through_every_replica(open_replica: Open) -> None:
    first, second = await open_replica(), await open_replica()
    await create(first, "a", max_sessions=2)
    await create(second, "b", max_sessions=2)
    with pytest.raises(LimitExceeded):
        await create(first, "c", max_sessions=2)


async def test_a_session_removed_on_one_replica_and_recreated_on_another_starts_above_its_removal(
    open_replica: Open,
) -> None:
    first, second = await open_replica(), await open_replica()
    await create(first, "s")
    await replace(first, "s", "old")
    (removal,) = await first.remove_session("s", RemovalReason.REMOVED)
    created = await create(second, "s")
    assert created is not None
    assert created.revision > removal.revision
    with pytest.raises(SessionNotFound):
        await replace(first, "s-gone", "never")


async def test_a_session_written_after_it_came_due_is_not_removed(open_replica: Open) -> None:
    reaper, writer = await open_replica(), await open_replica()
    await reaper.create_session("s", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    assert await reaper.expired(111.0) == ["s"]
    renewal = ReplaceTodos((Todo("t", "busy"),))
    await writer.write(Write("s", renewal), WriteContext("", "", 110.5, LIMITS))
    assert await reaper.remove_session("s", RemovalReason.EXPIRED) == []
    assert await reaper.get("s") is not None
    assert await reaper.expired(119.0) == []
    assert await reaper.expired(121.0) == ["s"]


async def test_the_feed_resumes_on_any_replica_and_snapshots_are_consistent(open_replica: Open) -> None:
    first, second = await open_replica(), await open_replica()
    start, _ = await second.snapshot()
    made = [await create(first, "a"), await replace(first, "a", "x"), await create(second, "b")]
    made.append(await replace(second, "a", "y"))
    feed = await first.feed_after(start)
    assert feed is not None
    assert summary(feed) == summary([c for c in made if c is not None])
    assert first.feed_epoch == second.feed_epoch
    cursor, states = await first.snapshot()
    assert cursor == feed[-1].cursor
    assert [(s.session_id, s.revision) for s in states] == [("a", 2), ("b", 0), (GLOBAL_SESSION_ID, 0)]


async def test_a_feed_cursor_survives_a_restart_of_the_replica_that_gave_it(open_replica: Open) -> None:
    first = await open_replica()
    await create(first, "s")
    given = await replace(first, "s", "before")
    await first.close()
    later = await replace(await open_replica(), "s", "while it was away")
    restarted = await open_replica()
    assert summary(await restarted.feed_after(given.cursor) or []) == summary([later])


async def test_while_its_server_is_down_calls_fail_as_unavailable_without_its_address_and_change_nothing(
    open_replica: Open, shared_backend: SharedBackend
) -> None:
    store = await open_replica()
    await create(store, "s")
    before = await replace(store, "s", "kept")
    shared_backend.kill()
    with pytest.raises(Unavailable) as refused:
        await replace(store, "s", "lost")
    assert str(shared_backend.port) not in str(refused.value)
    assert "127.0.0.1" not in str(refused.value)
    with pytest.raises(Unavailable):
        await store.get("s")
    shared_backend.start()
    state = await store.get("s")
    assert state is not None
    assert state.revision == before.revision
    assert state.todos == before.todos


async def test_the_store_reports_losing_its_server_and_getting_it_back(
    open_replica: Open, shared_backend: SharedBackend
) -> None:
    store = await open_replica()
    reports: list[bool] = []

    async def report(available: bool) -> None:
        reports.append(available)

    store.on_availability_change(report)
    shared_backend.kill()
    await eventually(lambda: reports == [False], timeout=10)
    shared_backend.start()
    await eventually(lambda: reports == [False, True], timeout=10)


async def test_leases_due_while_the_server_is_down_all_lapse_once_it_is_back(
    open_replica: Open, shared_backend: SharedBackend
) -> None:
    """A round of lapses that finds the store unreachable hands every lease it took out back to
    the index, not only the one it was writing: none is left claimed for good."""
    store = await open_replica()
    await create(store, "s")
    context = WriteContext("", "test", 100.0, LIMITS)
    await store.write(Write("s", ReplaceTodos(tuple(Todo(f"t{n}", f"step {n}") for n in range(3)))), context)
    for n in range(3):
        await store.write(Write("s", ClaimTodo(f"t{n}", f"w{n}", 1.0, 100.0)), context)
    clock = [100.5]
    book = TodoBook(store, WatchHub(buffer_size=8, max_watchers=10), LIMITS, clock=lambda: clock[0])
    assert await book.lapse_due() == []  # none due yet; the book now knows the three leases
    clock[0] = 102.0
    shared_backend.kill()
    with pytest.raises(Unavailable):
        await book.lapse_due()
    shared_backend.start()

    lapsed = await book.lapse_due()

    assert sorted(lapsed) == [("s", "t0"), ("s", "t1"), ("s", "t2")]

"""Group commit and the journaled memory store: nothing is seen or acknowledged before it is durable.

A gated journal holds each batch in its worker thread until the test opens the gate, so the
moments between accepting a write and making it durable can be looked at (no gRPC, no sqlite).
Nothing here waits on the clock: a test waits for the journal to hold a batch or to be handed a
record, or for the writes it started to take their first step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import pytest

from sessiontodo_server.domain.batch import Batch, Create, Operation, Outcome, Remove, Write, WriteContext
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.errors import RevisionMismatch, Unavailable
from sessiontodo_server.domain.mutations import AddTodo, ReplaceTodos
from sessiontodo_server.domain.store import AddResult, Written
from sessiontodo_server.domain.streams import TodoStreams
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, SessionInfo, Todo, TodoDraft
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.stores.group_commit import Done, GroupCommit
from sessiontodo_server.stores.memory import Loaded, MemoryStore
from tests.support import eventually

Record = tuple[str, object]


class GatedJournal:
    """A journal that writes nothing: it records its batches, each held until ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.fail = False
        self.batches: list[list[Record]] = []
        self.submitted: list[Record] = []
        """Every record handed to the journal, in order, as soon as it is handed over."""
        self._group = GroupCommit[Record](self._write_batch, threaded=True)

    def _write_batch(self, records: Sequence[Record]) -> None:
        self.entered.set()
        assert self.gate.wait(10)
        if self.fail:
            raise Unavailable("the disk is gone")
        self.batches.append(list(records))

    async def entered_batch(self) -> None:
        """Wait until the worker thread holds a batch."""
        await asyncio.to_thread(self.entered.wait, 10)
        self.entered.clear()

    async def handed(self, record: Record) -> None:
        """Wait until ``record`` has been handed to the journal (the write behind it was accepted)."""
        await eventually(lambda: record in self.submitted)

    def _submit(self, record: Record, done: Done) -> asyncio.Future[None]:
        self.submitted.append(record)
        return self._group.submit(record, done)

    def load(self) -> Loaded:
        return Loaded(feed_epoch=1, cursor=0)

    def create_session(
        self, session_id: str, revision: int, info: SessionInfo, cursor: int, done: Done
    ) -> asyncio.Future[None]:
        return self._submit(("create", session_id), done)

    def commit(
        self,
        change: Change,
        before: tuple[Todo, ...],
        request: tuple[str, AddResult] | None,
        forget_before: int,
        done: Done,
    ) -> asyncio.Future[None]:
        return self._submit(("commit", change.revision), done)

    def remove_sessions(
        self,
        session_ids: list[str],
        marks: list[tuple[str, int]],
        forgotten: list[str],
        floor: int,
        cursor: int,
        done: Done,
    ) -> asyncio.Future[None]:
        return self._submit(("remove", tuple(session_ids)), done)

    def remember_batch(
        self, key: str, fingerprint: str, outcomes: tuple[Outcome, ...], at: float, forgotten: list[str], done: Done
    ) -> asyncio.Future[None]:
        return self._submit(("batch", key), done)

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """Never unavailable."""

    async def close(self) -> None:
        await self._group.drain()
        self._group.close()


@pytest.fixture
async def journal() -> AsyncIterator[GatedJournal]:
    journal = GatedJournal()
    yield journal
    journal.gate.set()


async def open_store(journal: GatedJournal) -> MemoryStore:
    store = MemoryStore(journal=journal)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    journal.entered.clear()
    return store


async def first_steps_taken() -> None:
    """Let the writes just started take their first step. ``MemoryStore.write`` accepts or refuses a
    write without awaiting and only then waits for the durability of what it built on; the loop runs
    ready tasks in the order they were started, so one turn of it is enough (no clock involved)."""
    await asyncio.sleep(0)


def replace(store: MemoryStore, content: str, expected_revision: int | None = None) -> asyncio.Future[Written]:
    """A ReplaceTodos of session "s" with one todo, started now (accepted before the caller goes on)."""
    return asyncio.ensure_future(
        store.write(
            Write("s", ReplaceTodos((Todo(f"t-{content}", content),)), expected_revision),
            WriteContext("", "", 0.0, Limits()),
        )
    )


async def test_writes_made_while_a_batch_is_written_share_the_next_batch(journal: GatedJournal) -> None:
    store = await open_store(journal)
    journal.gate.clear()
    first = replace(store, "one")
    await journal.entered_batch()
    later = [replace(store, f"more {n}") for n in (2, 3, 4)]
    await journal.handed(("commit", 4))
    journal.gate.set()
    written = await asyncio.gather(first, *later)
    assert [w.change.revision for w in written if w.change] == [1, 2, 3, 4]
    assert journal.batches[-2:] == [[("commit", 1)], [("commit", 2), ("commit", 3), ("commit", 4)]]
    await store.close()


async def test_in_the_loop_the_writes_of_one_loop_iteration_share_a_batch() -> None:
    batches: list[list[int]] = []
    done: list[tuple[int, BaseException | None]] = []
    group = GroupCommit[int](lambda records: batches.append(list(records)), threaded=False)

    def hook(number: int) -> Done:
        return lambda error: done.append((number, error))

    futures = [group.submit(n, hook(n)) for n in range(3)]
    assert batches == []  # nothing is written before the loop runs again
    await asyncio.gather(*futures)
    later = group.submit(3, hook(3))
    await later
    assert batches == [[0, 1, 2], [3]]
    assert done == [(0, None), (1, None), (2, None), (3, None)]
    await group.drain()
    group.close()


async def test_a_write_is_read_only_once_durable_but_the_next_write_builds_on_it(journal: GatedJournal) -> None:
    store = await open_store(journal)
    journal.gate.clear()
    write = replace(store, "one")
    await journal.entered_batch()

    visible = await store.get("s")
    assert visible is not None
    assert (visible.revision, visible.todos) == (0, ())
    assert await store.changes_after("s", 0) == []
    cursor, states = await store.snapshot()
    assert [state.revision for state in states if state.session_id == "s"] == [0]
    assert await store.feed_after(cursor) == []
    next_write = replace(store, "two", expected_revision=1)  # builds on the accepted, not yet durable, write
    await journal.handed(("commit", 2))
    assert not write.done()
    assert not next_write.done()

    journal.gate.set()
    assert [w.state.revision for w in await asyncio.gather(write, next_write)] == [1, 2]
    durable = await store.get("s")
    assert durable is not None
    assert [todo.content for todo in durable.todos] == ["two"]
    assert [change.revision for change in await store.changes_after("s", 0) or []] == [1, 2]
    assert [change.revision for change in await store.feed_after(cursor) or []] == [1, 2]
    await store.close()


async def test_answers_from_the_accepted_state_wait_until_it_is_durable(journal: GatedJournal) -> None:
    """A refusal or a write that changes nothing is judged on the accepted state: never answered
    before that state is durable, since it may yet be undone."""
    store = await open_store(journal)
    journal.gate.clear()
    write = replace(store, "one")
    await journal.entered_batch()
    refused = replace(store, "stale", expected_revision=0)
    unchanged = replace(store, "one")
    await first_steps_taken()  # neither reaches the journal: one is refused, the other changes nothing
    assert not refused.done()
    assert not unchanged.done()

    journal.gate.set()
    await write
    with pytest.raises(RevisionMismatch):
        await refused
    same = await unchanged
    assert same.change is None
    assert same.state.revision == 1
    assert len(journal.batches[-1]) == 1  # only the first write reached the journal
    await store.close()


async def test_a_retried_request_id_is_answered_once_its_first_write_is_durable(journal: GatedJournal) -> None:
    store = await open_store(journal)

    def add() -> asyncio.Future[Written]:
        mutation = AddTodo(Todo("a", "once"), None, id_given=True)
        limits = Limits()
        return asyncio.ensure_future(store.write(Write("s", mutation), WriteContext("r1", "", 0.0, limits)))

    journal.gate.clear()
    first = add()
    await journal.entered_batch()
    retry = add()
    await first_steps_taken()  # a retry is answered from memory, not the journal
    assert not retry.done()

    journal.gate.set()
    original, retried = await first, await retry
    assert retried.change is None
    assert retried.result == original.result
    state = await store.get("s")
    assert state is not None
    assert [todo.id for todo in state.todos] == ["a"]
    await store.close()


async def test_a_watcher_gets_a_write_only_once_it_is_durable(journal: GatedJournal) -> None:
    store = await open_store(journal)
    hub = WatchHub(buffer_size=8, max_watchers=10)
    book = TodoBook(store, hub, Limits())
    watch = TodoStreams(book, store, hub, Limits(), progress_interval=60).watch("s", None)
    assert (await anext(watch)).kind is ChangeKind.SNAPSHOT
    next_change = asyncio.ensure_future(anext(watch))

    journal.gate.clear()
    write = asyncio.ensure_future(book.add("s", TodoDraft(content="durable first"), request_id="r1"))
    await journal.entered_batch()  # the write is in the batch the journal holds: not durable yet
    assert not next_change.done()
    assert not write.done()

    journal.gate.set()
    change = await asyncio.wait_for(next_change, 10)
    assert (change.kind, change.revision) == (ChangeKind.TODO_ADDED, (await write).revision)
    await watch.aclose()
    await store.close()


async def test_a_failed_batch_fails_its_writes_and_those_queued_behind_it_and_undoes_them(
    journal: GatedJournal,
) -> None:
    store = await open_store(journal)
    journal.gate.clear()
    journal.fail = True
    first = replace(store, "lost")
    await journal.entered_batch()
    queued = replace(store, "lost too", expected_revision=1)
    await journal.handed(("commit", 2))
    journal.gate.set()
    for write in (first, queued):
        with pytest.raises(Unavailable):
            await write

    journal.fail = False
    kept = await replace(store, "kept", expected_revision=0)  # the next write builds on what is durable
    assert kept.change is not None
    assert kept.change.revision == 1
    state = await store.get("s")
    assert state is not None
    assert [todo.content for todo in state.todos] == ["kept"]
    await store.close()


async def test_a_failed_creation_is_undone(journal: GatedJournal) -> None:
    store = await open_store(journal)
    journal.fail = True
    with pytest.raises(Unavailable):
        await store.create_session("doomed", SessionInfo(), 10, "")
    assert await store.get("doomed") is None
    journal.fail = False
    _, change = await store.create_session("doomed", SessionInfo(), 10, "")
    assert change is not None
    assert change.cursor == (await store.snapshot())[0]
    await store.close()


async def test_a_batch_is_one_journal_batch_written_whole(journal: GatedJournal) -> None:
    store = await open_store(journal)
    journal.gate.clear()
    operations: list[Operation] = [Create("b", SessionInfo()), Write("b", ReplaceTodos((Todo("t", "x"),))), Remove("s")]
    batch = asyncio.ensure_future(store.write_batch(Batch(operations, "f"), WriteContext("\nr", "", 0.0, Limits())))
    await journal.entered_batch()
    journal.gate.set()
    await batch

    assert journal.batches[-1] == [("create", "b"), ("commit", 1), ("remove", ("s",)), ("batch", "\nr")]
    await store.close()


async def test_a_batch_the_journal_fails_leaves_nothing_and_is_not_remembered(journal: GatedJournal) -> None:
    store = await open_store(journal)
    journal.fail = True
    operations: list[Operation] = [Create("b", SessionInfo()), Write("s", ReplaceTodos((Todo("t", "x"),))), Remove("s")]

    with pytest.raises(Unavailable):
        await store.write_batch(Batch(operations, "f"), WriteContext("\nr", "", 0.0, Limits()))

    assert await store.get("b") is None
    state = await store.get("s")
    assert state is not None
    assert (state.revision, state.todos) == (0, ())
    journal.fail = False
    again = await store.write_batch(Batch(operations, "f"), WriteContext("\nr", "", 0.0, Limits()))
    assert again.changes[0].kind is ChangeKind.SESSION_CREATED
    await store.close()

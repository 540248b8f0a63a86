"""The memory budget: lists, history and watcher buffers stay within it, and memory comes back."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import ResourceExhausted, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.budget import MemoryBudget, change_bytes
from sessiontodo_server.domain.errors import LimitExceeded
from sessiontodo_server.domain.mutations import ReplaceTodos, UpdateSession
from sessiontodo_server.domain.streams import TodoStreams
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, RemovalReason, SessionFilter, SessionInfo
from sessiontodo_server.domain.values import Todo as DomainTodo
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.stores.memory import MemoryStore
from tests.support import ServerProcess, eventually

MIB = 1 << 20


def big_list(number: int) -> tuple[DomainTodo, ...]:
    """About 1 MiB: 256 todos of 4000 characters."""
    return tuple(DomainTodo(f"t{i}", f"{number}:{i}:".ljust(4000, "x")) for i in range(256))


async def commit_big(store: MemoryStore, session_id: str, number: int) -> Change:
    written = await store.write(
        Write(session_id, ReplaceTodos(big_list(number))), WriteContext("", "", 0.0, Limits(max_list_bytes=3 * MIB))
    )
    assert written.change is not None
    return written.change


async def test_history_is_bounded_by_bytes_oldest_first_and_resumes_with_a_reset_beyond() -> None:
    budget = MemoryBudget(32 * MIB)
    store = MemoryStore(history_limit=64, budget=budget)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    changes = [await commit_big(store, "s", n) for n in range(30)]
    _, retained = store.held_bytes()
    assert retained <= budget.history
    assert await store.changes_after("s", changes[0].revision) is None  # gone: the watcher gets a RESET
    assert await store.changes_after("s", changes[-2].revision) == [changes[-1]]


async def test_removing_a_session_lets_go_of_its_list_history_and_feed() -> None:
    store = MemoryStore(history_limit=64)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    for n in range(5):
        await commit_big(store, "s", n)
    assert store.held_bytes()[0] > MIB
    await store.remove_session("s", RemovalReason.REMOVED)
    lists, retained = store.held_bytes()
    assert lists == 0
    assert retained < 4096


async def test_a_write_over_the_lists_budget_is_resource_exhausted_with_a_quota_failure(
    start: Callable[..., Any],
) -> None:
    server: RunningServer = await start(memory_budget=16 * MIB)  # lists: 8 MiB, about 7 full lists
    big = [Todo(content=f"{i}:".ljust(4000, "x")) for i in range(256)]
    async with TodoClient.connect(server.address) as client:
        filled: list[str] = []

        async def fill_until_refused() -> None:
            for n in range(20):
                await client.create_session(f"s{n}")
                await client.replace_todos(f"s{n}", big)
                filled.append(f"s{n}")

        with pytest.raises(ResourceExhausted) as raised:
            await fill_until_refused()
        assert ("memory", raised.value.quota_violations[0][1]) == raised.value.quota_violations[0]
        refused = f"s{len(filled)}"
        assert 4 <= len(filled) < 20
        assert (await client.get_todos(refused)).todos == []  # nothing changed
        await client.replace_todos(filled[0], big[:10])  # shrinking always goes through
        await client.remove_session(filled[1])
        await client.replace_todos(refused, big)  # room again


def test_watcher_buffers_are_bounded_by_bytes_and_a_watcher_past_them_is_reset() -> None:
    change_size = change_bytes(Change("s", ChangeKind.TODOS_REPLACED, 1, big_list(0)))
    hub = WatchHub(buffer_size=256, max_watchers=10, buffer_bytes=3 * change_size)
    slow, other = hub.subscribe("s"), hub.subscribe("s")
    for revision in range(1, 6):
        hub.publish(Change("s", ChangeKind.TODOS_REPLACED, revision, big_list(revision)))
        other.drain()
    assert slow.lagged
    assert hub.buffered.bytes <= 3 * change_size
    slow.drain()
    assert hub.buffered.bytes == 0


def rss_bytes(server: ServerProcess) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.process
async def test_a_watched_session_of_big_lists_stays_within_the_budget_and_gives_memory_back() -> None:
    """Regression: every 1 MiB write grew RSS by 2 MiB for good (an unbounded encoding cache)."""
    with ServerProcess("--store", "memory://", "--memory-budget", str(64 * MIB)) as server:
        big = [pb.Todo(content=f"{i}:".ljust(4000, "x")) for i in range(256)]
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="big"))
            watch = stub.WatchTodos(pb.WatchTodosRequest(session_id="big"))
            seen: list[int] = []

            async def follow() -> None:
                while (message := await watch.read()) is not grpc.aio.EOF:
                    seen.append(message.revision)

            follower = asyncio.create_task(follow())
            try:
                for _ in range(5):
                    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="big", todos=big))
                await eventually(lambda: bool(seen) and seen[-1] == 5, timeout=30)
                before = rss_bytes(server)
                for n in range(120):
                    big[0].content = f"write {n}"
                    await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="big", todos=big))
                await eventually(lambda: seen[-1] == 125, timeout=60)
                grown = rss_bytes(server) - before
            finally:
                watch.cancel()
                follower.cancel()
            assert grown < 100 * MIB, f"RSS grew {grown / MIB:.0f} MiB over 120 writes of 1 MiB"
            await stub.RemoveSession(pb.RemoveSessionRequest(session_id="big"))
            await eventually(lambda: rss_bytes(server) - before < 32 * MIB, timeout=10)


def heavy_labels(number: int) -> dict[str, str]:
    """64 labels of 4 KiB: about 256 KiB, the most one session may carry."""
    return {f"k{i}": f"{number}:{i}:".ljust(4000, "x") for i in range(64)}


async def test_labels_count_toward_the_lists_budget_and_a_new_session_past_it_is_refused() -> None:
    budget = MemoryBudget(8 * MIB)  # lists: 4 MiB, about 15 heavily labelled sessions
    store = MemoryStore(budget=budget)
    await store.open()
    created: list[str] = []

    async def create_until_refused() -> None:
        for n in range(40):
            await store.create_session(f"s{n}", SessionInfo(labels=heavy_labels(n)), 100, "")
            created.append(f"s{n}")

    with pytest.raises(LimitExceeded) as refused:
        await create_until_refused()
    assert refused.value.limit == "memory"
    assert 10 <= len(created) < 40
    assert store.held_bytes()[0] <= budget.lists
    assert await store.get(f"s{len(created)}") is None  # the refused session was not created


async def test_label_only_updates_keep_the_retained_history_within_its_share() -> None:
    budget = MemoryBudget(8 * MIB)  # history: 2 MiB, each change holds 256 KiB of labels
    store = MemoryStore(history_limit=64, budget=budget)
    await store.open()
    await store.create_session("s", SessionInfo(), 10, "")
    for n in range(40):
        written = await store.write(
            Write("s", UpdateSession(heavy_labels(n), (), None)),
            WriteContext("", "", 0.0, Limits(max_metadata_bytes=8192)),
        )
        assert written.change is not None
    _, retained = store.held_bytes()
    assert retained <= budget.history
    assert store.held_bytes()[0] >= 64 * 4000  # the session's current labels are counted


async def test_streams_count_what_they_handed_over_and_a_new_one_past_the_share_is_refused() -> None:
    store = MemoryStore()
    await store.open()
    hub = WatchHub(buffer_size=8, max_watchers=1000, buffer_bytes=8 * MIB)  # about three 1 MiB snapshots
    book = TodoBook(store, hub, Limits(max_list_bytes=3 * MIB))
    streams = TodoStreams(book, store, hub, Limits(), progress_interval=60)
    await store.create_session("s", SessionInfo(), 10, "")
    await commit_big(store, "s", 0)
    opened: list[AsyncGenerator[Change, None]] = []

    async def open_until_refused() -> None:
        for _ in range(100):  # a client that never reads: each stream's snapshot stays with gRPC
            watch = streams.watch("s", None)
            await anext(watch)
            opened.append(watch)

    with pytest.raises(LimitExceeded) as refused:
        await open_until_refused()
    assert refused.value.limit == "memory"
    assert 1 <= len(opened) <= 4
    assert hub.in_flight <= 8 * MIB
    for watch in opened:
        await watch.aclose()
    assert hub.in_flight == 0
    assert hub.watcher_count == 0
    again = streams.watch("s", None)
    assert (await anext(again)).kind is ChangeKind.SNAPSHOT  # the memory came back
    await again.aclose()


def many_ids(count: int, tag: str = "") -> frozenset[str]:
    return frozenset(f"{tag}{n:06}".ljust(128, "s") for n in range(count))


def test_feed_filters_count_toward_the_buffers_share_and_a_feed_past_it_is_refused() -> None:
    """A filter is held for its stream's life: 1000 ids of 128 characters are about 250 KB, so a
    1 MiB share takes four such feeds; the fifth is refused until one closes."""
    hub = WatchHub(buffer_size=8, max_watchers=1000, buffer_bytes=1 * MIB)
    feeds = [hub.subscribe_feed(SessionFilter(session_ids=many_ids(1000, f"{n}-"))) for n in range(4)]

    with pytest.raises(LimitExceeded) as refused:
        hub.subscribe_feed(SessionFilter(session_ids=many_ids(1000, "5-")))
    assert refused.value.limit == "memory"
    assert hub.feed_count == 4
    assert hub.held <= 1 * MIB
    hub.unsubscribe(feeds[0])
    hub.subscribe_feed(SessionFilter(session_ids=many_ids(1000, "5-")))
    assert hub.feed_count == 4


async def test_a_feed_filter_naming_more_session_ids_than_the_limit_is_invalid_argument(
    server: RunningServer,
) -> None:
    ids = sorted(many_ids(Limits().max_filter_session_ids + 1))
    async with grpc.aio.insecure_channel(server.address) as channel:
        feed = pb_grpc.TodoServiceStub(channel).WatchChanges(
            pb.WatchChangesRequest(filter=pb.SessionFilter(session_ids=ids))
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await feed.read()
        feed.cancel()
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"at most {Limits().max_filter_session_ids} ids" in (refused.value.details() or "")

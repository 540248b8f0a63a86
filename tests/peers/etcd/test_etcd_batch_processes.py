"""BatchWrite through server processes on a real three-member etcd cluster: batches racing another
server's writes to the same sessions, a server killed with SIGKILL while batches are under way,
and the feed and watches of another server. Every batch is all or nothing, and where it is
applied its changes come in write order with consecutive cursors, on every replica."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.domain.values import SessionInfo
from sessiontodo_server.stores.etcd import EtcdStore
from tests.support import ServerProcess
from tests.support.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SESSIONS = 5
WAIT = 10.0


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    with EtcdCluster(size=3) as etcd:
        yield etcd


def _replica(cluster: EtcdCluster) -> ServerProcess:
    return ServerProcess("--store", cluster.url(), "--shutdown-grace", "1")


@pytest.fixture
async def stubs(cluster: EtcdCluster) -> AsyncIterator[list[pb_grpc.TodoServiceStub]]:
    """Two server processes (replicas) on the cluster, and a stub of each."""
    async with AsyncExitStack() as stack:
        stubs = []
        for _ in range(2):
            server = stack.enter_context(_replica(cluster))
            channel = await stack.enter_async_context(grpc.aio.insecure_channel(server.address))
            stubs.append(pb_grpc.TodoServiceStub(channel))
        yield stubs


def _create(session_id: str, parent_id: str = "") -> pb.Write:
    return pb.Write(create_session=pb.CreateSessionRequest(session_id=session_id, parent_id=parent_id))


def _add(session_id: str, content: str, expected_revision: int | None = None) -> pb.Write:
    request = pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(content=content))
    if expected_revision is not None:
        request.expected_revision = expected_revision
    return pb.Write(add_todo=request)


def _position(cursor: str) -> int:
    return int(cursor.rpartition(".")[2])


async def _started_feed(stub: pb_grpc.TodoServiceStub) -> Any:
    """A feed whose snapshot was read: every message after it is a change."""
    feed = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True))
    while (await asyncio.wait_for(feed.read(), WAIT)).kind != pb.CHANGE_KIND_PROGRESS:
        pass
    return feed


async def _changes_until(feed: Any, origin: str) -> list[pb.WatchChangesResponse]:
    """The feed's changes up to and including the first one written with ``origin``."""
    changes: list[pb.WatchChangesResponse] = []
    while not changes or changes[-1].origin != origin:
        message = await asyncio.wait_for(feed.read(), WAIT)
        if message.kind != pb.CHANGE_KIND_PROGRESS:
            changes.append(message)
    return changes


def _split(changes: list[tuple[str, str, int]], batches: dict[str, list[str]]) -> list[str]:
    """Batches (by origin: the sessions they write, in order) whose changes on a feed of
    ``(origin, session_id, cursor)`` are not their sessions in write order at consecutive cursors."""
    split = []
    for origin, sessions in batches.items():
        theirs = [(session_id, cursor) for made_by, session_id, cursor in changes if made_by == origin]
        first = theirs[0][1] if theirs else 0
        if theirs != [(session_id, first + n) for n, session_id in enumerate(sessions)]:
            split.append(origin)
    return split


async def test_batches_racing_another_servers_writes_are_each_applied_whole_or_not_at_all(
    stubs: list[pb_grpc.TodoServiceStub],
) -> None:
    batching, racing = stubs
    sessions = [f"s{n}" for n in range(SESSIONS)]
    await batching.BatchWrite(pb.BatchWriteRequest(writes=[_create(session_id) for session_id in sessions]))
    feed = await _started_feed(racing)
    stop = asyncio.Event()

    async def race() -> None:
        n = 0
        while not stop.is_set():
            await racing.AddTodo(pb.AddTodoRequest(session_id=sessions[n % SESSIONS], todo=pb.Todo(content="racer")))
            n += 1

    racer = asyncio.create_task(race())
    answers: dict[str, grpc.StatusCode] = {}
    try:
        for k in range(40):  # even batches expect the revisions just read, odd ones expect nothing
            revisions = [(await batching.GetTodos(pb.GetTodosRequest(session_id=s))).revision for s in sessions]
            expected = revisions if k % 2 == 0 else [None] * SESSIONS
            writes = [_add(s, f"batch {k}", revision) for s, revision in zip(sessions, expected, strict=True)]
            request = pb.BatchWriteRequest(writes=writes, origin=f"batch {k}")
            try:
                await batching.BatchWrite(request, timeout=WAIT)
                answers[request.origin] = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as error:
                answers[request.origin] = error.code()
    finally:
        stop.set()
        await racer
    await batching.CreateSession(pb.CreateSessionRequest(session_id="end", origin="end"))
    try:
        changes = [(c.origin, c.session_id, _position(c.cursor)) for c in await _changes_until(feed, "end")]
    finally:
        feed.cancel()
    lists = [(await racing.GetTodos(pb.GetTodosRequest(session_id=s))).todos for s in sessions]
    applied = [origin for origin, code in answers.items() if code == grpc.StatusCode.OK]
    print(f"{len(applied)} of {len(answers)} batches applied, the others aborted by the racer")

    conditional = [f"batch {k}" for k in range(0, 40, 2)]
    assert {o: code for o, code in answers.items() if code != grpc.StatusCode.OK and o not in conditional} == {}
    assert {o: code for o, code in answers.items() if code not in (grpc.StatusCode.OK, grpc.StatusCode.ABORTED)} == {}
    in_lists = {origin: sum(todo.content == origin for todos in lists for todo in todos) for origin in answers}
    assert {origin: count for origin, count in in_lists.items() if count not in (0, SESSIONS)} == {}
    assert [origin for origin, count in in_lists.items() if count] == applied
    assert _split(changes, dict.fromkeys(applied, sessions)) == []
    assert [origin for origin, _, _ in changes if origin in answers and origin not in applied] == []


async def test_another_servers_feed_and_watches_get_a_batchs_changes_in_order_with_consecutive_cursors(
    stubs: list[pb_grpc.TodoServiceStub],
) -> None:
    writing, watching = stubs
    await writing.BatchWrite(pb.BatchWriteRequest(writes=[_create("p"), _create("old"), _create("old.c", "old")]))
    feed = await _started_feed(watching)
    watch = watching.WatchTodos(pb.WatchTodosRequest(session_id="p"))
    try:
        assert (await asyncio.wait_for(watch.read(), WAIT)).kind == pb.CHANGE_KIND_SNAPSHOT
        writes = [
            _add("p", "one"),
            pb.Write(remove_session=pb.RemoveSessionRequest(session_id="old")),
            _create("q", "p"),
            _add("p", "two"),
            _add("q", "three"),
        ]
        await writing.BatchWrite(pb.BatchWriteRequest(writes=writes, origin="batch"))

        changes = await _changes_until(feed, "batch")
        while len(changes) < 6:
            changes.append(await asyncio.wait_for(feed.read(), WAIT))
        watched = [await asyncio.wait_for(watch.read(), WAIT) for _ in range(2)]
    finally:
        feed.cancel()
        watch.cancel()
    assert [(c.session_id, c.kind) for c in changes] == [
        ("p", pb.CHANGE_KIND_TODO_ADDED),
        ("old", pb.CHANGE_KIND_SESSION_REMOVED),
        ("old.c", pb.CHANGE_KIND_SESSION_REMOVED),
        ("q", pb.CHANGE_KIND_SESSION_CREATED),
        ("p", pb.CHANGE_KIND_TODO_ADDED),
        ("q", pb.CHANGE_KIND_TODO_ADDED),
    ]
    first = _position(changes[0].cursor)
    assert [_position(c.cursor) for c in changes] == list(range(first, first + 6))
    assert [(m.revision, [t.content for t in m.todos]) for m in watched] == [(1, ["one"]), (2, ["one", "two"])]


async def test_a_server_killed_while_batches_are_under_way_leaves_none_of_them_half_written(
    cluster: EtcdCluster,
) -> None:
    sessions = [f"s{n}" for n in range(SESSIONS)]
    reader = EtcdStore(cluster.url())  # another replica, in this process: reads what etcd holds
    await reader.open()
    server = _replica(cluster).start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            await stub.BatchWrite(pb.BatchWriteRequest(writes=[_create(session_id) for session_id in sessions]))
            start = reader.feed_position()
            attempted: list[str] = []
            acknowledged: list[str] = []
            enough = asyncio.Event()

            async def write_batches(writer: int) -> None:
                for k in range(1000):
                    origin = f"writer {writer} batch {k}"
                    attempted.append(origin)
                    writes = [_add(s, f"{origin} write {n}") for n in range(10) for s in sessions]
                    try:
                        await stub.BatchWrite(pb.BatchWriteRequest(writes=writes, origin=origin), timeout=WAIT)
                    except grpc.aio.AioRpcError:
                        return  # the server is gone
                    acknowledged.append(origin)
                    if len(acknowledged) >= 12:
                        enough.set()

            writers = [asyncio.create_task(write_batches(n)) for n in range(4)]
            await asyncio.wait_for(enough.wait(), 60)
            await asyncio.sleep(random.uniform(0, 0.05))  # the kill lands anywhere in the batches under way
            server.kill()  # SIGKILL, with a batch of every writer in flight
            await asyncio.gather(*writers)
        await reader.create_session("end", SessionInfo(), 1000, "end")  # answered once its watch got here
        changes = await reader.feed_after(start)
        states = [await reader.get(session_id) for session_id in sessions]
    finally:
        server.__exit__(None, None, None)
        await reader.close()
    assert changes is not None
    in_lists = {
        origin: sum(todo.content.startswith(f"{origin} ") for state in states if state for todo in state.todos)
        for origin in attempted
    }
    in_flight = [origin for origin in attempted if origin not in acknowledged]
    landed = sum(bool(in_lists[origin]) for origin in in_flight)
    print(f"{len(acknowledged)} batches acknowledged; of {len(in_flight)} in flight at the kill, {landed} applied")
    assert {origin: count for origin, count in in_lists.items() if count not in (0, 10 * SESSIONS)} == {}
    assert [origin for origin in acknowledged if not in_lists[origin]] == []
    made = [(c.origin, c.session_id, c.cursor) for c in changes if c.origin != "end"]
    applied = {origin: sessions * 10 for origin, count in in_lists.items() if count}
    assert _split(made, applied) == []

"""Claims through a server on every store (``store_url``), and through two replicas sharing Redis or
etcd: concurrent claimers each get a different todo and every todo is claimed exactly once; a
lease that is not renewed lapses as one change of its own origin; a kill -9 during claims loses
no acknowledged claim."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import duration_pb2

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.app import RunningServer
from tests.support import ServerProcess, eventually
from tests.support.markers import ON_ETCD, ON_REDIS

CLAIMERS = 64
TODOS = 200
SHARED = [pytest.param("redis", marks=ON_REDIS), pytest.param("etcd", marks=ON_ETCD)]


def graph(size: int) -> list[pb.Todo]:
    """A plan in which every third todo waits on the one two places before it: it becomes ready
    only once that one is completed."""
    return [
        pb.Todo(id=f"t{n:03}", content=f"step {n}", blocked_by=[f"t{n - 2:03}"] if n % 3 == 2 else [])
        for n in range(size)
    ]


async def claim_and_complete_everything(
    stubs: Sequence[pb_grpc.TodoServiceStub], session_id: str, claimers: int
) -> list[tuple[str, str]]:
    """Every claim acknowledged to ``claimers`` concurrent workers (spread over ``stubs``), each
    claiming the first ready todo and completing it, until every todo is claimed: (todo id,
    owner) pairs. A worker told "nothing ready" while todos remain waits for blockers to finish."""
    acknowledged: list[tuple[str, str]] = []

    async def worker(n: int) -> None:
        stub, owner = stubs[n % len(stubs)], f"worker-{n}"
        while len(acknowledged) < TODOS:
            claimed = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id=session_id, owner=owner), timeout=120)
            if not claimed.HasField("todo"):
                await asyncio.sleep(0.01)
                continue
            acknowledged.append((claimed.todo.id, owner))
            done = pb.UpdateTodoRequest(session_id=session_id, todo_id=claimed.todo.id, status=pb.TODO_STATUS_COMPLETED)
            await stub.UpdateTodo(done, timeout=120)

    await asyncio.wait_for(asyncio.gather(*(worker(n) for n in range(claimers))), 600)
    return acknowledged


async def assert_each_todo_claimed_once(
    stub: pb_grpc.TodoServiceStub, session_id: str, acknowledged: list[tuple[str, str]]
) -> None:
    claimed_ids = [todo_id for todo_id, _ in acknowledged]
    assert len(claimed_ids) == len(set(claimed_ids)), "a todo was given to two claimers"
    assert sorted(claimed_ids) == [todo.id for todo in graph(TODOS)]
    stored = (await stub.GetTodos(pb.GetTodosRequest(session_id=session_id))).todos
    assert {todo.id: todo.owner for todo in stored} == dict(acknowledged)
    assert {todo.status for todo in stored} == {pb.TODO_STATUS_COMPLETED}


async def test_concurrent_claimers_each_claim_a_different_todo_and_every_todo_once(
    start: Callable[..., Any], store_url: str
) -> None:
    server: RunningServer = await start(store=store_url)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="team"))
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="team", todos=graph(TODOS)))

        acknowledged = await claim_and_complete_everything([stub], "team", CLAIMERS)

        await assert_each_todo_claimed_once(stub, "team", acknowledged)


@pytest.mark.parametrize("store_url", SHARED, indirect=True)
async def test_claimers_on_two_replicas_each_claim_a_different_todo_and_every_todo_once(
    start: Callable[..., Any], store_url: str
) -> None:
    first: RunningServer = await start(store=store_url)
    second: RunningServer = await start(store=store_url)
    async with (
        grpc.aio.insecure_channel(first.address) as one,
        grpc.aio.insecure_channel(second.address) as other,
    ):
        stubs = [pb_grpc.TodoServiceStub(one), pb_grpc.TodoServiceStub(other)]
        await stubs[0].CreateSession(pb.CreateSessionRequest(session_id="team"))
        await stubs[0].ReplaceTodos(pb.ReplaceTodosRequest(session_id="team", todos=graph(TODOS)))

        acknowledged = await claim_and_complete_everything(stubs, "team", CLAIMERS)

        await assert_each_todo_claimed_once(stubs[1], "team", acknowledged)


async def test_a_lease_that_is_not_renewed_lapses_as_one_change_of_its_own_origin(
    start: Callable[..., Any], store_url: str
) -> None:
    server: RunningServer = await start(store=store_url, expiry_interval=0.1)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=graph(2)))
        lease = duration_pb2.Duration(seconds=1)
        claimed = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="s", owner="gone", lease_duration=lease))
        watch = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=claimed.revision))
        try:
            lapse = await asyncio.wait_for(watch.read(), 30)
        finally:
            watch.cancel()

    assert (lapse.kind, lapse.revision, lapse.todo_id) == (pb.CHANGE_KIND_TODO_UPDATED, claimed.revision + 1, "t000")
    assert lapse.origin == "sessiontodo:lease"
    assert (lapse.todos[0].status, lapse.todos[0].owner) == (pb.TODO_STATUS_PENDING, "")


@pytest.mark.parametrize("store_url", SHARED, indirect=True)
async def test_a_lease_taken_on_a_replica_that_stopped_lapses_on_another(
    start: Callable[..., Any], store_url: str
) -> None:
    claiming: RunningServer = await start(store=store_url, expiry_interval=0.1)
    remaining: RunningServer = await start(store=store_url, expiry_interval=0.1)
    async with grpc.aio.insecure_channel(remaining.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="s", todos=graph(2)))
        async with grpc.aio.insecure_channel(claiming.address) as other:
            lease = duration_pb2.Duration(seconds=2)
            request = pb.ClaimTodoRequest(session_id="s", owner="gone", lease_duration=lease)
            claimed = await pb_grpc.TodoServiceStub(other).ClaimTodo(request)
        await claiming.stop()
        watch = stub.WatchTodos(pb.WatchTodosRequest(session_id="s", after_revision=claimed.revision))
        try:
            lapse = await asyncio.wait_for(watch.read(), 30)
        finally:
            watch.cancel()

    assert (lapse.origin, lapse.revision, lapse.todos[0].owner) == ("sessiontodo:lease", claimed.revision + 1, "")


@pytest.mark.process
async def test_a_kill_9_during_claims_loses_no_acknowledged_claim(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    acknowledged: list[tuple[str, str]] = []
    server = ServerProcess("--store", store).start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            await stub.CreateSession(pb.CreateSessionRequest(session_id="team"))
            many = [pb.Todo(id=f"t{n:04}", content=f"step {n}") for n in range(1000)]
            await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="team", todos=many))

            async def claim_until_killed(n: int) -> None:
                while True:
                    try:
                        claimed = await stub.ClaimTodo(pb.ClaimTodoRequest(session_id="team", owner=f"w{n}"))
                    except grpc.aio.AioRpcError:
                        return  # the server is gone: this claim was never acknowledged
                    if not claimed.HasField("todo"):
                        return
                    acknowledged.append((claimed.todo.id, f"w{n}"))

            claimers = [asyncio.create_task(claim_until_killed(n)) for n in range(8)]
            await eventually(lambda: len(acknowledged) >= 150, timeout=60)
            server.kill()
            await asyncio.wait_for(asyncio.gather(*claimers), 60)
    finally:
        server.__exit__(None, None, None)

    with ServerProcess("--store", store, port=server.port) as restarted:
        async with grpc.aio.insecure_channel(restarted.address) as channel:
            stored = await pb_grpc.TodoServiceStub(channel).GetTodos(pb.GetTodosRequest(session_id="team"))
    owners = {todo.id: todo.owner for todo in stored.todos}
    assert {todo_id: owners[todo_id] for todo_id, _ in acknowledged} == dict(acknowledged)

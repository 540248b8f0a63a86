"""Redis going away and coming back: nothing acknowledged is lost, nothing half-written appears,
health says so, and watchers converge on the right state afterwards."""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo_client import ChangeKind, Todo, TodoClient, Unavailable, WatchEvent
from tests.support import ServerProcess, eventually
from tests.support.redis_server import RedisServer

StartReplicas = Callable[..., list[ServerProcess]]
Connect = Callable[[ServerProcess], TodoClient]
TIMEOUT = 10
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


async def _health(replica: ServerProcess) -> int:
    async with grpc.aio.insecure_channel(replica.address) as channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=TIMEOUT)
        return response.status


async def _is(replica: ServerProcess, status: int) -> bool:
    return await _health(replica) == status


async def _all_serving(replicas: list[ServerProcess]) -> bool:
    return all([await _is(replica, SERVING) for replica in replicas])


async def _follow(events: AsyncIterator[WatchEvent], seen: list[WatchEvent]) -> None:
    async for event in events:
        seen.append(event)


async def test_redis_restarted_mid_stream_loses_no_acknowledged_write_and_watchers_converge(
    start_replicas: StartReplicas, connect: Connect, redis_server: RedisServer
) -> None:
    replicas = start_replicas(2)
    watching, writing = [connect(replica) for replica in replicas]
    await writing.create_session("s")
    seen: list[WatchEvent] = []
    watcher = asyncio.create_task(_follow(watching.watch("s"), seen))
    try:
        acknowledged = [await writing.add_todo("s", Todo(content=f"before {n}")) for n in range(20)]
        redis_server.kill()  # SIGKILL: only what Redis fsynced survives
        for n in range(3):
            with pytest.raises(Unavailable):
                await writing.add_todo("s", Todo(content=f"refused {n}"))
        redis_server.start()
        await eventually(lambda: _all_serving(replicas), timeout=TIMEOUT)
        acknowledged += [await writing.add_todo("s", Todo(content=f"after {n}")) for n in range(20)]

        final = await writing.get_todos("s")
        assert [t.id for t in final.todos] == [added.todo.id for added in acknowledged]
        await eventually(lambda: bool(seen) and seen[-1].revision == final.revision, timeout=TIMEOUT)
    finally:
        watcher.cancel()
    assert seen[-1].todos == final.todos
    revisions = [event.revision for event in seen]
    assert revisions == sorted(set(revisions))  # in order, no duplicates
    gaps = [event for previous, event in itertools.pairwise(seen) if event.revision != previous.revision + 1]
    assert all(event.kind is ChangeKind.RESET for event in gaps)  # never a silent gap


async def test_while_redis_is_down_writes_fail_as_unavailable_and_leave_nothing_behind(
    start_replicas: StartReplicas, connect: Connect, redis_server: RedisServer
) -> None:
    (replica,) = start_replicas(1)
    client = connect(replica)
    await client.create_session("s")
    before = await client.replace_todos("s", [Todo(content="kept")])
    redis_server.stop()
    with pytest.raises(Unavailable):
        await client.replace_todos("s", [Todo(content="refused")])
    with pytest.raises(Unavailable):
        await client.create_session("refused")
    redis_server.start()
    await eventually(lambda: _all_serving([replica]), timeout=TIMEOUT)
    assert await client.get_todos("s") == before
    assert [session.session_id for session in await client.list_sessions()] == ["s"]


async def test_health_is_not_serving_while_redis_is_down_and_serving_once_it_is_back(
    start_replicas: StartReplicas, redis_server: RedisServer
) -> None:
    replicas = start_replicas(2)
    assert await _all_serving(replicas)
    redis_server.kill()
    for replica in replicas:
        await eventually(functools.partial(_is, replica, NOT_SERVING), timeout=TIMEOUT)
    redis_server.start()
    await eventually(lambda: _all_serving(replicas), timeout=TIMEOUT)

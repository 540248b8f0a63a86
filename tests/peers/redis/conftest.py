"""Fixtures for the Redis store: stores and replicas on the test's redis-server (``redis_server``);
every test here is marked ``redis`` and ``process``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from sessiontodo_client import RetryPolicy, TodoClient
from sessiontodo_server.stores.redis import RedisStore
from tests.support import ServerProcess
from tests.support.markers import mark_folder
from tests.support.redis_server import RedisServer
from tests.support.replicas import OpenReplica, replicas


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.redis, pytest.mark.process)


@pytest.fixture
async def open_replica(redis_server: RedisServer) -> AsyncIterator[OpenReplica[RedisStore]]:
    """Open Redis stores on the test's server (each one stands for a replica); all closed after the test."""
    async with replicas(RedisStore, redis_server.url) as open_another:
        yield open_another


@pytest.fixture
def start_replicas(redis_server: RedisServer) -> Iterator[Callable[..., list[ServerProcess]]]:
    """Start server processes on the test's Redis, one after the other; all are stopped after the test."""
    started: list[ServerProcess] = []

    def _start(count: int, *flags: str) -> list[ServerProcess]:
        replicas = [ServerProcess("--store", redis_server.url, "--shutdown-grace", "1", *flags) for _ in range(count)]
        for replica in replicas:
            started.append(replica)
            replica.start()
        return replicas

    yield _start
    for replica in started:
        replica.stop()


@pytest.fixture
async def connect() -> AsyncIterator[Callable[[ServerProcess], TodoClient]]:
    """Clients of replicas that fail fast on UNAVAILABLE (one attempt); all closed after the test."""
    clients: list[TodoClient] = []

    def _connect(replica: ServerProcess) -> TodoClient:
        client = TodoClient.connect(replica.address, retry=RetryPolicy(attempts=1))
        clients.append(client)
        return client

    yield _connect
    for client in clients:
        await client.close()

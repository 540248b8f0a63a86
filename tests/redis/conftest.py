"""Fixtures for the Redis store: a real redis-server per test, stores and replicas on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from redis_support import RedisServer

from sessiontodo_server.stores.redis import RedisStore

HISTORY = 8


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    with RedisServer(tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def open_replica(redis_server: RedisServer) -> AsyncIterator[Callable[..., Awaitable[RedisStore]]]:
    """Open Redis stores on the test's server (each one stands for a replica); all closed after the test."""
    opened: list[RedisStore] = []

    async def _open(url: str | None = None, history_limit: int = HISTORY) -> RedisStore:
        store = RedisStore(url or redis_server.url, history_limit)
        await store.open()
        opened.append(store)
        return store

    yield _open
    for store in opened:
        await store.close()

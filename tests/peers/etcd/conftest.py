"""Fixtures for the etcd store: a real etcd cluster per test, stores and replicas on it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
from etcd_support import EtcdCluster

from sessiontodo_server.stores.etcd import EtcdStore

HISTORY = 8


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    """One member: enough for everything but failover."""
    with EtcdCluster() as cluster:
        yield cluster


@pytest.fixture
async def open_replica(etcd: EtcdCluster) -> AsyncIterator[Callable[..., Awaitable[EtcdStore]]]:
    """Open etcd stores on the test's cluster (each one stands for a replica); all closed after the test."""
    opened: list[EtcdStore] = []

    async def _open(url: str | None = None, history_limit: int = HISTORY, feed_history: int = 4096) -> EtcdStore:
        store = EtcdStore(url or etcd.url(), history_limit, feed_history)
        await store.open()
        opened.append(store)
        return store

    yield _open
    for store in opened:
        await store.close()

"""Fixtures for the etcd store: stores (each one stands for a replica) on the test's cluster
(``etcd``, one member); every test here is marked ``etcd`` and ``process``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sessiontodo_server.stores.etcd import EtcdStore
from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import mark_folder

HISTORY = 8


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.etcd, pytest.mark.process)


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

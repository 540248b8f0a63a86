"""Fixtures for the etcd store: stores (each one stands for a replica) on the test's cluster
(``etcd``, one member); every test here is marked ``etcd`` and ``process``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiontodo_server.stores.etcd import EtcdStore
from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import mark_folder
from tests.support.replicas import OpenReplica, replicas


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.etcd, pytest.mark.process)


@pytest.fixture
async def open_replica(etcd: EtcdCluster) -> AsyncIterator[OpenReplica[EtcdStore]]:
    """Open etcd stores on the test's cluster (each one stands for a replica); all closed after the test."""
    async with replicas(EtcdStore, etcd.url()) as open_another:
        yield open_another

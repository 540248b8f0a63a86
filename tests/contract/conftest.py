"""The stores a contract runs on: every store a server can use, the embedded ones in-process and
Redis and etcd as real servers of the test's own; and for the replica contract, the stores several
replicas can share, each opened as many times as a test has replicas."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sessiontodo_server.stores.etcd import EtcdStore
from sessiontodo_server.stores.redis import RedisStore
from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import ON_ETCD, ON_REDIS
from tests.support.redis_server import RedisServer
from tests.support.replicas import OpenReplica, SharedStore, replicas

SERVER_STORES = ["memory", "sqlite", pytest.param("redis", marks=ON_REDIS), pytest.param("etcd", marks=ON_ETCD)]
SHARED_STORES = [pytest.param("redis", marks=ON_REDIS), pytest.param("etcd", marks=ON_ETCD)]


@pytest.fixture(params=SERVER_STORES)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The ``--store`` URL of each store in turn (narrow it with ``parametrize(..., indirect=True)``)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'todos.db'}"
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        return redis.url
    etcd: EtcdCluster = request.getfixturevalue("etcd")
    return etcd.url()


@dataclass(frozen=True)
class SharedBackend:
    """The server the replicas share: how to open a store on it, its port, crashing it and starting it again."""

    make_store: Callable[[str, int, int], SharedStore]
    url: str
    port: int
    kill: Callable[[], object]
    start: Callable[[], object]


@pytest.fixture(params=SHARED_STORES)
def shared_backend(request: pytest.FixtureRequest) -> SharedBackend:
    """Each store several replicas can share in turn, on a real server of the test's own."""
    if request.param == "redis":
        redis: RedisServer = request.getfixturevalue("redis_server")
        return SharedBackend(RedisStore, redis.url, redis.port, redis.kill, redis.start)
    etcd: EtcdCluster = request.getfixturevalue("etcd")
    return SharedBackend(EtcdStore, etcd.url(), etcd.members[0].port, etcd.members[0].kill, etcd.start)


@pytest.fixture
async def open_replica(shared_backend: SharedBackend) -> AsyncIterator[OpenReplica[SharedStore]]:
    """Open stores on the shared backend (each one stands for a replica); all closed after the test."""
    async with replicas(shared_backend.make_store, shared_backend.url) as open_another:
        yield open_another

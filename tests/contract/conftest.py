"""The stores a contract runs on: every store a server can use, the embedded ones in-process and
Redis and etcd as real servers of the test's own."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import ON_ETCD, ON_REDIS
from tests.support.redis_server import RedisServer

SERVER_STORES = ["memory", "sqlite", pytest.param("redis", marks=ON_REDIS), pytest.param("etcd", marks=ON_ETCD)]


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

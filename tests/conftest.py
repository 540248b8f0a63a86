"""Fixtures shared by the whole suite: a real grpc.aio server on 127.0.0.1:0 and a client, a CA, a
redis-server; and the check that a test starting a process is marked ``process``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import TodoClient
from sessiontodo_server.app import RunningServer, start_server
from tests.support import make_settings
from tests.support.certificates import CertificateAuthority, Issued
from tests.support.etcd_cluster import EtcdCluster
from tests.support.markers import ProcessAudit
from tests.support.redis_server import RedisServer

PROCESS_AUDIT = ProcessAudit()


@pytest.fixture(autouse=True)
def processes_only_when_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """``-m "not process"`` is true to its word: a test that starts a process must be marked ``process``."""
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    with PROCESS_AUDIT.listening() as started:
        yield
    assert not started, f"this test starts processes, so it needs @pytest.mark.process: {started}"


@pytest.fixture
async def start() -> AsyncIterator[Callable[..., Any]]:
    """Start servers with setting overrides; all are stopped after the test."""
    started: list[RunningServer] = []

    async def _start(**overrides: Any) -> RunningServer:
        running = await start_server(make_settings(**overrides))
        started.append(running)
        return running

    yield _start
    for running in started:
        await running.stop()


@pytest.fixture
async def server(start: Callable[..., Any]) -> RunningServer:
    return await start()


@pytest.fixture
async def client(server: RunningServer) -> AsyncIterator[TodoClient]:
    async with TodoClient.connect(server.address) as client:
        yield client


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    """A certificate authority of the test's own, for TLS tests."""
    return CertificateAuthority(tmp_path)


@pytest.fixture
def server_cert(ca: CertificateAuthority) -> Issued:
    return ca.issue("127.0.0.1", server=True)


@pytest.fixture
def etcd() -> Iterator[EtcdCluster]:
    """A real one-member etcd cluster of the test's own, for the etcd store's contract and peer tests."""
    with EtcdCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A real redis-server of the test's own, for the Redis store's contract and peer tests."""
    with RedisServer(tmp_path / "redis") as server:
        yield server

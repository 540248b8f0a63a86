"""The watch contract and durability on Redis under faults: Redis killed and restarted,
Redis stopped cleanly and restarted, the replica stopped and restarted, all under load."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support import ServerProcess, wait_until_serving
from tests.support.fault_run import run_through_faults
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.slow


async def test_watchers_and_writes_survive_redis_and_replica_restarts(
    start_replicas: Callable[..., list[ServerProcess]], redis_server: RedisServer
) -> None:
    async def kill_9_redis(server: ServerProcess) -> ServerProcess:
        redis_server.kill()
        redis_server.start()
        wait_until_serving(server.address, timeout=60)
        return server

    async def sigterm_redis(server: ServerProcess) -> ServerProcess:
        redis_server.stop()
        redis_server.start()
        wait_until_serving(server.address, timeout=60)
        return server

    async def sigterm_replica(server: ServerProcess) -> ServerProcess:
        assert server.stop() == 0
        return ServerProcess("--store", redis_server.url, "--watch-buffer", "4", port=server.port).start()

    await run_through_faults(
        lambda: start_replicas(1, "--watch-buffer", "4")[0], [kill_9_redis, sigterm_redis, sigterm_replica]
    )

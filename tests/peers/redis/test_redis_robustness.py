"""The watch contract and durability on Redis under faults: Redis killed and restarted,
Redis stopped cleanly and restarted, the replica stopped and restarted, all under load."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from sessiontodo_client import ChannelSecurity, TodoClient
from tests.support import ServerProcess, wait_until_serving
from tests.support.certificates import auth_toml
from tests.support.fault_run import race_writes_against_expiry, run_through_faults
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


async def test_the_per_tenant_session_limit_holds_across_two_replicas_under_bursts(
    start_replicas: Callable[..., list[ServerProcess]], tmp_path: Path
) -> None:
    """Bursts of creates through both replicas at once never take a tenant past its limit."""
    limit, rounds, burst = 10, 5, 40
    token = "acme-admin-token-0123456789"
    (tmp_path / "auth.toml").write_text(auth_toml((token, "acme", "admin")))
    replicas = start_replicas(2, "--auth-file", str(tmp_path / "auth.toml"), "--max-sessions-per-tenant", str(limit))
    security = ChannelSecurity(token=token)
    held = []
    async with (
        TodoClient.connect(replicas[0].address, security=security) as first,
        TodoClient.connect(replicas[1].address, security=security) as second,
    ):
        for round_ in range(rounds):
            creates = [(first, second)[n % 2].create_session(f"r{round_}-s{n}") for n in range(burst)]
            await asyncio.gather(*creates, return_exceptions=True)
            held.append(len(await first.list_sessions()))
            await second.remove_all_sessions()
    assert held == [limit] * rounds


async def test_a_fast_expiry_sweep_never_erases_an_acknowledged_write_on_redis(
    start_replicas: Callable[..., list[ServerProcess]],
) -> None:
    (server,) = start_replicas(1, "--expiry-interval", "0.005")
    erased = await race_writes_against_expiry(server.address)
    assert not erased, "\n".join(erased)

"""What a Redis failover loses: eight writers through two replicas on a Redis primary with one
Redis replica; the primary killed (SIGKILL), the replica promoted (``REPLICAOF NO ONE``), and the
acknowledged writes the promoted replica lacks counted — once with the replica keeping up, once
with it cut off from the primary for a second (a network partition) when the primary dies.

Redis replicates asynchronously: a write is acknowledged once the primary ran it, so whatever
the replica had not received is lost with the primary. ``--redis-wait-replicas 1`` answers a write
only once the replica has it (WAIT), so nothing acknowledged is lost; writes made while no replica
confirms get UNAVAILABLE instead. The counts are printed (``-s``) for docs/scaling-out.md.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from sessiontodo_client import RetryPolicy, TodoClient
from sessiontodo_server.stores.by_url import open_store
from sessiontodo_server.stores.redis import RedisStore
from tests.support import ServerProcess, eventually
from tests.support.fault_run import write_until
from tests.support.redis_server import RedisServer
from tests.support.watch_validators import SessionLog

WRITERS = 8
PARTITION_SECONDS = 1.0


async def _written(logs: dict[str, SessionLog], count: int) -> None:
    """Until every writer got ``count`` more writes acknowledged."""
    goals = {session_id: len(log.acknowledged) + count for session_id, log in logs.items()}
    await eventually(lambda: all(len(log.acknowledged) >= goals[sid] for sid, log in logs.items()), 60)


async def acknowledged_writes_lost(directory: Path, wait_replicas: int, *, partitioned: bool) -> tuple[int, int]:
    """(writes acknowledged, of them missing on the promoted replica)."""
    logs = {f"w{n}": SessionLog(f"w{n}") for n in range(WRITERS)}
    with (
        RedisServer(directory / "primary") as primary,
        RedisServer(directory / "replica", replica_of=primary) as replica,
    ):
        flags = ("--store", primary.url, "--redis-wait-replicas", str(wait_replicas), "--shutdown-grace", "1")
        with ServerProcess(*flags) as first, ServerProcess(*flags) as second:
            once = RetryPolicy(attempts=1)
            async with TodoClient.connect(first.address, once) as a, TodoClient.connect(second.address, once) as b:
                for session_id in logs:
                    await a.create_session(session_id)
                stop = asyncio.Event()
                writers = [
                    asyncio.create_task(write_until((a, b)[n % 2], log, stop)) for n, log in enumerate(logs.values())
                ]
                try:
                    await _written(logs, 20)
                    if partitioned:
                        replica.cut_off()
                        with contextlib.suppress(asyncio.TimeoutError):  # with WAIT, nothing is acknowledged now
                            await asyncio.wait_for(_written(logs, 20), PARTITION_SECONDS)
                    primary.kill()
                finally:
                    stop.set()
                    await asyncio.gather(*writers)
        replica.promote()
        store = RedisStore(replica.url)
        await store.open()
        try:
            survived = {session_id: await store.get(session_id) for session_id in logs}
        finally:
            await store.close()
    acknowledged = sum(len(log.acknowledged) for log in logs.values())
    lost = sum(
        1
        for session_id, log in logs.items()
        for revision in log.acknowledged
        if (state := survived[session_id]) is None or revision > state.revision
    )
    return acknowledged, lost


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_without_wait_a_failover_loses_the_writes_acknowledged_while_the_replica_was_cut_off(
    tmp_path: Path,
) -> None:
    keeping_up = await acknowledged_writes_lost(tmp_path / "keeping-up", 0, partitioned=False)
    partitioned = await acknowledged_writes_lost(tmp_path / "partitioned", 0, partitioned=True)
    print(f"\nRedis failover without WAIT: {keeping_up[1]} of {keeping_up[0]} acknowledged writes lost")
    print(f"the same, replica cut off for {PARTITION_SECONDS:.0f}s: {partitioned[1]} of {partitioned[0]} lost")
    assert partitioned[1] > 0


@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_with_wait_replicas_a_failover_loses_no_acknowledged_write(tmp_path: Path) -> None:
    keeping_up = await acknowledged_writes_lost(tmp_path / "keeping-up", 1, partitioned=False)
    partitioned = await acknowledged_writes_lost(tmp_path / "partitioned", 1, partitioned=True)
    print(f"\nRedis failover with --redis-wait-replicas 1: {keeping_up[1]} of {keeping_up[0]} acknowledged writes lost")
    print(f"the same, replica cut off for {PARTITION_SECONDS:.0f}s: {partitioned[1]} of {partitioned[0]} lost")
    assert keeping_up[1] == 0
    assert partitioned[1] == 0


def test_waiting_for_replicas_is_refused_for_a_store_without_redis_replicas() -> None:
    with pytest.raises(ValueError, match="--redis-wait-replicas applies to the Redis store"):
        open_store("memory://", 8, redis_wait_replicas=1)

"""Failover, proven by killing: a real three-member etcd cluster, two sessiontodo replicas on it,
eight writers and, on both replicas, watchers of every session and feeds of every change.

Faults, one after the other under load: the leader killed with SIGKILL (then restarted), a
follower frozen with SIGSTOP (then thawed), the whole cluster stopped and started again. Then no
acknowledged write may be missing and every watcher's and feed's record must pass the etcd-style
validators (``tests/support/watch_validators.py``): ordered, no duplicate, no silent gap, each list exactly as
written, every acknowledged revision delivered. How long writes stalled after each fault is
printed (``-s`` shows it), never asserted: timings belong in ``make bench``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import ChangeKind, FeedEvent, RetryPolicy, ServiceError, TodoClient, WatchEvent
from tests.support import ServerProcess, eventually
from tests.support.etcd_cluster import EtcdCluster, EtcdMember
from tests.support.fault_run import cancel_and_resume, follow, write_until
from tests.support.watch_validators import SessionLog, as_list, validate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

WRITERS = 8
WRITES_PER_PHASE = 20
FREEZE_SECONDS = 4.0
STORE_TIMEOUT = 2.0
"""The replicas' etcd call timeout (``?timeout=``): how long a call to a frozen member waits."""


@pytest.fixture
def cluster() -> Iterator[EtcdCluster]:
    with EtcdCluster(size=3) as etcd:
        yield etcd


@pytest.fixture
def replicas(cluster: EtcdCluster) -> Iterator[list[ServerProcess]]:
    url = f"{cluster.url()}?timeout={STORE_TIMEOUT}"
    started = [ServerProcess("--store", url, "--shutdown-grace", "1", "--progress-interval", "1") for _ in range(2)]
    try:
        for replica in started:
            replica.start()
        yield started
    finally:
        for replica in started:
            replica.__exit__(None, None, None)


def feed_history(events: list[FeedEvent], session_id: str) -> list[WatchEvent]:
    """One session's part of a feed, as a watcher of that session would have seen it: a snapshot
    after the feed's RESET stands for a RESET of the session when it moves the session on, and is
    left out when it restates the very list last seen (anything else stays, for the validators)."""
    seen: list[WatchEvent] = []
    for event in events:
        if event.session_id != session_id:
            continue
        if event.kind is ChangeKind.SNAPSHOT and seen:
            last = seen[-1]
            if event.revision == last.revision and as_list(event.todos) == as_list(last.todos):
                continue
            event = event.model_copy(update={"kind": ChangeKind.RESET})
        seen.append(event)
    return seen


async def follow_feed(client: TodoClient, seen: list[FeedEvent]) -> None:
    """A feed the client reconnects and resumes by cursor by itself."""
    async for event in client.watch_changes(include_snapshot=True):
        seen.append(event)


async def hop_feed(clients: list[TodoClient], seen: list[FeedEvent], rng: random.Random) -> None:
    """A feed that keeps leaving one replica after a few events and resuming on the other with
    the last cursor it was given: cursors are the deployment's, not a process's."""
    for hop in range(10**9):
        cursor = next((event.cursor for event in reversed(seen) if event.cursor), None)
        feed = clients[hop % 2].watch_changes(cursor, include_snapshot=cursor is None)
        with contextlib.suppress(ServiceError):
            async with aclosing(feed) as events:
                wanted = rng.randint(5, 40)
                async for event in events:
                    seen.append(event)
                    wanted -= 1
                    if wanted == 0 and event.cursor:
                        break
        await asyncio.sleep(rng.random() / 50)


class Acks:
    """When writes were acknowledged: how long writers stalled after a fault."""

    def __init__(self, logs: dict[str, SessionLog]) -> None:
        self._logs = logs

    def counts(self) -> dict[str, int]:
        return {session_id: len(log.acknowledged) for session_id, log in self._logs.items()}

    async def written(self, count: int, timeout: float = 120) -> None:
        """Until every writer got ``count`` more writes acknowledged."""
        goals = {session_id: acked + count for session_id, acked in self.counts().items()}
        await eventually(lambda: all(self.counts()[sid] >= goal for sid, goal in goals.items()), timeout)

    async def recovery(self, name: str, fault: Callable[[], Coroutine[Any, Any, object]]) -> None:
        """Apply ``fault`` under load; print how long after it began every writer had a write that
        started after it acknowledged (the fault may still be going on: a frozen member stays frozen a
        while). A writer has one write in flight at a time: its second acknowledgement from now on."""
        before = self.counts()
        started = time.monotonic()
        applying = asyncio.create_task(fault())
        await eventually(lambda: all(self.counts()[sid] > acked + 1 for sid, acked in before.items()), 120)
        print(f"\n{name}: every writer acknowledged again {time.monotonic() - started:.2f}s after it began")
        await applying


@dataclass
class Load:
    logs: dict[str, SessionLog]
    acks: Acks
    feeds: dict[str, list[FeedEvent]]
    stop_writing: Callable[[], Awaitable[None]]


@contextlib.asynccontextmanager
async def load(replicas: list[ServerProcess]) -> AsyncIterator[Load]:
    """Writers, watchers and feeds on both replicas for as long as the block runs."""
    sessions = [f"w{n}" for n in range(WRITERS)]
    logs = {session_id: SessionLog(session_id) for session_id in sessions}
    feeds: dict[str, list[FeedEvent]] = {"feed-0": [], "feed-1": [], "feed-hopping": []}
    stop = asyncio.Event()
    rng = random.Random(23)
    async with AsyncExitStack() as stack:
        readers = [await stack.enter_async_context(TodoClient.connect(r.address)) for r in replicas]
        writers = [
            await stack.enter_async_context(TodoClient.connect(r.address, retry=RetryPolicy(attempts=1)))
            for r in replicas
        ]
        for session_id in sessions:
            await readers[0].create_session(session_id)
        writing = [asyncio.create_task(write_until(writers[n % 2], logs[sid], stop)) for n, sid in enumerate(sessions)]
        tasks = list(writing)
        for n, log in enumerate(logs.values()):
            tasks += [
                asyncio.create_task(follow(readers[n % 2], log)),
                asyncio.create_task(follow(readers[(n + 1) % 2], log, 0.01)),
                asyncio.create_task(cancel_and_resume(readers[n % 2], log, rng)),
            ]
        tasks += [asyncio.create_task(follow_feed(readers[n], feeds[f"feed-{n}"])) for n in range(2)]
        tasks.append(asyncio.create_task(hop_feed(readers, feeds["feed-hopping"], rng)))

        async def stop_writing() -> None:
            stop.set()
            await asyncio.gather(*writing)

        try:
            yield Load(logs, Acks(logs), feeds, stop_writing)
        finally:
            stop.set()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def check(replicas: list[ServerProcess], run: Load) -> None:
    """Stop writing; then nothing acknowledged is missing and every record passes the validators."""
    await run.stop_writing()
    logs, feeds = run.logs, run.feeds
    async with TodoClient.connect(replicas[1].address) as client:
        finals = {session_id: await client.get_todos(session_id) for session_id in logs}
    for session_id, log in logs.items():
        last = max(log.acknowledged)
        assert finals[session_id].revision == last, f"{session_id}: acknowledged revision {last} lost"
        assert as_list(finals[session_id].todos) == log.acknowledged[last]

    def converged() -> bool:
        watchers = all(
            events and events[-1].revision == finals[sid].revision
            for sid, log in logs.items()
            for events in log.watchers.values()
        )
        fed = all(
            (history := feed_history(events, sid)) and history[-1].revision == finals[sid].revision
            for events in feeds.values()
            for sid in logs
        )
        return watchers and fed

    await eventually(converged, timeout=60)
    for name, events in feeds.items():
        for session_id, log in logs.items():
            log.watchers[name] = feed_history(events, session_id)
    resets = sum(event.kind is ChangeKind.RESET for log in logs.values() for e in log.watchers.values() for event in e)
    hops = sum(event.kind is ChangeKind.RESET for event in feeds["feed-hopping"])
    print(f"\nvalidated {sum(len(log.acknowledged) for log in logs.values())} acknowledged writes, {resets} resets")
    print(f"the hopping feed: {hops} RESETs (a slow reader's lag, or a cursor that could not be resumed)")
    problems = [problem for sid, log in logs.items() for problem in validate(log, finals[sid].revision)]
    assert not problems, "\n".join(problems)


async def test_killing_freezing_and_restarting_etcd_members_loses_no_acknowledged_write_and_breaks_no_watch(
    cluster: EtcdCluster, replicas: list[ServerProcess]
) -> None:
    async with load(replicas) as run:
        acks = run.acks
        await acks.written(WRITES_PER_PHASE)

        killed = cluster.leader()
        await acks.recovery("leader killed (SIGKILL)", lambda: asyncio.to_thread(killed.kill))
        await acks.written(WRITES_PER_PHASE)
        await asyncio.to_thread(cluster.start)  # the killed member rejoins, as a follower
        await acks.written(WRITES_PER_PHASE)

        for follower in cluster.followers():  # each in turn: one of them may be the member the replicas use

            async def freeze(member: EtcdMember = follower) -> None:
                member.freeze()
                await asyncio.sleep(FREEZE_SECONDS)
                member.thaw()

            await acks.recovery(f"follower {follower.name} frozen (SIGSTOP) for {FREEZE_SECONDS:.0f}s", freeze)
            await acks.written(WRITES_PER_PHASE)

        leader = cluster.leader()

        async def freeze_the_leader() -> None:
            leader.freeze()
            await asyncio.sleep(FREEZE_SECONDS)
            leader.thaw()

        await acks.recovery(f"leader {leader.name} frozen (SIGSTOP) for {FREEZE_SECONDS:.0f}s", freeze_the_leader)
        await acks.written(WRITES_PER_PHASE)

        await asyncio.to_thread(cluster.stop)
        await eventually(lambda: all_not_serving(replicas), timeout=30)
        await acks.recovery("the whole cluster started again after a stop", lambda: asyncio.to_thread(cluster.start))
        await acks.written(WRITES_PER_PHASE)
        await check(replicas, run)


async def all_not_serving(replicas: list[ServerProcess]) -> bool:
    statuses = []
    for replica in replicas:
        async with grpc.aio.insecure_channel(replica.address) as channel:
            check = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
            statuses.append((await check).status)
    return statuses == [health_pb2.HealthCheckResponse.NOT_SERVING] * len(replicas)


async def test_without_a_majority_writes_are_unavailable_with_retry_info_and_health_is_not_serving(
    cluster: EtcdCluster, replicas: list[ServerProcess]
) -> None:
    async with TodoClient.connect(replicas[0].address) as client:
        await client.create_session("s")
    for member in cluster.followers():
        member.kill()
    await eventually(lambda: all_not_serving(replicas), timeout=30)
    async with grpc.aio.insecure_channel(replicas[1].address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.AddTodo(pb.AddTodoRequest(session_id="s", todo=pb.Todo(content="no leader")), timeout=30)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    status = rpc_status.from_call(refused.value)
    assert status is not None
    details = [detail for detail in status.details if detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR)]
    assert len(details) == 1

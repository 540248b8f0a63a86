"""Figure 4: resident memory per idle session and per open watcher, and whether it comes back.

Each measurement uses a fresh server process, warmed up first (allocator pools, gRPC's
own structures) so that the first-use cost is not charged to the sessions. RSS is read
from ``/proc/<pid>/status`` once the server has gone quiet.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from processes import ServerProcess
from report import Row
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from throughput import IN_FLIGHT, todo_list
from watchers import WatcherProcess
from watching import WATCHERS_PER_PROCESS

KIB = 1024
MIB = 1024 * 1024


@dataclass
class MemoryResult:
    sessions: int
    watchers: int
    per_session: float
    per_watcher: float
    per_bare_stream: float
    churned: int
    """How many sessions the leak check created and removed per cycle."""
    rss_start: int
    rss_peak: int
    rss_after: list[int]
    """RSS after each create-and-remove cycle."""


async def _hold_watchers(
    address: str, prefix: str, count: int, cpus: set[int], same_session: bool
) -> list[WatcherProcess]:
    return [
        await WatcherProcess.start(
            address, prefix, min(WATCHERS_PER_PROCESS, count - first), first=first, cpus=cpus, same_session=same_session
        )
        for first in range(0, count, WATCHERS_PER_PROCESS)
    ]


async def _stop(holders: list[WatcherProcess]) -> None:
    for holder in holders:
        await holder.stop()


async def _settled_rss(server: ServerProcess) -> int:
    await server.wait_until_quiet()
    return server.rss_bytes()


Measure = Callable[[ServerProcess, grpc.aio.Channel], Awaitable[object]]


async def _with_server(server: ServerProcess, measure: Measure) -> object:
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            return await measure(server, channel)
    finally:
        await server.stop()


async def _count_sessions(stub: pb_grpc.TodoServiceStub) -> int:
    count, token = 0, ""
    while True:
        page = await stub.ListSessions(pb.ListSessionsRequest(page_size=10_000, page_token=token))
        count += len(page.sessions)
        if not (token := page.next_page_token):
            return count


async def _sessions_with_todos(
    stub: pb_grpc.TodoServiceStub, prefix: str, count: int, concurrency: int = 128, todos: int = 10
) -> None:
    async def one(session_id: str) -> None:
        await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id))
        if todos:
            await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(todos)))

    for start in range(0, count, concurrency):
        await asyncio.gather(
            *(one(f"{prefix}{number:05d}") for number in range(start, min(count, start + concurrency)))
        )


async def per_session_and_watcher(
    log_dir: Path, sessions: int, watchers: int, server_cpus: set[int], cpus: set[int]
) -> tuple[float, float]:
    """Bytes of RSS per idle session with 10 todos, and per idle watcher, on the memory store."""
    server = ServerProcess.sessiontodo("memory-rss", "memory://", server_cpus, log_dir)

    async def measure(server: ServerProcess, channel: grpc.aio.Channel) -> tuple[float, float]:
        stub = pb_grpc.TodoServiceStub(channel)
        await _sessions_with_todos(stub, "warm-", 200)
        await _stop(await _hold_watchers(server.address, "warm-", 200, cpus, same_session=False))
        await stub.RemoveAllSessions(pb.RemoveAllSessionsRequest())
        empty = await _settled_rss(server)
        await _sessions_with_todos(stub, "mem-", sessions)
        with_sessions = await _settled_rss(server)
        holders = await _hold_watchers(server.address, "mem-", watchers, cpus, same_session=False)
        try:
            with_watchers = await _settled_rss(server)
        finally:
            await _stop(holders)
        return (with_sessions - empty) / sessions, (with_watchers - with_sessions) / watchers

    return await _with_server(server, measure)  # type: ignore[return-value]


async def per_bare_stream(log_dir: Path, streams: int, server_cpus: set[int], cpus: set[int]) -> float:
    """Bytes of RSS per idle stream held open by the echo server."""
    server = ServerProcess.echo("echo-rss", server_cpus, log_dir)

    async def measure(server: ServerProcess, channel: grpc.aio.Channel) -> float:
        await _stop(await _hold_watchers(server.address, "warm", 200, cpus, same_session=True))
        empty = await _settled_rss(server)
        holders = await _hold_watchers(server.address, "bare", streams, cpus, same_session=True)
        try:
            return (await _settled_rss(server) - empty) / streams
        finally:
            await _stop(holders)

    return await _with_server(server, measure)  # type: ignore[return-value]


async def churn(
    log_dir: Path, sessions: int, cycles: int, server_cpus: set[int], cpus: set[int]
) -> tuple[int, int, list[int]]:
    """Create ``sessions`` empty sessions (fresh ids each cycle: ids are the client's), remove them
    all, repeat; returns (RSS at start, peak RSS, RSS after each cycle)."""
    server = ServerProcess.sessiontodo(
        "memory-churn", "memory://", server_cpus, log_dir, "--max-sessions", str(sessions)
    )
    cycles_run = 0

    async def cycle(server: ServerProcess, stub: pb_grpc.TodoServiceStub, count: int) -> int:
        nonlocal cycles_run
        cycles_run += 1
        await _sessions_with_todos(stub, f"churn{cycles_run}-", count, todos=0)
        if (existing := await _count_sessions(stub)) != count:
            raise RuntimeError(f"created {count} sessions but the server has {existing}")
        peak = server.rss_bytes()
        await stub.RemoveAllSessions(pb.RemoveAllSessionsRequest())
        return peak

    async def measure(server: ServerProcess, channel: grpc.aio.Channel) -> tuple[int, int, list[int]]:
        stub = pb_grpc.TodoServiceStub(channel)
        await cycle(server, stub, max(IN_FLIGHT, sessions // 50))
        start = await _settled_rss(server)
        peak, after = 0, []
        for _ in range(cycles):
            peak = max(peak, await cycle(server, stub, sessions))
            after.append(await _settled_rss(server))
        return start, peak, after

    return await _with_server(server, measure)  # type: ignore[return-value]


async def feed_versus_watches(
    log_dir: Path, sessions: int, server_cpus: set[int], cpus: set[int]
) -> tuple[float, float]:
    """Server RSS (bytes) added by following ``sessions`` active sessions: one WatchTodos per
    session (how a gateway had to do it), and one WatchChanges feed (how it does it now). Each
    on a fresh server holding the same sessions; "active" means every session is written once
    while followed, so the followers have really carried traffic."""

    async def follow(server: ServerProcess, channel: grpc.aio.Channel, feed: bool) -> float:
        stub = pb_grpc.TodoServiceStub(channel)
        await _sessions_with_todos(stub, "warm-", 200)
        await stub.RemoveAllSessions(pb.RemoveAllSessionsRequest())
        await _sessions_with_todos(stub, "act-", sessions)
        before = await _settled_rss(server)
        if feed:
            call = stub.WatchChanges(pb.WatchChangesRequest())
            holders: list[WatcherProcess] = []
        else:
            holders = await _hold_watchers(server.address, "act-", sessions, cpus, same_session=False)
        try:
            await _sessions_with_todos(stub, "act-", sessions, todos=3)  # get-or-create, then one write each
            if feed:
                for _ in range(sessions):
                    await call.read()
            return await _settled_rss(server) - before
        finally:
            if feed:
                call.cancel()
            await _stop(holders)

    added = []
    for feed in (False, True):
        server = ServerProcess.sessiontodo(f"follow-{'feed' if feed else 'watches'}", "memory://", server_cpus, log_dir)
        added.append(await _with_server(server, functools.partial(follow, feed=feed)))
    return added[0], added[1]  # type: ignore[return-value]


def feed_rows(sessions: int, watches: float, feed: float) -> list[Row]:
    return [
        Row(
            "4. memory",
            f"server RSS added by one WatchChanges feed following {sessions:,} active sessions",
            max(feed, 0.0) / MIB,
            "MiB",
            baseline=watches / MIB,
            baseline_name=f"one WatchTodos per session ({sessions:,} streams)",
        )
    ]


@dataclass
class BigListResult:
    """RSS around ``writes`` replacements of a ~1 MiB list on a session one watcher follows."""

    writes: int
    rss_before: int
    rss_after: int
    rss_removed: int
    """After the watcher is gone and the session removed."""

    @property
    def per_change(self) -> float:
        return (self.rss_after - self.rss_before) / self.writes


def _mib_list(number: int) -> list[pb.Todo]:
    """256 todos of 4000 characters: 1,024,000 characters, just under the default 1 MiB per list."""
    return [pb.Todo(content=f"{number}:{index}:".ljust(4000, "x")) for index in range(256)]


async def per_mib_change(log_dir: Path, writes: int, server_cpus: set[int], cpus: set[int]) -> BigListResult:
    """What one 1 MiB change costs in resident memory while a watcher follows the session, and
    whether it comes back once the session is removed (it must not grow with every write)."""
    server = ServerProcess.sessiontodo("memory-mib", "memory://", server_cpus, log_dir)

    async def measure(server: ServerProcess, channel: grpc.aio.Channel) -> BigListResult:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="big"))
        holders = await _hold_watchers(server.address, "big", 1, cpus, same_session=True)
        try:
            for number in range(5):  # warm-up: allocator pools, the first big messages
                await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="big", todos=_mib_list(-number)))
            before = await _settled_rss(server)
            for number in range(writes):
                await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="big", todos=_mib_list(number)))
            after = await _settled_rss(server)
        finally:
            await _stop(holders)
        await stub.RemoveSession(pb.RemoveSessionRequest(session_id="big"))
        return BigListResult(writes, before, after, await _settled_rss(server))

    return await _with_server(server, measure)  # type: ignore[return-value]


def big_list_rows(result: BigListResult) -> list[Row]:
    return [
        Row("4. memory", "RSS per 1 MiB change on a watched session", result.per_change / MIB, "MiB"),
        Row(
            "4. memory",
            f"RSS after {result.writes} 1 MiB changes, watcher gone and session removed",
            result.rss_removed / MIB,
            "MiB",
            baseline=result.rss_before / MIB,
            baseline_name="before the changes",
        ),
    ]


def memory_rows(result: MemoryResult) -> list[Row]:
    rows = [
        Row(
            "4. memory",
            f"RSS per idle session with 10 todos (memory store, {result.sessions:,} sessions)",
            result.per_session / KIB,
            "KiB",
        ),
        Row(
            "4. memory",
            f"RSS per open idle watcher ({result.watchers:,} watchers)",
            result.per_watcher / KIB,
            "KiB",
            baseline=result.per_bare_stream / KIB,
            baseline_name="echo: bare idle stream",
            target=("<=", 1.5),
        ),
        Row(
            "4. memory",
            f"RSS at the peak of {result.churned:,} sessions",
            result.rss_peak / MIB,
            "MiB",
            baseline=result.rss_start / MIB,
            baseline_name="start",
        ),
    ]
    first, *later = result.rss_after
    rows.append(
        Row(
            "4. memory",
            f"RSS after creating and removing {result.churned:,} sessions",
            first / MIB,
            "MiB",
            baseline=result.rss_start / MIB,
            baseline_name="start",
            target=("<=", 1.1),
        )
    )
    # A leak grows with every cycle; allocator high water does not.
    for number, after in enumerate(later, start=2):
        rows.append(
            Row(
                "4. memory",
                f"RSS after {number} cycles of creating and removing {result.churned:,} sessions",
                after / MIB,
                "MiB",
                baseline=first / MIB,
                baseline_name="after cycle 1",
            )
        )
    return rows

"""Figures 2 and 3: write-to-watcher latency as sessions grow, and fan-out to many watchers of one session.

Latency is measured with the writer and the measuring watcher in this process, on one
clock: the time from starting a ReplaceTodos call to reading its change on the watch
stream. The idle watchers of the other sessions live in separate processes.

The fan-out delivery rate uses h2load to hold the watch streams (a C client reads far
faster than the server can send, so the server is what is measured), plus one watcher
here that paces the writer: at most ``window`` writes ahead of what it has received, so
no watcher's buffer overflows and every watcher gets every change. The run ends by
removing the session; h2load returns once every stream has its final message, which is
when every change has been delivered.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import grpc

from loadgen import H2Load, grpc_body
from report import Row, median, percentile
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from throughput import Target
from watchers import WatcherProcess

WATCHERS_PER_PROCESS = 2500
PACING_WINDOW = 32
"""Writes ahead of the pacing watcher: enough to keep the server busy, far below the
server's per-watcher buffer (256), so no watcher is ever reset."""
READ_TIMEOUT = 30.0
FANOUT_TARGET = 0.91
"""Delivery rate against the bare stream's with many watchers: per message at most 1.1x its cost
(1 / 1.1). With one watcher every message is also a write, so the write path sets that rate."""
CHANGES = frozenset({pb.CHANGE_KIND_TODOS_REPLACED, pb.CHANGE_KIND_RESET})


def numbered_write(session_id: str, number: int) -> pb.ReplaceTodosRequest:
    """A list of 10 todos with fixed ids whose content differs on every write: always a change,
    and every message of a run has the same size."""
    todos = [pb.Todo(id=f"t{todo}", content=f"Step {todo}: write {number:08d} of the benchmark") for todo in range(10)]
    return pb.ReplaceTodosRequest(session_id=session_id, todos=todos)


async def _next_change(call: grpc.aio.UnaryStreamCall) -> pb.WatchTodosResponse:
    while True:
        message = await asyncio.wait_for(call.read(), READ_TIMEOUT)
        if message is grpc.aio.EOF:
            raise RuntimeError("the watch stream ended early")
        if message.kind in CHANGES:
            return message


async def write_to_watch_latencies(stub: pb_grpc.TodoServiceStub, session_id: str, samples: int) -> list[float]:
    """Seconds from starting each write to reading its change on a watch of the same session."""
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id=session_id))
    latencies = []
    try:
        await asyncio.wait_for(call.read(), READ_TIMEOUT)  # the snapshot
        for number in range(samples):
            request = numbered_write(session_id, number)
            started = time.perf_counter()
            write = stub.ReplaceTodos(request)
            await _next_change(call)
            latencies.append(time.perf_counter() - started)
            await write
    finally:
        call.cancel()
    return latencies


async def _create_sessions(stub: pb_grpc.TodoServiceStub, session_ids: Sequence[str], concurrency: int = 128) -> None:
    for start in range(0, len(session_ids), concurrency):
        chunk = session_ids[start : start + concurrency]
        await asyncio.gather(*(stub.CreateSession(pb.CreateSessionRequest(session_id=sid)) for sid in chunk))


@dataclass
class IsolationResult:
    sessions: list[int]
    latencies: dict[int, list[float]]
    """Seconds, by number of sessions; the 1-session samples are measured before and after the rest."""

    def p50_ms(self, sessions: int) -> float:
        return median(self.latencies[sessions]) * 1e3

    def p99_ms(self, sessions: int) -> float:
        return percentile(self.latencies[sessions], 0.99) * 1e3


async def measure_isolation(
    target: Target, session_counts: Sequence[int], samples: int, cpus: set[int]
) -> IsolationResult:
    """Figure 2: one measured session among ``n`` sessions, each of the others with one idle watcher."""
    latencies: dict[int, list[float]] = {}
    holders: list[WatcherProcess] = []
    held = 0
    try:
        for count in sorted(session_counts):
            idle = count - 1
            if idle > held:
                await _create_sessions(target.stub, [f"idle-{number:05d}" for number in range(held, idle)])
                for first in range(held, idle, WATCHERS_PER_PROCESS):
                    size = min(WATCHERS_PER_PROCESS, idle - first)
                    holders.append(
                        await WatcherProcess.start(target.server.address, "idle-", size, first=first, cpus=cpus)
                    )
                held = idle
            session_id = await target.fresh_session("measured")
            latencies.setdefault(count, []).extend(await write_to_watch_latencies(target.stub, session_id, samples))
    finally:
        for holder in holders:
            await holder.stop()
    await target.stub.RemoveAllSessions(pb.RemoveAllSessionsRequest())
    # The 1-session case again, now that the machine has run a while: drift shows up in both.
    session_id = await target.fresh_session("measured")
    latencies[1] += await write_to_watch_latencies(target.stub, session_id, samples)
    return IsolationResult(sorted(session_counts), latencies)


def _sessions(count: int) -> str:
    return "1 session" if count == 1 else f"{count:,} sessions, each other one with an idle watcher"


def _watchers(count: int) -> str:
    return "1 watcher" if count == 1 else f"{count:,} watchers"


def isolation_rows(result: IsolationResult) -> list[Row]:
    rows = []
    largest = max(result.sessions)
    for sessions in result.sessions:
        for name, value in (("p50", result.p50_ms), ("p99", result.p99_ms)):
            target = ("<=", 1.25) if name == "p50" and sessions == largest else None
            rows.append(
                Row(
                    "2. isolation",
                    f"write-to-watcher {name}, {_sessions(sessions)}",
                    value(sessions),
                    "ms",
                    baseline=value(1),
                    baseline_name="1 session",
                    target=target,
                )
            )
    return rows


@dataclass(frozen=True)
class FanOut:
    rate: float
    """Watcher-messages delivered per second."""
    lossless: bool
    """Every watcher got every change (no RESET took the place of changes)."""


async def delivery_rate(target: Target, watchers: int, seconds: float, window: int, cpus: set[int]) -> FanOut:
    """Figure 3's rate: changes to one session, delivered to ``watchers`` streams, per second."""
    session_id = await target.fresh_session("fanout", with_ids=True)
    streams = None
    if watchers > 1:
        clients = math.ceil((watchers - 1) / 100)
        body = grpc_body(pb.WatchTodosRequest(session_id=session_id))
        streams = await H2Load.start(
            target.server.address, "WatchTodos", body, cpus=cpus,
            requests=watchers - 1, clients=clients, streams=math.ceil((watchers - 1) / clients),
        )  # fmt: skip
        await target.server.wait_until_quiet()
    pacer = target.stub.WatchTodos(pb.WatchTodosRequest(session_id=session_id))
    try:
        snapshot = await asyncio.wait_for(pacer.read(), READ_TIMEOUT)
        paced_bytes = snapshot.ByteSize() + 5
        first = confirmed = snapshot.revision
        written = 0

        async def follow_one() -> None:
            nonlocal confirmed, paced_bytes
            change = await _next_change(pacer)
            paced_bytes += change.ByteSize() + 5
            confirmed = change.revision

        started = time.monotonic()
        writes = []  # calls run on their own once made; awaited below for their status
        while time.monotonic() - started < seconds:
            while first + written - confirmed >= window:
                await follow_one()
            writes.append(target.stub.ReplaceTodos(numbered_write(session_id, written)))
            written += 1
        await asyncio.gather(*writes)
        while confirmed < first + written:
            await follow_one()
        await target.stub.RemoveSession(pb.RemoveSessionRequest(session_id=session_id))
        removal = await asyncio.wait_for(pacer.read(), READ_TIMEOUT)
        paced_bytes += removal.ByteSize() + 5
        held = await asyncio.wait_for(streams.result(), READ_TIMEOUT) if streams is not None else None
        elapsed = time.monotonic() - started
    finally:
        pacer.cancel()
    lossless = held is None or held.data_bytes >= (watchers - 1) * paced_bytes * 0.99
    return FanOut(watchers * written / elapsed, lossless)


async def delivery_latencies(target: Target, watchers: int, samples: int, cpus: set[int]) -> list[float]:
    """Figure 3's latency: seconds from starting a write until the last of ``watchers`` streams has it.

    The watchers are in client processes that report when all their streams have a revision;
    the writer waits for every report before the next write."""
    session_id = await target.fresh_session("reach", with_ids=True)
    holders = [
        await WatcherProcess.start(
            target.server.address, session_id, min(500, watchers - first), cpus=cpus, same_session=True, report=True
        )
        for first in range(0, watchers, 500)
    ]

    async def write(number: int) -> int:
        return (await target.stub.ReplaceTodos(numbered_write(session_id, number))).revision

    latencies = await time_to_reach_all(holders, write, samples)
    await target.stub.RemoveSession(pb.RemoveSessionRequest(session_id=session_id))
    return latencies


async def time_to_reach_all(
    holders: Sequence[WatcherProcess], write: Callable[[int], Awaitable[int]], samples: int
) -> list[float]:
    """Seconds from starting each write (``write(number)`` returns its revision) until every
    holder reports all its streams have it; the holders are stopped at the end."""
    latencies = []
    try:
        for number in range(samples):
            started = time.monotonic_ns()
            revision = await write(number)
            reached = 0
            for holder in holders:
                seen = 0
                while seen < revision:
                    seen, at = await asyncio.wait_for(holder.next_report(), READ_TIMEOUT)
                reached = max(reached, at)
            latencies.append((reached - started) / 1e9)
    finally:
        for holder in holders:
            await holder.stop()
    return latencies


@dataclass
class FanOutResult:
    watchers: list[int]
    rates: dict[str, dict[int, list[float]]]
    lossless: bool
    latencies: dict[str, dict[int, list[float]]]


async def measure_fanout(
    targets: Sequence[Target], watcher_counts: Sequence[int], rounds: int, seconds: float, samples: int, cpus: set[int]
) -> FanOutResult:
    """Figure 3: delivery rate and time-to-all-watchers, each target in turn for each watcher count."""
    rates: dict[str, dict[int, list[float]]] = {target.name: {} for target in targets}
    latencies: dict[str, dict[int, list[float]]] = {target.name: {} for target in targets}
    lossless = True
    for round_ in range(rounds):
        for watchers in watcher_counts:
            order = targets if round_ % 2 == 0 else list(reversed(targets))
            for target in order:
                fanout = await delivery_rate(target, watchers, seconds, window=PACING_WINDOW, cpus=cpus)
                rates[target.name].setdefault(watchers, []).append(fanout.rate)
                lossless &= fanout.lossless
    for watchers in watcher_counts:
        for target in targets:
            latencies[target.name][watchers] = await delivery_latencies(target, watchers, samples, cpus)
    return FanOutResult(list(watcher_counts), rates, lossless, latencies)


def fanout_rows(result: FanOutResult, subject: str, baseline: str) -> list[Row]:
    rows = []
    for watchers in result.watchers:
        mine, theirs = result.rates[subject][watchers], result.rates[baseline][watchers]
        ratio = median([a / b for a, b in zip(mine, theirs, strict=True)])
        rows.append(
            Row(
                "3. fan-out",
                f"delivery rate, 1 session with {_watchers(watchers)}"
                + ("" if result.lossless else " (some watchers were reset)"),
                median(mine),
                "msg/s",
                baseline=median(mine) / ratio,
                baseline_name=f"{baseline}, same rounds",
                target=(">=", 0.7 if watchers == 1 else FANOUT_TARGET),
            )
        )
    for watchers in result.watchers:
        for name, fraction in (("p50", 0.5), ("p99", 0.99)):
            rows.append(
                Row(
                    "3. fan-out",
                    f"time for a write to reach {'its' if watchers == 1 else 'all'} {_watchers(watchers)}, {name}",
                    percentile(result.latencies[subject][watchers], fraction) * 1e3,
                    "ms",
                    baseline=percentile(result.latencies[baseline][watchers], fraction) * 1e3,
                    baseline_name=baseline,
                )
            )
    return rows

"""Figures 9-11: sessiontodo against etcd, the store with watches a team would otherwise pick.

Every server of the figure (the echo floor, sessiontodo's stores, etcd) runs pinned to the same
core and is measured in the same rounds, in a rotating order. A *contender* is what a server
looks like to the figure: how to write a 10-todo list to a key (a ReplaceTodos for sessiontodo
and the echo; a KV/Put whose value is that same ReplaceTodos request, byte for byte, for etcd),
how to read the key's revision, and how to watch it. Adding a server to the comparison (a Redis
floor, several processes) means adding a contender.

- Write throughput: h2load at two concurrencies, every call a real change (checked against the
  revision); the server's CPU time per write from ``/proc/<pid>/stat`` over the same run, which
  is steadier than the rate on a shared machine.
- Write-to-watch latency, idle and under background load (h2load writing other keys at a fixed
  rate): one writer and one watcher of the same key in this process, one write at a time.
- Fan-out: the time for one write to reach the last of 100 or 1,000 watchers of its key.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

import etcd
from loadgen import H2Load, grpc_body, h2load
from processes import ServerProcess
from report import Row, median, percentile
from sessiontodo.v1 import todo_service_pb2 as pb
from throughput import Target, rotated, todo_list
from watchers import WatcherProcess
from watching import numbered_write, time_to_reach_all, write_to_watch_latencies

COMPETITOR = "etcd"
FLOOR = "echo"
IN_FLIGHT = (16, 64)
"""Calls in flight (4 connections of 4 or 16 streams each)."""
BACKGROUND_RATE = 1000
"""Writes a second to other keys while the loaded latency is measured."""
FANOUT_WATCHERS = (100, 1000)


class Contender(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def server(self) -> ServerProcess: ...

    async def fresh_key(self, prefix: str) -> str:
        """A new key (session) with a 10-todo list written once."""

    def write_call(self, key: str) -> tuple[str, str, bytes]:
        """(service path, method, body) of a 10-todo write to ``key`` for h2load: a real change every time."""

    async def check(self, service: str, method: str, body: bytes) -> None:
        """Send h2load's exact bytes once as a real gRPC call: raises unless it succeeds."""

    async def revision(self, key: str) -> int:
        """A revision that moves by exactly one per write to ``key`` (and is not moved by anything else)."""

    async def watch_latencies(self, key: str, samples: int) -> list[float]:
        """Seconds from starting each of ``samples`` writes to ``key`` to reading it on a watch of ``key``."""

    async def watchers(self, key: str, count: int, cpus: set[int]) -> WatcherProcess:
        """A process holding ``count`` watches of ``key``, reporting when all have a revision."""

    async def write(self, key: str, number: int) -> int:
        """Write the ``number``-th list to ``key``; its revision."""

    async def close(self) -> None: ...


@dataclass
class SessiontodoContender:
    """sessiontodo (any store) or the echo floor: TodoService, one session per key."""

    target: Target

    @property
    def name(self) -> str:
        return self.target.name

    @property
    def server(self) -> ServerProcess:
        return self.target.server

    async def fresh_key(self, prefix: str) -> str:
        return await self.target.fresh_session(prefix)

    def write_call(self, key: str) -> tuple[str, str, bytes]:
        # No todo ids: each call generates new ones, so no list equals the last.
        body = grpc_body(pb.ReplaceTodosRequest(session_id=key, todos=todo_list(10)))
        return "/sessiontodo.v1.TodoService", "ReplaceTodos", body

    async def check(self, service: str, method: str, body: bytes) -> None:
        await self.target.channel.unary_unary(f"{service}/{method}")(body[5:], timeout=10)

    async def revision(self, key: str) -> int:
        return await self.target.revision(key)

    async def watch_latencies(self, key: str, samples: int) -> list[float]:
        return await write_to_watch_latencies(self.target.stub, key, samples)

    async def watchers(self, key: str, count: int, cpus: set[int]) -> WatcherProcess:
        return await WatcherProcess.start(self.server.address, key, count, cpus=cpus, same_session=True, report=True)

    async def write(self, key: str, number: int) -> int:
        return (await self.target.stub.ReplaceTodos(numbered_write(key, number))).revision

    async def close(self) -> None:
        await self.target.channel.close()


@dataclass
class EtcdContender:
    """etcd: KV/Put of the ReplaceTodos request's bytes as the value, Watch of the key."""

    server: ServerProcess
    channel: grpc.aio.Channel = field(init=False)
    _numbers: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.server.address)
        self._put = etcd.put(self.channel)
        self._range = etcd.range_(self.channel)

    @property
    def name(self) -> str:
        return self.server.name

    async def fresh_key(self, prefix: str) -> str:
        key = f"{prefix}-{next(self._numbers)}"
        await self.write(key, 0)
        return key

    def write_call(self, key: str) -> tuple[str, str, bytes]:
        value = pb.ReplaceTodosRequest(session_id=key, todos=todo_list(10)).SerializeToString()
        return "/etcdserverpb.KV", "Put", grpc_body(etcd.PutRequest(key=key.encode(), value=value))

    async def check(self, service: str, method: str, body: bytes) -> None:
        await self.channel.unary_unary(f"{service}/{method}")(body[5:], timeout=10)

    async def revision(self, key: str) -> int:
        """etcd's store-wide revision: during a measurement only its own writes move it."""
        return int((await self._range(etcd.RangeRequest(key=key.encode()))).header.revision)

    async def watch_latencies(self, key: str, samples: int) -> list[float]:
        call = await etcd.open_watch(self.channel, key.encode())
        latencies = []
        try:
            for number in range(samples):
                started = time.perf_counter()
                write = asyncio.ensure_future(self.write(key, number))
                await etcd.next_revision(call)
                latencies.append(time.perf_counter() - started)
                await write
        finally:
            call.cancel()
        return latencies

    async def watchers(self, key: str, count: int, cpus: set[int]) -> WatcherProcess:
        return await WatcherProcess.start(
            self.server.address, key, count, cpus=cpus, same_session=True, report=True, on_etcd=True
        )

    async def write(self, key: str, number: int) -> int:
        value = numbered_write(key, number).SerializeToString()
        return int((await self._put(etcd.PutRequest(key=key.encode(), value=value))).header.revision)

    async def close(self) -> None:
        await self.channel.close()


def sessiontodo_contender(server: ServerProcess) -> SessiontodoContender:
    return SessiontodoContender(Target(server, grpc.aio.insecure_channel(server.address)))


@dataclass(frozen=True)
class WriteRun:
    rate: float
    cpu_us: float
    """Server CPU time per write, microseconds."""


async def write_run(contender: Contender, in_flight: int, seconds: float, cpus: set[int]) -> WriteRun:
    key = await contender.fresh_key("versus")
    service, method, body = contender.write_call(key)
    await contender.check(service, method, body)
    before, cpu_before = await contender.revision(key), contender.server.cpu_seconds()
    result = await h2load(
        contender.server.address, method, body, cpus=cpus, duration=seconds,
        clients=4, streams=in_flight // 4, service=service,
    )  # fmt: skip
    cpu = contender.server.cpu_seconds() - cpu_before
    changed = await contender.revision(key) - before
    if not result.succeeded <= changed <= result.succeeded + in_flight:
        raise RuntimeError(
            f"{contender.name}: h2load counted {result.succeeded} writes but the revision moved {changed}"
        )
    return WriteRun(result.rate, cpu / result.succeeded * 1e6)


async def loaded_latencies(contender: Contender, samples: int, cpus: set[int]) -> list[float]:
    """Write-to-watch latency while h2load writes other keys at ``BACKGROUND_RATE`` a second."""
    key, busy = await contender.fresh_key("latency"), await contender.fresh_key("background")
    service, method, body = contender.write_call(busy)
    load = await H2Load.start(
        contender.server.address, method, body, cpus=cpus, duration=600.0,
        clients=4, streams=4, rps=BACKGROUND_RATE // 4, service=service,
    )  # fmt: skip
    try:
        await asyncio.sleep(0.5)  # the load is running
        return await contender.watch_latencies(key, samples)
    finally:
        await load.stop()


async def reach_latencies(contender: Contender, watchers: int, samples: int, cpus: set[int]) -> list[float]:
    """Seconds from starting a write until the last of ``watchers`` watches of its key has it."""
    key = await contender.fresh_key("reach")
    holders = [await contender.watchers(key, min(500, watchers - first), cpus) for first in range(0, watchers, 500)]
    return await time_to_reach_all(holders, lambda number: contender.write(key, number), samples)


@dataclass
class Versus:
    """Everything figures 9-11 measured, by contender name."""

    writes: dict[int, dict[str, list[WriteRun]]] = field(default_factory=dict)
    idle: dict[str, list[float]] = field(default_factory=dict)
    loaded: dict[str, list[float]] = field(default_factory=dict)
    reach: dict[int, dict[str, list[float]]] = field(default_factory=dict)

    def rate(self, in_flight: int, name: str) -> float:
        return median([run.rate for run in self.writes[in_flight][name]])

    def cpu_us(self, in_flight: int, name: str) -> float:
        return median([run.cpu_us for run in self.writes[in_flight][name]])

    def as_json(self) -> dict[str, Any]:
        return {
            "writes": {
                str(n): {name: [run.__dict__ for run in runs] for name, runs in by.items()}
                for n, by in self.writes.items()
            },
            "idle_ms": {name: [s * 1e3 for s in samples] for name, samples in self.idle.items()},
            "loaded_ms": {name: [s * 1e3 for s in samples] for name, samples in self.loaded.items()},
            "reach_ms": {
                str(n): {name: [s * 1e3 for s in samples] for name, samples in by.items()}
                for n, by in self.reach.items()
            },
        }


async def measure_versus(
    contenders: Sequence[Contender],
    fanned_out: Sequence[str],
    *,
    writes_only: Sequence[str] = (),
    rounds: int,
    seconds: float,
    samples: int,
    reach_samples: int,
    watcher_counts: Sequence[int],
    cpus: set[int],
) -> Versus:
    """Figures 9-11; ``fanned_out`` names the contenders whose fan-out is measured (1,000 streams each is
    slow), ``writes_only`` those measured only for write throughput and CPU."""
    result = Versus()
    for in_flight in IN_FLIGHT:
        result.writes[in_flight] = {contender.name: [] for contender in contenders}
    for round_ in range(rounds):
        for contender in rotated(contenders, round_):
            for in_flight in IN_FLIGHT:
                run = await write_run(contender, in_flight, seconds, cpus)
                result.writes[in_flight][contender.name].append(run)
    for contender in contenders:
        if contender.name in writes_only:
            continue
        result.idle[contender.name] = await contender.watch_latencies(await contender.fresh_key("idle"), samples)
        if contender.name != FLOOR:  # the echo's watches get every session's writes: no loaded figure
            result.loaded[contender.name] = await loaded_latencies(contender, samples, cpus)
    for watchers in watcher_counts:
        result.reach[watchers] = {}
        for contender in contenders:
            if contender.name in fanned_out:
                result.reach[watchers][contender.name] = await reach_latencies(contender, watchers, reach_samples, cpus)
    return result


def versus_rows(result: Versus, subjects: Sequence[str]) -> list[Row]:
    """sessiontodo's figures against etcd's; the echo floor's too, so each ratio reads next to
    what a bare grpc.aio server achieves against etcd."""
    rows = []
    compared = [*subjects, FLOOR]

    def row(measure: str, name: str, value: float, unit: str, baseline: float) -> Row:
        label = "echo (bare grpc.aio floor)" if name == FLOOR else f"{name} store"
        return Row("9. vs etcd", f"{measure}, {label}", value, unit, baseline=baseline, baseline_name=COMPETITOR)

    for in_flight in IN_FLIGHT:
        for name in compared:
            rows.append(
                row(
                    f"write throughput, {in_flight} in flight",
                    name,
                    result.rate(in_flight, name),
                    "req/s",
                    result.rate(in_flight, COMPETITOR),
                )
            )
    for in_flight in IN_FLIGHT:
        for name in compared:
            rows.append(
                row(
                    f"server CPU per write, {in_flight} in flight",
                    name,
                    result.cpu_us(in_flight, name),
                    "µs",
                    result.cpu_us(in_flight, COMPETITOR),
                )
            )
    for label, latencies in (("idle", result.idle), (f"under {BACKGROUND_RATE:,} writes/s", result.loaded)):
        for name, fraction in itertools.product([n for n in compared if n in latencies], (0.5, 0.99)):
            rows.append(
                row(
                    f"write-to-watch p{round(fraction * 100)}, {label}",
                    name,
                    percentile(latencies[name], fraction) * 1e3,
                    "ms",
                    percentile(latencies[COMPETITOR], fraction) * 1e3,
                )
            )
    for watchers, by_name in result.reach.items():
        for name, fraction in itertools.product([n for n in compared if n in by_name], (0.5, 0.99)):
            rows.append(
                row(
                    f"time for a write to reach all {watchers:,} watchers, p{round(fraction * 100)}",
                    name,
                    percentile(by_name[name], fraction) * 1e3,
                    "ms",
                    percentile(by_name[COMPETITOR], fraction) * 1e3,
                )
            )
    return rows


def durability_rows(result: Versus) -> list[Row]:
    """The fsync target: group-committed fsync against the process-crash mode, 16 in flight."""
    return [
        Row(
            "10. durability",
            f"ReplaceTodos, sqlite --durability fsync vs process, {in_flight} in flight",
            result.rate(in_flight, "sqlite-fsync"),
            "req/s",
            baseline=result.rate(in_flight, "sqlite"),
            baseline_name="sqlite, process",
            target=(">=", 0.8) if in_flight == 16 else None,
        )
        for in_flight in IN_FLIGHT
    ]


ON_ASYNCIO = "-asyncio"
"""Name suffix of the servers run on asyncio's own loop instead of the default (uvloop)."""


def event_loop_rows(result: Versus, names: Sequence[str]) -> list[Row]:
    """The default loop (uvloop) against asyncio's own, same rounds: CPU per write and the rate."""
    rows = []
    for name, in_flight in itertools.product(names, IN_FLIGHT):
        label = "echo" if name == FLOOR else f"{name} store"
        for measure, value, unit in (
            ("server CPU per write", result.cpu_us, "µs"),
            ("write rate", result.rate, "req/s"),
        ):
            rows.append(
                Row(
                    "11. event loop",
                    f"{measure}, {label}, {in_flight} in flight: uvloop",
                    value(in_flight, name),
                    unit,
                    baseline=value(in_flight, name + ON_ASYNCIO),
                    baseline_name="asyncio's loop",
                )
            )
    return rows


def plotted(result: Versus, names: Sequence[str]) -> dict[str, Any]:
    """Ratios to etcd for the plot: throughput at each concurrency, CPU per write, p50 idle and loaded."""
    ratios: dict[str, dict[str, float]] = {}
    for name in names:
        ratios[name] = {
            **{f"writes/s @{n}": result.rate(n, name) / result.rate(n, COMPETITOR) for n in IN_FLIGHT},
            **{f"CPU/write @{n}": result.cpu_us(n, name) / result.cpu_us(n, COMPETITOR) for n in IN_FLIGHT},
            "p50 idle": median(result.idle[name]) / median(result.idle[COMPETITOR]),
        }
        if name in result.loaded:
            ratios[name]["p50 loaded"] = median(result.loaded[name]) / median(result.loaded[COMPETITOR])
    return ratios

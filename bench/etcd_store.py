"""Figure 14: the etcd store against raw etcd Puts on the same three-member cluster, and against
the Redis store, in one run.

The raw Put is the least an etcd-backed write can cost: a KV/Put of a ReplaceTodos(10) request's
bytes (to keys outside the store's prefix), from ``grpc.aio`` with the code generated from etcd's
protos, as the store sends its calls.
The store does what the service needs on top: the list operation, a Txn comparing the session's
revision, the change record, and answering only once its own watch has delivered the write
(``stores/etcd/turns.py``). The Redis store (``appendfsync always``: every acknowledged write on
disk, as etcd's are) does the same on one Redis. Everything runs in this process against
servers pinned to the server CPUs, in interleaved rounds (medians):

- sequential ReplaceTodos(10) writes: this process's CPU per write (``process_time``);
- ``writers`` concurrent writers, each on a key or session of its own, for ``seconds``: writes/s,
  and the etcd members' CPU per write (``/proc/<pid>/stat``);
- write to a watcher on another connection, p50: a Watch stream of the key for the raw Puts, a
  second store instance (a replica) hearing the change for the stores;
- batched against unary writes through the etcd store: ``writers`` writers each making
  ``write_batch`` calls of ``BATCH`` single-todo ReplaceTodos (one to each of ``BATCH`` sessions
  of its own, one Txn each), against as many writers each making unary single-todo ReplaceTodos:
  writes/s (writes, not calls), this process's CPU and the members' CPU per write.

    python bench/etcd_store.py             # the full run
    python bench/etcd_store.py --quick     # tiny sizes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc

import etcd
from etcd import EtcdProcess
from replicas import _redis
from report import Row
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_server.domain.batch import Batch, Create, WriteContext
from sessiontodo_server.domain.batch import Write as TodoWrite
from sessiontodo_server.domain.mutations import ReplaceTodos
from sessiontodo_server.domain.values import Change, Limits, SessionInfo, Todo
from sessiontodo_server.stores.etcd import EtcdStore
from sessiontodo_server.stores.redis import RedisStore

ROOT = Path(__file__).resolve().parent.parent
LIMITS = Limits()
FIGURE = "14. etcd store"
BATCH = 50
"""Single-todo writes per ``write_batch`` (figure 15's batch)."""

Store = EtcdStore | RedisStore
Writer = Callable[[int], Awaitable[object]]
"""Makes write number ``n`` (of one writer's key or session)."""


def _todos(n: int, count: int = 10) -> tuple[Todo, ...]:
    return tuple(Todo(f"t{k}", f"write {n} todo {k}") for k in range(count))


def _put_value(n: int) -> bytes:
    """The bytes a raw Put writes: the ReplaceTodos request the service would be sent."""
    return pb.ReplaceTodosRequest(
        session_id="bench", todos=[pb.Todo(id=t.id, content=t.content) for t in _todos(n)]
    ).SerializeToString()


def _raw_writer(channel: grpc.aio.Channel, key: bytes) -> Writer:
    put = etcd.put(channel)

    async def write(n: int) -> object:
        return await put(etcd.PutRequest(key=key, value=_put_value(n)))

    return write


def _store_writer(store: Store, session_id: str, todos: int = 10) -> Writer:
    async def write(n: int) -> object:
        return await store.write(
            TodoWrite(session_id, ReplaceTodos(_todos(n, todos))), WriteContext("", "bench", time.time(), LIMITS)
        )

    return write


def _batch_writer(store: Store, session_ids: Sequence[str]) -> Writer:
    """One ``write_batch`` of a single-todo ReplaceTodos to each of ``session_ids``."""

    async def write(n: int) -> object:
        writes = [TodoWrite(session_id, ReplaceTodos(_todos(n, 1))) for session_id in session_ids]
        return await store.write_batch(Batch(writes, ""), WriteContext("", "bench", time.time(), LIMITS))

    return write


def _batch_sessions(writer: int) -> list[str]:
    return [f"b{writer}-{k}" for k in range(BATCH)]


async def _cpu_per_write(write: Writer, writes: int, per_call: int = 1) -> float:
    """Microseconds of this process's CPU per write, ``writes`` made one call after another
    (``per_call`` writes a call)."""
    calls = max(writes // per_call, 1)
    started = time.process_time()
    for n in range(calls):
        await write(n)
    return (time.process_time() - started) / (calls * per_call) * 1e6


async def _throughput(
    writers: Sequence[Writer], seconds: float, members: Sequence[EtcdProcess], per_call: int = 1
) -> tuple[float, float]:
    """(writes/s of ``writers`` at once, ``per_call`` writes a call; etcd members' CPU µs per
    write) over ``seconds``."""
    done = 0
    stop_at = time.monotonic() + seconds

    async def run(write: Writer) -> None:
        nonlocal done
        n = 0
        while time.monotonic() < stop_at:
            await write(n)
            n += 1
            done += per_call

    cpu_before = sum(member.cpu_seconds() for member in members)
    started = time.monotonic()
    await asyncio.gather(*(run(write) for write in writers))
    elapsed = time.monotonic() - started
    cpu = sum(member.cpu_seconds() for member in members) - cpu_before
    return done / elapsed, cpu / done * 1e6


async def _raw_latencies(channel: grpc.aio.Channel, watching: grpc.aio.Channel, samples: int) -> list[float]:
    """Milliseconds from just before a Put to a Watch stream (on another channel) having it."""
    key = b"raw/latency"
    call = await etcd.open_watch(watching, key)
    write = _raw_writer(channel, key)
    try:
        latencies = []
        for n in range(samples):
            started = time.perf_counter()
            await write(n)
            await etcd.next_revision(call)
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies
    finally:
        call.cancel()


async def _store_latencies(store: Store, other: Store, samples: int) -> list[float]:
    """Milliseconds from just before a store write to another store instance (a replica) hearing it."""
    await store.create_session("latency", SessionInfo(), 100_000, "bench")
    arrival: asyncio.Future[float] | None = None

    def heard(change: Change) -> None:
        if arrival is not None and not arrival.done() and change.session_id == "latency":
            arrival.set_result(time.perf_counter())

    other.on_external_change(heard)
    write = _store_writer(store, "latency")
    latencies = []
    for n in range(samples):
        arrival = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        await write(n)
        latencies.append((await asyncio.wait_for(arrival, 10) - started) * 1000)
    return latencies


@asynccontextmanager
async def _cluster(directory: Path, cpus: Collection[int] | None) -> AsyncIterator[list[EtcdProcess]]:
    members = EtcdProcess.cluster("bench-etcd", 3, set(cpus or os.sched_getaffinity(0)), directory)
    try:
        await asyncio.gather(*(member.start() for member in members))
        yield members
    finally:
        for member in members:
            await member.stop()


async def measure_etcd_store(
    writes: int = 1000,
    rounds: int = 3,
    samples: int = 300,
    writers: int = 32,
    seconds: float = 3.0,
    *,
    server_cpus: Collection[int] | None = None,
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """Every figure of the module docstring, as medians over ``rounds`` (raw numbers kept)."""
    with tempfile.TemporaryDirectory(prefix="sessiontodo-etcd-store-bench-") as scratch:
        directory = log_dir or Path(scratch)
        async with AsyncExitStack() as stack:
            members = await stack.enter_async_context(_cluster(directory / "etcd-store", server_cpus))
            redis_url = await stack.enter_async_context(_redis(directory / "etcd-versus-redis", "always", server_cpus))
            url = f"etcd://{','.join(member.address for member in members)}/bench"
            makers: dict[str, Callable[[], Store]] = {
                "etcd": lambda: EtcdStore(url),
                "redis": lambda: RedisStore(redis_url),
            }

            async def opened(name: str) -> Store:
                store = makers[name]()
                await store.open()
                stack.push_async_callback(store.close)
                return store

            stores = {name: await opened(name) for name in makers}
            channel = await stack.enter_async_context(grpc.aio.insecure_channel(members[0].address))
            watching = await stack.enter_async_context(grpc.aio.insecure_channel(members[0].address))
            for name in ("etcd", "redis"):
                for n in range(writers):
                    await stores[name].create_session(f"w{n}", SessionInfo(), 100_000, "bench")
            for n in range(writers):  # one Txn each
                creates = [Create(session_id, SessionInfo()) for session_id in _batch_sessions(n)]
                await stores["etcd"].write_batch(Batch(creates, ""), WriteContext("", "bench", time.time(), LIMITS))
            sequential = {
                "raw": _raw_writer(channel, b"raw/sequential"),
                "etcd": _store_writer(stores["etcd"], "w0"),
                "redis": _store_writer(stores["redis"], "w0"),
                "etcd unary": _store_writer(stores["etcd"], "w0", todos=1),
                "etcd batched": _batch_writer(stores["etcd"], _batch_sessions(0)),
            }
            concurrent = {
                "raw": [_raw_writer(channel, f"raw/w{n}".encode()) for n in range(writers)],
                "etcd": [_store_writer(stores["etcd"], f"w{n}") for n in range(writers)],
                "redis": [_store_writer(stores["redis"], f"w{n}") for n in range(writers)],
                "etcd unary": [_store_writer(stores["etcd"], f"w{n}", todos=1) for n in range(writers)],
                "etcd batched": [_batch_writer(stores["etcd"], _batch_sessions(n)) for n in range(writers)],
            }
            per_call = {name: BATCH if name == "etcd batched" else 1 for name in sequential}
            for name, write in sequential.items():  # warm-up: connections open, scripts loaded, caches filled
                await _cpu_per_write(write, min(100, writes), per_call[name])
            cpu: dict[str, list[float]] = {name: [] for name in sequential}
            rates: dict[str, list[float]] = {name: [] for name in sequential}
            etcd_cpu: dict[str, list[float]] = {name: [] for name in sequential if name != "redis"}
            for _ in range(rounds):  # interleaved: a shared machine's drift hits all alike
                for name, write in sequential.items():
                    cpu[name].append(await _cpu_per_write(write, writes, per_call[name]))
                for name, parallel in concurrent.items():
                    rate, member_cpu = await _throughput(parallel, seconds, members, per_call[name])
                    rates[name].append(rate)
                    if name in etcd_cpu:
                        etcd_cpu[name].append(member_cpu)
            latency = {"raw": await _raw_latencies(channel, watching, samples)}
            for name in makers:  # a second replica only now, so that its CPU is not counted above
                latency[name] = await _store_latencies(stores[name], await opened(name), samples)
    return {
        "writes": writes,
        "rounds": rounds,
        "writers": writers,
        "batch": BATCH,
        "seconds": seconds,
        "cpu_us_per_write": {name: statistics.median(values) for name, values in cpu.items()},
        "writes_per_second": {name: statistics.median(values) for name, values in rates.items()},
        "etcd_cpu_us_per_write": {name: statistics.median(values) for name, values in etcd_cpu.items()},
        "watcher_p50_ms": {name: statistics.median(values) for name, values in latency.items()},
        "raw": {"cpu_us_per_write": cpu, "writes_per_second": rates, "etcd_cpu_us_per_write": etcd_cpu},
    }


def etcd_store_rows(result: dict[str, Any]) -> list[Row]:
    """Figure 14 of ``make bench``: ratios, no targets."""
    rates, cpu, members, p50 = (
        result["writes_per_second"],
        result["cpu_us_per_write"],
        result["etcd_cpu_us_per_write"],
        result["watcher_p50_ms"],
    )
    raw, redis = "raw etcd Put, same cluster", "Redis store (appendfsync always)"
    writers = f"ReplaceTodos(10)/s, {result['writers']} concurrent writers, etcd store on 3 members"
    return [
        Row(FIGURE, writers, rates["etcd"], "writes/s", baseline=rates["raw"], baseline_name=raw),
        Row(FIGURE, "Python CPU per write, etcd store", cpu["etcd"], "µs", baseline=cpu["raw"], baseline_name=raw),
        Row(FIGURE, "etcd CPU per write, 3 members", members["etcd"], "µs", baseline=members["raw"], baseline_name=raw),
        Row(
            FIGURE,
            "write to a watcher on another replica, p50",
            p50["etcd"],
            "ms",
            baseline=p50["raw"],
            baseline_name=raw,
        ),
        Row(FIGURE, writers, rates["etcd"], "writes/s", baseline=rates["redis"], baseline_name=redis),
        Row(FIGURE, "Python CPU per write, etcd store", cpu["etcd"], "µs", baseline=cpu["redis"], baseline_name=redis),
        Row(
            FIGURE,
            "write to a watcher on another replica, p50",
            p50["etcd"],
            "ms",
            baseline=p50["redis"],
            baseline_name=redis,
        ),
        *_batched_rows(result),
    ]


def _batched_rows(result: dict[str, Any]) -> list[Row]:
    """Batched against unary single-todo writes through the etcd store, in the same run."""
    rates, cpu, members = result["writes_per_second"], result["cpu_us_per_write"], result["etcd_cpu_us_per_write"]
    unary = "unary ReplaceTodos(1), same store and writers"
    batched = f"ReplaceTodos(1)/s, {result['batch']} per write_batch (one Txn), {result['writers']} writers"
    return [
        Row(FIGURE, batched, rates["etcd batched"], "writes/s", baseline=rates["etcd unary"], baseline_name=unary),
        Row(
            FIGURE,
            "Python CPU per write, batched",
            cpu["etcd batched"],
            "µs",
            baseline=cpu["etcd unary"],
            baseline_name=unary,
        ),
        Row(
            FIGURE,
            "etcd CPU per write, batched, 3 members",
            members["etcd batched"],
            "µs",
            baseline=members["etcd unary"],
            baseline_name=unary,
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    args = parser.parse_args()
    os.chdir(ROOT)
    sizes = (100, 1, 20, 8, 0.5) if args.quick else (1000, 3, 300, 32, 3.0)
    result = asyncio.run(measure_etcd_store(*sizes))
    print(json.dumps(result, indent=2))
    for row in etcd_store_rows(result):
        print(f"{row.measure}: {row.value:.1f} {row.unit} vs {row.baseline_name} {row.baseline:.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()

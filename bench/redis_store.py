"""The Redis store against a hand-rolled redis-py floor on the same redis-server, in one run; and
aggregate write throughput of one and two server processes sharing one Redis.

The floor is the least a Redis-backed write can cost from Python: redis-py (with hiredis), one
Lua script per write that sets the list, increments the revision and publishes it. The store
does that and everything the service needs on top (the list operation inside Redis, history,
the feed, request ids, following other replicas). Both write the same 10-todo lists to the same
redis-server in the same process, in interleaved rounds, so the ratios hold on a shared machine.

    python bench/redis_store.py             # the full run
    python bench/redis_store.py --quick     # tiny sizes
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
from collections.abc import Awaitable, Callable, Collection
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import grpc
from redis.asyncio import Redis

from loadgen import call_raw, grpc_body, h2load
from replicas import _redis, _replica
from report import Row
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.mutations import AddTodo, ReplaceTodos
from sessiontodo_server.domain.values import Change, Limits, SessionInfo, Todo
from sessiontodo_server.stores.redis import RedisStore

ROOT = Path(__file__).resolve().parent.parent
TARGET_CPU_RATIO = 2.0
TARGET_P50_RATIO = 2.0
TARGET_SCALING = 1.6
LIMITS = Limits()

_FLOOR_SCRIPT = """
redis.call('SET', KEYS[1], ARGV[1])
local revision = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', KEYS[3], ARGV[1])
return revision
"""


class _Floor:
    """The hand-rolled baseline: one script per write (set the list, incr the revision, publish)."""

    def __init__(self, url: str) -> None:
        self.redis = Redis.from_url(url)
        self._script = self.redis.register_script(_FLOOR_SCRIPT)
        self.keys = ["floor:list", "floor:revision", "floor:changes"]

    async def write(self, todos: list[list[str]]) -> int:
        return int(await self._script(self.keys, [json.dumps(todos, separators=(",", ":"))]))


def _lists(count: int) -> list[list[list[str]]]:
    return [[[f"t{k}", f"write {n} todo {k}", "pending", "medium"] for k in range(10)] for n in range(count)]


def _todos(fields: list[list[str]]) -> ReplaceTodos:
    return ReplaceTodos(tuple(Todo(i, c) for i, c, _, _ in fields))


async def _cpu_per_write(write: Callable[[Any], Awaitable[Any]], payloads: list[Any]) -> float:
    """Microseconds of this process's CPU per write, writes made one after another."""
    started = time.process_time()
    for payload in payloads:
        await write(payload)
    return (time.process_time() - started) / len(payloads) * 1e6


async def measure_store_against_floor(
    writes: int = 2000,
    rounds: int = 3,
    samples: int = 300,
    writers: int = 32,
    *,
    server_cpus: Collection[int] | None = None,
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """CPU per write and write-to-subscriber p50 of the store and of the floor, and contention
    failures of ``writers`` unconditional writers on one session through two store instances."""
    with tempfile.TemporaryDirectory(prefix="sessiontodo-redis-bench-") as scratch:
        directory = log_dir or Path(scratch)
        async with AsyncExitStack() as stack:
            url = await stack.enter_async_context(_redis(directory, "everysec", server_cpus))
            floor = _Floor(url)
            stack.push_async_callback(floor.redis.aclose)
            store = RedisStore(url)
            await store.open()
            stack.push_async_callback(store.close)
            await store.create_session("bench", SessionInfo(), 10, "bench")

            async def store_write(mutation: ReplaceTodos) -> object:
                return await store.write(Write("bench", mutation), WriteContext("", "bench", time.time(), LIMITS))

            lists = _lists(writes)
            mutations = [_todos(fields) for fields in lists]
            await _cpu_per_write(floor.write, lists[:100])  # warm-up: scripts loaded, connections open
            await _cpu_per_write(store_write, mutations[:100])
            cpu: dict[str, list[float]] = {"floor": [], "store": []}
            for _ in range(rounds):
                cpu["floor"].append(await _cpu_per_write(floor.write, lists))
                cpu["store"].append(await _cpu_per_write(store_write, mutations))

            other = RedisStore(url)  # a second replica: only now, so that its CPU is not counted above
            await other.open()
            stack.push_async_callback(other.close)
            latency = await _latencies(floor, store_write, other, lists[:samples], mutations[:samples])
            failures = await _contention_failures(store, other, writers)
    floor_cpu, store_cpu = statistics.median(cpu["floor"]), statistics.median(cpu["store"])
    floor_p50, store_p50 = (statistics.median(latency[name]) for name in ("floor", "store"))
    return {
        "writes": writes,
        "rounds": rounds,
        "cpu_us_per_write": {"floor": floor_cpu, "store": store_cpu, "rounds": cpu},
        "cpu_ratio": store_cpu / floor_cpu,
        "subscriber_p50_ms": {"floor": floor_p50, "store": store_p50},
        "p50_ratio": store_p50 / floor_p50,
        "contention": {"writers": writers, "writes": writers * 5, "failures": failures},
        "targets": {"cpu_ratio": TARGET_CPU_RATIO, "p50_ratio": TARGET_P50_RATIO},
    }


async def _latencies(
    floor: _Floor,
    store_write: Callable[[ReplaceTodos], Awaitable[object]],
    other: RedisStore,
    lists: list[list[list[str]]],
    mutations: list[ReplaceTodos],
) -> dict[str, list[float]]:
    """Milliseconds from just before each write to a subscriber on another connection having it:
    a pub/sub subscriber for the floor, another store instance (a replica) for the store."""
    arrival: asyncio.Future[float] | None = None

    def arrived(_: object = None) -> None:
        if arrival is not None and not arrival.done():
            arrival.set_result(time.perf_counter())

    async def subscribe() -> None:
        async with floor.redis.pubsub() as pubsub:
            await pubsub.subscribe(floor.keys[2])
            subscribed.set()
            async for message in pubsub.listen():
                if message["type"] == "message":
                    arrived()

    def heard(change: Change) -> None:
        arrived()

    other.on_external_change(heard)
    subscribed = asyncio.Event()
    subscriber = asyncio.create_task(subscribe())
    await subscribed.wait()
    latencies: dict[str, list[float]] = {"floor": [], "store": []}
    try:
        for fields, mutation in zip(lists, mutations, strict=True):
            for name, write in (("floor", floor.write(fields)), ("store", store_write(mutation))):
                arrival = asyncio.get_running_loop().create_future()
                started = time.perf_counter()
                await write
                latencies[name].append((await asyncio.wait_for(arrival, 10) - started) * 1000)
    finally:
        subscriber.cancel()
    return latencies


async def _contention_failures(first: RedisStore, second: RedisStore, writers: int) -> int:
    """Unconditional AddTodo calls racing on one session through two replicas that did not go through."""
    await first.create_session("contended", SessionInfo(), 10, "bench")

    async def add(store: RedisStore, n: int) -> None:
        for k in range(5):
            todo = Todo(f"w{n}-{k}", f"writer {n} #{k}")
            await store.write(
                Write("contended", AddTodo(todo, None, True)), WriteContext("", "bench", time.time(), LIMITS)
            )

    outcomes = await asyncio.gather(*(add((first, second)[n % 2], n) for n in range(writers)), return_exceptions=True)
    return sum(isinstance(outcome, BaseException) for outcome in outcomes)


async def measure_processes(
    seconds: float = 5.0,
    rounds: int = 3,
    *,
    load_cpus: set[int],
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """ReplaceTodos(10) per second (h2load) through one server process, and through two sharing one
    Redis, in interleaved rounds (medians). Nothing is pinned: the processes use every core."""
    with tempfile.TemporaryDirectory(prefix="sessiontodo-processes-") as scratch:
        directory = log_dir or Path(scratch)
        async with AsyncExitStack() as stack:
            url = await stack.enter_async_context(_redis(directory, "everysec", None))
            addresses = [await stack.enter_async_context(_replica(f"p{n}", url, directory, None)) for n in range(2)]
            ones, twos = [], []
            for _ in range(rounds):  # interleaved: a shared machine's drift hits both alike
                ones.append(sum(await _write_rates(addresses[:1], seconds, load_cpus)))
                twos.append(sum(await _write_rates(addresses, seconds, load_cpus)))
    one, two = statistics.median(ones), statistics.median(twos)
    return {
        "seconds": seconds,
        "rounds": rounds,
        "one_process": one,
        "two_processes": two,
        "rates": {"one": ones, "two": twos},
        "scaling": two / one,
        "target": TARGET_SCALING,
    }


async def _write_rates(addresses: list[str], seconds: float, cpus: set[int]) -> list[float]:
    """Run h2load against each address at once, each on a session of its own."""
    bodies = []
    for address in addresses:
        async with grpc.aio.insecure_channel(address) as channel:
            session_id = f"load-{os.urandom(4).hex()}"
            await pb_grpc.TodoServiceStub(channel).CreateSession(pb.CreateSessionRequest(session_id=session_id))
            todos = [pb.Todo(content=f"todo {k}") for k in range(10)]
            body = grpc_body(pb.ReplaceTodosRequest(session_id=session_id, todos=todos))
            await call_raw(channel, "ReplaceTodos", body)
            bodies.append(body)
    results = await asyncio.gather(
        *(
            h2load(address, "ReplaceTodos", body, cpus=cpus, duration=seconds, clients=4, streams=8)
            for address, body in zip(addresses, bodies, strict=True)
        )
    )
    return [result.rate for result in results]


def redis_rows(floor: dict[str, Any], processes: dict[str, Any]) -> list[Row]:
    """Figure 8 of ``make bench``."""
    cpu, p50 = floor["cpu_us_per_write"], floor["subscriber_p50_ms"]
    contention = floor["contention"]
    return [
        Row(
            "8. redis",
            "Python CPU per write, Redis store (ReplaceTodos of 10)",
            cpu["store"],
            "µs",
            baseline=cpu["floor"],
            baseline_name="hand-rolled redis-py script",
            target=("<=", TARGET_CPU_RATIO),
        ),
        Row(
            "8. redis",
            "write to subscriber on another connection, p50",
            p50["store"],
            "ms",
            baseline=p50["floor"],
            baseline_name="hand-rolled redis-py script + pub/sub",
            target=("<=", TARGET_P50_RATIO),
        ),
        Row(
            "8. redis",
            f"failed unconditional writes, {contention['writers']} writers on one session via 2 replicas",
            contention["failures"],
            f"of {contention['writes']}",
        ),
        Row(
            "8. redis",
            "ReplaceTodos/s, two server processes on one Redis",
            processes["two_processes"],
            "req/s",
            baseline=processes["one_process"],
            baseline_name="one server process",
            target=(">=", TARGET_SCALING),
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    args = parser.parse_args()
    os.chdir(ROOT)
    writes, rounds, samples, seconds = (200, 1, 30, 1.0) if args.quick else (2000, 3, 300, 5.0)

    async def both() -> dict[str, Any]:
        floor = await measure_store_against_floor(writes, rounds, samples)
        processes = await measure_processes(seconds, rounds, load_cpus=set(os.sched_getaffinity(0)))
        return {"store_against_floor": floor, "processes": processes}

    result = asyncio.run(both())
    print(json.dumps(result, indent=2))
    floor, processes = result["store_against_floor"], result["processes"]
    print(
        f"CPU per write: store {floor['cpu_us_per_write']['store']:.0f} µs, floor "
        f"{floor['cpu_us_per_write']['floor']:.0f} µs (x{floor['cpu_ratio']:.2f}, target <= x{TARGET_CPU_RATIO:.0f}); "
        f"write->subscriber p50: x{floor['p50_ratio']:.2f} (target <= x{TARGET_P50_RATIO:.0f}); "
        f"contention failures: {floor['contention']['failures']}; "
        f"two processes: x{processes['scaling']:.2f} one (target >= x{TARGET_SCALING})",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

"""Write-to-watcher latency across replicas sharing one Redis, against the same replica, in one run.

Starts a ``redis-server`` and two server replicas on it, watches one session on both replicas,
writes to it through replica A one write at a time, and times each write from just before the
call to the moment each watcher receives that revision. The watcher on A is the single-replica
baseline; the watcher on B adds Redis pub/sub and B's fan-out. Both watch the same writes, so
the ratio of their medians is independent of machine noise (target: at most 2).

    python bench/replicas.py                  # 300 samples
    python bench/replicas.py --samples 50     # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Collection
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parent.parent
TARGET_P50_RATIO = 2.0
_TIMEOUT = 20.0


async def measure_cross_replica_latency(
    samples: int = 300,
    *,
    warmup: int = 20,
    server_cpus: Collection[int] | None = None,
    appendfsync: str = "everysec",
    log_dir: Path | None = None,
) -> dict[str, Any]:
    """Measure write-to-watcher latency on the writing replica and on another replica (a coroutine).

    Starts its own ``redis-server`` (on PATH) and two replicas (``python -m sessiontodo_server
    --store redis://…``) on free loopback ports, and stops them all before returning.

    - ``samples``: timed writes (AddTodo, one at a time); ``warmup``: untimed writes before them.
    - ``server_cpus``: CPUs to pin Redis and both replicas to with ``taskset`` (None: not pinned).
    - ``appendfsync``: Redis's AOF fsync policy (``always`` makes every acknowledged write durable).
    - ``log_dir``: where the processes' logs and Redis's data go (None: a temporary directory).

    Returns ``{"samples", "appendfsync", "same_replica": {"p50_ms", "p99_ms"}, "cross_replica":
    {"p50_ms", "p99_ms"}, "p50_ratio", "target_p50_ratio", "meets_target"}``, where
    ``p50_ratio`` is cross-replica p50 over same-replica p50.
    """
    with tempfile.TemporaryDirectory(prefix="sessiontodo-replicas-") as scratch:
        directory = log_dir or Path(scratch)
        async with AsyncExitStack() as stack:
            redis_url = await stack.enter_async_context(_redis(directory, appendfsync, server_cpus))
            writer_address = await stack.enter_async_context(_replica("replica-a", redis_url, directory, server_cpus))
            other_address = await stack.enter_async_context(_replica("replica-b", redis_url, directory, server_cpus))
            same, cross = await _measure(writer_address, other_address, samples, warmup)
    same_p50, cross_p50 = _percentile(same, 50), _percentile(cross, 50)
    return {
        "samples": samples,
        "appendfsync": appendfsync,
        "same_replica": {"p50_ms": same_p50, "p99_ms": _percentile(same, 99)},
        "cross_replica": {"p50_ms": cross_p50, "p99_ms": _percentile(cross, 99)},
        "p50_ratio": cross_p50 / same_p50,
        "target_p50_ratio": TARGET_P50_RATIO,
        "meets_target": cross_p50 <= TARGET_P50_RATIO * same_p50,
    }


async def _measure(
    writer_address: str, other_address: str, samples: int, warmup: int
) -> tuple[list[float], list[float]]:
    """Latencies in milliseconds of each timed write, seen on the writing replica and on the other."""
    async with (
        grpc.aio.insecure_channel(writer_address) as writer_channel,
        grpc.aio.insecure_channel(other_address) as other_channel,
    ):
        writer = pb_grpc.TodoServiceStub(writer_channel)
        session = (await writer.CreateSession(pb.CreateSessionRequest(session_id="replicas"))).session
        watchers = [
            _Watcher(pb_grpc.TodoServiceStub(channel), session.session_id)
            for channel in (writer_channel, other_channel)
        ]
        for watcher in watchers:
            await watcher.start()
        same: list[float] = []
        cross: list[float] = []
        try:
            revision = session.revision
            for n in range(warmup + samples):
                revision += 1
                arrivals = [watcher.expect(revision) for watcher in watchers]
                started = time.perf_counter()
                added = await writer.AddTodo(
                    pb.AddTodoRequest(session_id=session.session_id, todo=pb.Todo(content=f"write {n}")),
                    timeout=_TIMEOUT,
                )
                assert added.revision == revision, "another writer touched the benchmark's session"
                seen_same, seen_cross = await asyncio.wait_for(asyncio.gather(*arrivals), _TIMEOUT)
                if n >= warmup:
                    same.append((seen_same - started) * 1000)
                    cross.append((seen_cross - started) * 1000)
        finally:
            for watcher in watchers:
                watcher.stop()
        return same, cross


class _Watcher:
    """One watch stream; ``expect(revision)`` resolves to the time that revision arrived."""

    def __init__(self, stub: pb_grpc.TodoServiceStub, session_id: str) -> None:
        self._call = stub.WatchTodos(pb.WatchTodosRequest(session_id=session_id))
        self._expected: dict[int, asyncio.Future[float]] = {}
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        first = await asyncio.wait_for(self._call.read(), _TIMEOUT)
        assert first.kind == pb.CHANGE_KIND_SNAPSHOT
        self._reader = asyncio.create_task(self._read())

    def expect(self, revision: int) -> asyncio.Future[float]:
        arrival = asyncio.get_running_loop().create_future()
        self._expected[revision] = arrival
        return arrival

    async def _read(self) -> None:
        try:
            while (message := await self._call.read()) is not grpc.aio.EOF:
                if (arrival := self._expected.pop(message.revision, None)) is not None:
                    arrival.set_result(time.perf_counter())
            raise RuntimeError("the watch ended")
        except Exception as error:  # the waiting writer fails instead of timing out
            for arrival in self._expected.values():
                arrival.set_exception(error)
            raise

    def stop(self) -> None:
        self._call.cancel()
        if self._reader is not None:
            self._reader.cancel()


def _percentile(values: list[float], percent: int) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, len(ordered) * percent // 100)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _pinned(cpus: Collection[int] | None, argv: list[str]) -> list[str]:
    return argv if cpus is None else ["taskset", "-c", ",".join(map(str, sorted(cpus))), *argv]


@asynccontextmanager
async def _redis(directory: Path, appendfsync: str, cpus: Collection[int] | None) -> AsyncIterator[str]:
    binary = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if binary is None:
        raise RuntimeError("redis-server is not installed: apt-get install redis-server")
    port = _free_port()
    data = directory / "redis"
    data.mkdir(parents=True, exist_ok=True)
    argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", ""]
    argv += ["--appendonly", "yes", "--appendfsync", appendfsync, "--logfile", str(data / "redis.log")]
    process = await asyncio.create_subprocess_exec(*_pinned(cpus, argv), stdin=asyncio.subprocess.DEVNULL)
    try:
        await _until(lambda: _redis_answers(port), f"redis-server on port {port}")
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        await _terminate(process)


async def _redis_answers(port: int) -> bool:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return False
    try:
        writer.write(b"PING\r\n")
        return await reader.readline() == b"+PONG\r\n"
    finally:
        writer.close()


@asynccontextmanager
async def _replica(name: str, redis_url: str, directory: Path, cpus: Collection[int] | None) -> AsyncIterator[str]:
    port = _free_port()
    argv = [sys.executable, "-m", "sessiontodo_server", "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--store", redis_url, "--log-level", "WARNING", "--shutdown-grace", "1"]
    with (directory / f"{name}.log").open("wb") as log:
        process = await asyncio.create_subprocess_exec(
            *_pinned(cpus, argv), cwd=ROOT, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log
        )
    address = f"127.0.0.1:{port}"
    try:
        await _until(lambda: _serving(address), f"{name} at {address}")
        yield address
    finally:
        await _terminate(process)


async def _serving(address: str) -> bool:
    async with grpc.aio.insecure_channel(address) as channel:
        try:
            response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
        except grpc.aio.AioRpcError:
            return False
        return response.status == health_pb2.HealthCheckResponse.SERVING


async def _until(check: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not start within {timeout}s")
        await asyncio.sleep(0.05)


async def _terminate(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 15)
        except TimeoutError:
            process.kill()
            await process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--appendfsync", default="everysec", choices=["always", "everysec", "no"])
    args = parser.parse_args()
    os.chdir(ROOT)
    result = asyncio.run(measure_cross_replica_latency(args.samples, appendfsync=args.appendfsync))
    print(json.dumps(result, indent=2))
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(
        f"write-to-watcher p50: same replica {result['same_replica']['p50_ms']:.2f} ms, "
        f"cross replica {result['cross_replica']['p50_ms']:.2f} ms "
        f"(x{result['p50_ratio']:.2f}, {verdict} the x{TARGET_P50_RATIO:.0f} target)",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()

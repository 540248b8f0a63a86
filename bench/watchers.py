"""Watch streams held by separate client processes, so the measuring process stays light.

As a program (``python bench/watchers.py ...``) it opens ``--count`` WatchTodos streams,
waits for each first message, prints ``ready``, and then reads until its stdin closes. With
``--report`` it also prints ``<revision> <monotonic ns>`` once every stream of the process has
received that revision: CLOCK_MONOTONIC is system-wide, so the parent can compare the time
with the moment it started the write. With ``--etcd`` the streams are etcd Watch streams of the
key ``<prefix>``, one watcher each. ``WatcherProcess`` is the parent's handle on one.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections import Counter
from collections.abc import Iterator

import grpc

import etcd
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

STREAMS_PER_CHANNEL = 500
"""Streams share HTTP/2 connections the way many clients behind one host would."""
OPENING_BATCH = 100
"""Streams are opened this many at a time: thousands of calls started at once on a few
connections get some of them CANCELLED by gRPC (seen on both servers alike)."""


def session_ids(prefix: str, first: int, count: int, same_session: bool) -> Iterator[str]:
    for number in range(first, first + count):
        yield prefix if same_session else f"{prefix}{number:05d}"


class _Arrivals:
    """Counts, per revision, how many streams have it; reports when all of them do."""

    def __init__(self, streams: int, report: bool) -> None:
        self._streams = streams
        self._report = report
        self._seen: Counter[int] = Counter()

    def arrived(self, revision: int) -> None:
        if not self._report:
            return
        self._seen[revision] += 1
        if self._seen[revision] == self._streams:
            del self._seen[revision]
            sys.stdout.write(f"{revision} {time.monotonic_ns()}\n")
            sys.stdout.flush()


async def _watch(
    stub: pb_grpc.TodoServiceStub, session_id: str, ready: asyncio.Queue[None], arrivals: _Arrivals
) -> None:
    call = stub.WatchTodos(pb.WatchTodosRequest(session_id=session_id))
    try:
        await call.read()
        ready.put_nowait(None)
        while (message := await call.read()) is not grpc.aio.EOF:
            if message.kind != pb.CHANGE_KIND_PROGRESS:
                arrivals.arrived(message.revision)
    finally:
        call.cancel()


async def _watch_etcd(channel: grpc.aio.Channel, key: str, ready: asyncio.Queue[None], arrivals: _Arrivals) -> None:
    call = await etcd.open_watch(channel, key.encode())
    try:
        ready.put_nowait(None)
        while True:
            arrivals.arrived(await etcd.next_revision(call))
    finally:
        call.cancel()


async def _opened(ready: asyncio.Queue[None], count: int) -> None:
    for _ in range(count):
        await ready.get()


class _Stop(Exception):
    """The parent closed our stdin."""


async def hold(address: str, ids: list[str], report: bool, on_etcd: bool = False) -> None:
    # Each channel its own connection: channels to one address otherwise share one, and the server
    # lets a connection have at most --max-streams-per-connection (1000) calls at once.
    own_connection = [("grpc.use_local_subchannel_pool", 1)]
    channels = [
        grpc.aio.insecure_channel(address, options=own_connection) for _ in range(0, len(ids), STREAMS_PER_CHANNEL)
    ]
    arrivals = _Arrivals(len(ids), report)
    ready: asyncio.Queue[None] = asyncio.Queue()
    stdin_closed = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_reader(sys.stdin.fileno(), stdin_closed.set)
    try:
        async with asyncio.TaskGroup() as streams:
            for number, session_id in enumerate(ids):
                channel = channels[number // STREAMS_PER_CHANNEL]
                if on_etcd:
                    streams.create_task(_watch_etcd(channel, session_id, ready, arrivals))
                else:
                    streams.create_task(_watch(pb_grpc.TodoServiceStub(channel), session_id, ready, arrivals))
                if number % OPENING_BATCH == OPENING_BATCH - 1:
                    await _opened(ready, OPENING_BATCH)
            await _opened(ready, len(ids) % OPENING_BATCH)
            print("ready", flush=True)
            await stdin_closed.wait()
            raise _Stop
    except* _Stop:
        pass
    finally:
        loop.remove_reader(sys.stdin.fileno())
        for channel in channels:
            await channel.close()


class WatcherProcess:
    """The parent's handle on a watcher process: start, wait for ``ready``, read reports, stop."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(
        cls,
        address: str,
        prefix: str,
        count: int,
        *,
        cpus: set[int],
        first: int = 0,
        same_session: bool = False,
        report: bool = False,
        on_etcd: bool = False,
    ) -> WatcherProcess:
        argv = [sys.executable, __file__, address, prefix, "--first", str(first), "--count", str(count)]
        argv += ["--same-session"] * same_session + ["--report"] * report + ["--etcd"] * on_etcd
        process = await asyncio.create_subprocess_exec(
            "taskset", "-c", ",".join(map(str, sorted(cpus))), *argv,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        watcher = cls(process)
        line = await asyncio.wait_for(watcher._line(), timeout=120)
        if line != "ready":
            raise RuntimeError(f"watcher process failed to open its streams (said {line!r})")
        return watcher

    async def _line(self) -> str:
        assert self._process.stdout is not None
        return (await self._process.stdout.readline()).decode().strip()

    async def next_report(self) -> tuple[int, int]:
        """The next ``(revision, monotonic ns)`` at which all of this process's streams had a revision."""
        revision, nanoseconds = (await self._line()).split()
        return int(revision), int(nanoseconds)

    async def stop(self) -> None:
        assert self._process.stdin is not None
        self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 30)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description="Hold WatchTodos streams until stdin closes.")
    parser.add_argument("address")
    parser.add_argument("prefix", help="session id prefix: ids are <prefix><5-digit number>")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--same-session", action="store_true", help="every stream watches the session named <prefix>")
    parser.add_argument("--report", action="store_true", help="print '<revision> <ns>' when all streams have it")
    parser.add_argument("--etcd", action="store_true", help="etcd Watch streams of the key <prefix> instead")
    arguments = parser.parse_args()
    ids = list(session_ids(arguments.prefix, arguments.first, arguments.count, arguments.same_session))
    asyncio.run(hold(arguments.address, ids, arguments.report, arguments.etcd))


if __name__ == "__main__":
    main()

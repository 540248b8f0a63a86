"""Another client's latency while tests/support/h2_peer.py floods the server: its median read
quiet, then during the flood, measured in one run (the ratio is what compares across machines).

The flooder runs as a process of its own and says when it is connected; reads are measured only
from then on, for a fixed time, on a connection of their own."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from tests.support import ROOT

SESSION = "s"
"""The session the flooder's streams and the measured reads name (the test creates it)."""


@dataclass(frozen=True)
class Reads:
    median_ms: float
    count: int
    failed: int
    codes: tuple[str, ...] = ()
    """The status codes of the failed reads."""


@dataclass(frozen=True)
class FloodFigures:
    """What a flood did to another client, and what it cost the processes watched (CPU-seconds)."""

    quiet: Reads
    during: Reads
    flooder: dict[str, Any]
    cpu_seconds: dict[str, float]

    @property
    def ratio(self) -> float:
        return self.during.median_ms / self.quiet.median_ms

    def __str__(self) -> str:
        cpu = ", ".join(f"{name} {seconds:.2f} CPU-s" for name, seconds in self.cpu_seconds.items())
        return (
            f"median read {self.quiet.median_ms:.2f} ms quiet ({self.quiet.count} reads), "
            f"{self.during.median_ms:.2f} ms during the flood ({self.during.count} reads, "
            f"{self.during.failed} failed {list(self.during.codes)}): x{self.ratio:.1f}; {cpu}; flooder {self.flooder}"
        )


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _reads(stub: pb_grpc.TodoServiceStub, seconds: float) -> Reads:
    took: list[float] = []
    codes: list[str] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            await stub.GetTodos(pb.GetTodosRequest(session_id=SESSION), timeout=10)
        except grpc.aio.AioRpcError as error:
            codes.append(error.code().name)
        took.append(time.perf_counter() - started)
    return Reads(statistics.median(took) * 1000, len(took), len(codes), tuple(codes))


async def reads_during_flood(
    address: str, flood_port: int, *flood_flags: str, seconds: float = 3.0, watched: dict[str, int] | None = None
) -> FloodFigures:
    """Reads of ``SESSION`` at ``address`` for ``seconds`` quiet, then for ``seconds`` while the
    flooder resets streams on ``flood_port`` (with ``flood_flags``), and the CPU the ``watched``
    processes (name: pid) spent meanwhile."""
    watched = watched or {}
    script = ROOT / "tests" / "support" / "h2_peer.py"
    async with grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        quiet = await _reads(stub, seconds)
        flooder = await asyncio.create_subprocess_exec(
            sys.executable, str(script), str(flood_port), str(seconds + 1.5), "10000000", *flood_flags,
            stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            assert flooder.stdout is not None
            assert await asyncio.wait_for(flooder.stdout.readline(), 30) == b"flooding\n"
            await asyncio.sleep(0.5)  # the flood under way (it lasts 1.5 s longer than the reads)
            before = {name: cpu_seconds(pid) for name, pid in watched.items()}
            during = await _reads(stub, seconds)
            spent = {name: cpu_seconds(pid) - before[name] for name, pid in watched.items()}
            seen = json.loads((await asyncio.wait_for(flooder.communicate(), 30))[0])
        finally:
            if flooder.returncode is None:
                flooder.kill()
                await flooder.wait()
    return FloodFigures(quiet, during, seen, spent)

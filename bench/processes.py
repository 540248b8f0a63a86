"""The processes of a run: servers pinned to one CPU, everything that drives them on the others.

Servers are measured from the outside only: their address, their RSS (``VmRSS`` in
``/proc/<pid>/status``) and their CPU time (to tell when they have gone quiet).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import grpc

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Build:
    """Another commit of sessiontodo, built on its own: its source tree and its virtualenv's python."""

    source: Path
    python: Path


@dataclass(frozen=True)
class CpuPlan:
    """Which CPUs run the server under test, and which run load generators and clients."""

    server: set[int]
    load: set[int]

    @classmethod
    def of_this_machine(cls) -> CpuPlan:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            return cls(set(cpus), set(cpus))
        return cls({cpus[0]}, set(cpus[1:]))


_handed_out: set[int] = set()
"""Ports this run has chosen: servers are made (ports chosen) before they start, so the kernel may
offer a chosen but not yet bound port again; two servers told one port measure each other."""


def free_port() -> int:
    """A port free now and not chosen before in this run."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port


def pinned(cpus: set[int], argv: list[str]) -> list[str]:
    return ["taskset", "-c", ",".join(map(str, sorted(cpus))), *argv]


class ServerProcess:
    """A server under test (sessiontodo or the echo baseline) in its own pinned process."""

    def __init__(self, name: str, argv: list[str], port: int, log_dir: Path, cwd: Path = ROOT) -> None:
        self.name = name
        self.port = port
        self.address = f"127.0.0.1:{port}"
        self._argv = argv
        self._cwd = cwd
        self._log = log_dir / f"{name}.log"
        self._process: asyncio.subprocess.Process | None = None

    @classmethod
    def sessiontodo(
        cls, name: str, store: str, cpus: set[int], log_dir: Path, *flags: str, build: Build | None = None
    ) -> ServerProcess:
        """This checkout's server, or another ``build`` of it (``bench/compare.py``)."""
        python, cwd = (sys.executable, ROOT) if build is None else (str(build.python), build.source)
        port = free_port()
        argv = [python, "-m", "sessiontodo_server", "--host", "127.0.0.1", "--port", str(port)]
        argv += ["--store", store, "--log-level", "WARNING", *flags]
        return cls(name, pinned(cpus, argv), port, log_dir, cwd)

    @classmethod
    def echo(cls, name: str, cpus: set[int], log_dir: Path, *flags: str) -> ServerProcess:
        port = free_port()
        argv = [sys.executable, str(BENCH / "echo_server.py"), "--port", str(port), *flags]
        return cls(name, pinned(cpus, argv), port, log_dir)

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def start(self) -> ServerProcess:
        with self._log.open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(
                *self._argv, cwd=self._cwd, stdout=log, stderr=asyncio.subprocess.STDOUT
            )
        await self._wait_until_answering()
        return self

    async def _wait_until_answering(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            while True:
                try:
                    await stub.GetTodos(pb.GetTodosRequest(session_id="sessiontodo:global"), timeout=1)
                    return
                except grpc.aio.AioRpcError as error:
                    if error.code() is grpc.StatusCode.UNIMPLEMENTED:  # another gRPC server (etcd) holds the port
                        raise RuntimeError(f"{self.address} answers, not as {self.name}: {error.details()}") from None
                    if error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        return  # answering (0.1 had no such session)
                    if not self.running or time.monotonic() > deadline:
                        raise RuntimeError(f"{self.name} did not start:\n{self.log_text()}") from None
                    await asyncio.sleep(0.05)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    def log_text(self) -> str:
        return self._log.read_text()

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no VmRSS for {self.name}")

    def cpu_seconds(self) -> float:
        # Fields after the command name (which may hold spaces): utime and stime are 14th and 15th.
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS

    async def wait_until_quiet(self, window: float = 0.3, busy_fraction: float = 0.05, timeout: float = 120.0) -> None:
        """Wait until the server uses under ``busy_fraction`` of a CPU over ``window`` seconds:
        streams opened by a load generator are then set up and their first messages sent."""
        deadline = time.monotonic() + timeout
        before = self.cpu_seconds()
        while time.monotonic() < deadline:
            await asyncio.sleep(window)
            after = self.cpu_seconds()
            if after - before < window * busy_fraction:
                return
            before = after
        raise RuntimeError(f"{self.name} stayed busy for {timeout} s")

    async def stop(self) -> None:
        if self._process is None or self._process.returncode is not None:
            return
        self._process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self._process.wait(), 15)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()

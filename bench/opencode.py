"""Figure 7: the OpenCode sidecar's HTTP latency (bench/run.py calls ``measure_opencode``).

- ``GET /session/{id}/todo`` on one kept-alive connection, against the same request on a fresh
  connection each time (the baseline): a reused connection must be no slower.
- Time to the first byte of ``GET /event`` with many sessions in the service, against the same
  with one session: no replay on connect, so it must not grow with the session count.

The sessiontodo server and the sidecar run in their own processes on the server CPU; this
process (the client) runs on the others.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import grpc
import httpx

from processes import ROOT, ServerProcess, free_port, pinned
from report import Row, median
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

CREATE_CONCURRENCY = 50


class SidecarProcess:
    """``python -m sessiontodo_opencode`` for one sessiontodo server, pinned like the servers."""

    def __init__(self, sessiontodo: ServerProcess, cpus: set[int], log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        flags = ["--sessiontodo-address", sessiontodo.address, "--port", str(self.port), "--log-level", "WARNING"]
        self._argv = pinned(cpus, [sys.executable, "-m", "sessiontodo_opencode", *flags])
        self._log = log_dir / "opencode-sidecar.log"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self._log.open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(*self._argv, cwd=ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + 120  # it first loads the feed's snapshot of every session
        async with httpx.AsyncClient(base_url=self.url) as http:
            while True:
                try:
                    await http.get("/session")
                    return
                except httpx.TransportError:
                    if time.monotonic() > deadline or self._process.returncode is not None:
                        raise RuntimeError(f"the sidecar did not start:\n{self._log.read_text()}") from None
                    await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()


async def _create_sessions(address: str, count: int) -> None:
    """``count`` sessions with a three-todo list each, written concurrently over gRPC."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        todos = [pb.Todo(content=f"todo {n}") for n in range(3)]
        queue = iter(range(count))

        async def worker() -> None:
            for n in queue:
                session_id = f"ses_bench{n:06d}"
                await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id))
                await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=todos))

        await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


async def _request_latencies(url: str, samples: int, *, reuse: bool) -> list[float]:
    """Milliseconds per ``GET /session/ses_bench000000/todo``, kept-alive or on fresh connections."""
    limits = httpx.Limits(max_keepalive_connections=1 if reuse else 0)
    async with httpx.AsyncClient(base_url=url, limits=limits) as http:
        await http.get("/session/ses_bench000000/todo")
        latencies = []
        for _ in range(samples):
            started = time.perf_counter()
            response = await http.get("/session/ses_bench000000/todo")
            latencies.append((time.perf_counter() - started) * 1000)
            assert response.status_code == 200, response.text
    return latencies


async def _first_byte_ms(url: str, samples: int) -> float:
    """Median milliseconds from sending ``GET /event`` to its first frame."""
    times = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for _ in range(samples):
            started = time.perf_counter()
            async with http.stream("GET", "/event") as response:
                await anext(response.aiter_raw())
                times.append((time.perf_counter() - started) * 1000)
    return median(times)


async def _measure_one(sessions: int, samples: int, cpus: set[int], scratch: Path) -> dict[str, float]:
    server = ServerProcess.sessiontodo(f"opencode-{sessions}", "memory://", cpus, scratch)
    await server.start()
    sidecar = SidecarProcess(server, cpus, scratch)
    try:
        await _create_sessions(server.address, sessions)
        await sidecar.start()
        reused = await _request_latencies(sidecar.url, samples, reuse=True)
        fresh = await _request_latencies(sidecar.url, samples, reuse=False)
        return {
            "reused_ms": median(reused),
            "fresh_ms": median(fresh),
            "first_byte_ms": await _first_byte_ms(sidecar.url, max(5, samples // 10)),
        }
    finally:
        await sidecar.stop()
        await server.stop()


async def measure_opencode(sessions: int, samples: int, cpus: set[int], scratch: Path) -> dict[str, dict[str, float]]:
    """The figures with one session and with ``sessions`` sessions."""
    return {
        "one": await _measure_one(1, samples, cpus, scratch),
        "many": await _measure_one(sessions, samples, cpus, scratch),
        "sessions": {"count": float(sessions)},
    }


def opencode_rows(result: dict[str, dict[str, float]]) -> list[Row]:
    many, one, count = result["many"], result["one"], int(result["sessions"]["count"])
    return [
        Row(
            "7. opencode sidecar",
            f"GET /session/{{id}}/todo p50, one kept-alive connection ({count:,} sessions)",
            many["reused_ms"],
            "ms",
            baseline=many["fresh_ms"],
            baseline_name="a fresh connection per request",
            target=("<=", 1.0),
        ),
        Row(
            "7. opencode sidecar",
            f"GET /event time to first byte, {count:,} sessions",
            many["first_byte_ms"],
            "ms",
            baseline=one["first_byte_ms"],
            baseline_name="with 1 session",
            target=("<=", 2.0),
        ),
    ]

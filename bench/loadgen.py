"""Unary load from ``h2load`` (C, nghttp2): gRPC over h2c with one pre-encoded request body.

A Python client tops out near the server's own rate, so it would measure itself; h2load
does not. h2load counts every HTTP 200 as a success, and gRPC reports errors in trailers
with status 200, so every run is checked: the same body is first sent through a real gRPC
call (which raises on a non-OK status), and write runs are checked against the revision
the server reports afterwards.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.message import Message

SERVICE_PATH = "/sessiontodo.v1.TodoService"
_FINISHED = re.compile(r"finished in ([\d.]+)(s|ms|us),")
_REQUESTS = re.compile(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored")
_DATA = re.compile(r"traffic: .*, ([\d.]+\w*) \((\d+)\) data")
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def grpc_body(message: Message) -> bytes:
    """The HTTP/2 DATA of a gRPC request: uncompressed flag, 4-byte big-endian length, message."""
    encoded = message.SerializeToString()
    return b"\0" + struct.pack(">I", len(encoded)) + encoded


@dataclass(frozen=True)
class LoadResult:
    succeeded: int
    seconds: float
    data_bytes: int

    @property
    def rate(self) -> float:
        return self.succeeded / self.seconds


def require_h2load() -> str:
    path = shutil.which("h2load")
    if path is None:
        raise SystemExit("h2load not found: apt-get install nghttp2-client (make bench does this)")
    return path


def parse_h2load(output: str) -> LoadResult:
    finished = _FINISHED.search(output)
    requests = _REQUESTS.search(output)
    data = _DATA.search(output)
    if not (finished and requests and data):
        raise RuntimeError(f"cannot parse h2load output:\n{output}")
    succeeded, failed, errored = (int(group) for group in requests.groups())
    if failed or errored:
        raise RuntimeError(f"h2load: {failed} failed, {errored} errored requests:\n{output}")
    seconds = float(finished.group(1)) * _UNIT_SECONDS[finished.group(2)]
    return LoadResult(succeeded, seconds, int(data.group(2)))


class H2Load:
    """One h2load run in its own process, pinned to the load-generator CPUs."""

    def __init__(self, process: asyncio.subprocess.Process, body_file: Path) -> None:
        self._process = process
        self._body_file = body_file

    @classmethod
    async def start(
        cls,
        address: str,
        method: str,
        body: bytes,
        *,
        cpus: set[int],
        duration: float | None = None,
        requests: int | None = None,
        clients: int = 4,
        streams: int = 16,
        rps: int | None = None,
        service: str = SERVICE_PATH,
    ) -> H2Load:
        """Send ``body`` to ``service``/``method`` for ``duration`` seconds, or ``requests`` times,
        at most ``rps`` requests a second per client."""
        with tempfile.NamedTemporaryFile(prefix="h2load-", suffix=".bin", delete=False) as file:
            file.write(body)
        argv = [require_h2load(), "-c", str(clients), "-m", str(streams), "-d", file.name]
        argv += ["-H", "content-type: application/grpc", "-H", "te: trailers"]
        argv += ["-D", f"{round(duration * 1000)}ms"] if duration is not None else ["-n", str(requests)]
        argv += [f"--rps={rps}"] if rps is not None else []
        argv.append(f"http://{address}{service}/{method}")
        pinned = ["taskset", "-c", ",".join(map(str, sorted(cpus)))]
        process = await asyncio.create_subprocess_exec(
            *pinned, *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        return cls(process, Path(file.name))

    async def stop(self) -> None:
        """End a run early (background load), without a result."""
        if self._process.returncode is None:
            self._process.terminate()
        await self._process.communicate()
        self._body_file.unlink(missing_ok=True)

    async def result(self) -> LoadResult:
        """Wait for the run to end and parse its report."""
        output, _ = await self._process.communicate()
        self._body_file.unlink(missing_ok=True)
        if self._process.returncode != 0:
            raise RuntimeError(f"h2load exited with {self._process.returncode}:\n{output.decode()}")
        return parse_h2load(output.decode())


async def h2load(address: str, method: str, body: bytes, **options: Any) -> LoadResult:
    """Run h2load to completion (options as for ``H2Load.start``)."""
    return await (await H2Load.start(address, method, body, **options)).result()


async def call_raw(channel: grpc.aio.Channel, method: str, body: bytes) -> bytes:
    """Send exactly the bytes h2load will send, as a real gRPC call: raises unless the status is OK."""
    call = channel.unary_unary(f"{SERVICE_PATH}/{method}")
    return await call(body[5:], timeout=10)

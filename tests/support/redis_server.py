"""A real ``redis-server`` for tests: a free loopback port, a temp directory, every write fsynced.

``appendonly yes`` with ``appendfsync always`` makes every acknowledged write durable, so a
test can kill Redis (even with SIGKILL) and restart it on the same port and directory and
expect every acknowledged write to be there.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from tests.support import free_port


def redis_server_binary() -> str:
    """``redis-server`` from PATH (``.ci/run`` installs Debian's package when it is missing)."""
    binary = shutil.which("redis-server") or shutil.which("redis-server", path="/usr/sbin:/usr/bin")
    if binary is None:
        raise RuntimeError("redis-server is not installed: apt-get install redis-server (see .ci/run)")
    return binary


class RedisServer:
    """One ``redis-server`` process; ``stop``/``kill`` and ``start`` again keep port and data."""

    def __init__(self, directory: Path, *, cluster_node: bool = False, replica_of: RedisServer | None = None) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._directory = directory
        self._cluster_node = cluster_node
        self._replica_of = replica_of
        self._process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    def start(self) -> RedisServer:
        argv = [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self._directory)]
        argv += ["--appendonly", "yes", "--appendfsync", "always", "--save", "", "--daemonize", "no"]
        argv += ["--logfile", str(self._directory / "redis.log")]
        if self._cluster_node:
            argv += ["--cluster-enabled", "yes", "--cluster-config-file", str(self._directory / "nodes.conf")]
            argv += ["--cluster-port", str(free_port())]  # the default (port + 10000) may be taken or past 65535
        if self._replica_of is not None:
            argv += ["--replicaof", "127.0.0.1", str(self._replica_of.port)]
        self._process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        self._wait_until_ready()
        if self._cluster_node:
            self._own_every_slot()
        if self._replica_of is not None:
            self._wait_until_replicating()
        return self

    def _wait_until_replicating(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self._client() as client:
            while client.info("replication").get("master_link_status") != "up":
                assert time.monotonic() < deadline, "the replica never caught up with its primary"
                time.sleep(0.02)

    def cut_off(self) -> None:
        """A replica losing its link to its primary (a network partition): it keeps its data and
        receives no more writes (its primary becomes an address where nothing listens)."""
        with self._client() as client:
            client.execute_command("REPLICAOF", "127.0.0.1", free_port())

    def promote(self) -> None:
        """``REPLICAOF NO ONE``: what an operator or Sentinel does to a replica when its primary died."""
        with self._client() as client:
            client.execute_command("REPLICAOF", "NO", "ONE")

    def _client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=1, socket_connect_timeout=1)

    def _wait_until_ready(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        with self._client() as client:
            while True:
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    if time.monotonic() > deadline:
                        raise
                assert self._process is not None, "redis-server was never started"
                assert self._process.poll() is None, "redis-server exited"
                time.sleep(0.02)

    def _own_every_slot(self, timeout: float = 15.0) -> None:
        """A one-node cluster: cross-slot scripts and transactions fail exactly as on a real cluster."""
        deadline = time.monotonic() + timeout
        with self._client() as client:
            if b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            while b"cluster_state:ok" not in client.execute_command("CLUSTER", "INFO"):
                assert time.monotonic() < deadline, "the one-node cluster never became ready"
                time.sleep(0.02)

    def stop(self) -> None:
        """SIGTERM: Redis shuts down cleanly."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL: what a crash looks like; only fsynced writes survive."""
        self._end(signal.SIGKILL)

    def _end(self, signum: int) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signum)
            self._process.wait(15)
        self._process = None

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()

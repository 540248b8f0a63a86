"""etcd 3.4 (Debian ``etcd-server``) as a competitor and as the etcd store's cluster: its server
processes, and the few calls of its gRPC API the bench makes, through the code generated from
etcd's own protos (``protos/sessiontodo_etcd``, as the etcd store uses them). The service paths
are etcd's own, so h2load and ``grpc.aio`` talk to the real server.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import grpc

from processes import ServerProcess, free_port, pinned
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc
from sessiontodo_etcd.etcdserverpb.rpc_pb2 import PutRequest, RangeRequest, WatchCreateRequest, WatchRequest

__all__ = ["PutRequest", "RangeRequest"]


def etcd_binary() -> str | None:
    return shutil.which("etcd") or shutil.which("etcd", path="/usr/sbin:/usr/bin")


def put(channel: grpc.aio.Channel) -> Any:
    return rpc_pb2_grpc.KVStub(channel).Put


def range_(channel: grpc.aio.Channel) -> Any:
    return rpc_pb2_grpc.KVStub(channel).Range


async def open_watch(channel: grpc.aio.Channel, key: bytes) -> grpc.aio.StreamStreamCall:
    """One Watch stream with one watcher of ``key``, created (etcd confirms before any event)."""
    call = rpc_pb2_grpc.WatchStub(channel).Watch()
    await call.write(WatchRequest(create_request=WatchCreateRequest(key=key)))
    created = await asyncio.wait_for(call.read(), 30)
    if created is grpc.aio.EOF or not created.created:
        raise RuntimeError(f"etcd did not create the watch: {created}")
    return call


async def next_revision(call: grpc.aio.StreamStreamCall) -> int:
    """The mod revision of the next event on a watch stream."""
    while True:
        response = await asyncio.wait_for(call.read(), 30)
        if response is grpc.aio.EOF or response.canceled:
            raise RuntimeError("the etcd watch ended")
        if response.events:
            return int(response.events[-1].kv.mod_revision)


class EtcdProcess(ServerProcess):
    """An etcd member with its data in the run's scratch folder: it fsyncs its WAL before
    acknowledging a write, batching the writes that arrive meanwhile, as a real deployment does."""

    @classmethod
    def etcd(cls, name: str, cpus: set[int], scratch: Path) -> EtcdProcess:
        """A single-member cluster."""
        (member,) = cls.cluster(name, 1, cpus, scratch)
        return member

    @classmethod
    def cluster(cls, name: str, size: int, cpus: set[int], scratch: Path) -> list[EtcdProcess]:
        """``size`` members of one cluster (start them at once: each answers once a majority runs)."""
        binary = etcd_binary()
        if binary is None:
            raise RuntimeError("etcd not found: apt-get install etcd-server (make bench does this)")
        scratch.mkdir(parents=True, exist_ok=True)
        names = [name] if size == 1 else [f"{name}-{n}" for n in range(size)]
        ports = {member: (free_port(), free_port()) for member in names}
        initial = ",".join(f"{member}=http://127.0.0.1:{peer}" for member, (_, peer) in ports.items())
        members = []
        for member, (port, peer) in ports.items():
            argv = [
                binary, "--name", member, "--data-dir", str(scratch / f"{member}.etcd"),
                "--listen-client-urls", f"http://127.0.0.1:{port}",
                "--advertise-client-urls", f"http://127.0.0.1:{port}",
                "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
                "--initial-cluster", initial,
                "--logger", "zap", "--log-level", "warn", "--quota-backend-bytes", str(8 << 30),
            ]  # fmt: skip
            members.append(cls(member, pinned(cpus, argv), port, scratch))
        return members

    async def _wait_until_answering(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        async with grpc.aio.insecure_channel(self.address) as channel:
            ranged = range_(channel)
            while True:
                try:
                    await ranged(RangeRequest(key=b"ready"), timeout=1)
                    return
                except grpc.aio.AioRpcError:
                    if not self.running or time.monotonic() > deadline:
                        raise RuntimeError(f"{self.name} did not start:\n{self.log_text()}") from None
                    await asyncio.sleep(0.1)

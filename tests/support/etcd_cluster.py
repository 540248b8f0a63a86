"""A real etcd cluster for tests: Debian's ``etcd`` (3.4) members on free loopback ports.

Each member's data lives in a folder of the test's own, on tmpfs when the machine has one
(``/dev/shm``): etcd fsyncs its log before acknowledging a write, which tmpfs makes cheap, and a
member killed with SIGKILL still loses exactly what a crash of the process loses (the page
cache survives a process, not a machine). Members can be killed, stopped cleanly, frozen with
SIGSTOP and thawed, and started again on the same ports and data.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import grpc

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
from tests.support import free_port
from tests.support.certificates import CertificateAuthority, Issued

T = TypeVar("T")
_ANY_KEY = pb.RangeRequest(key=b"-")


def etcd_binary() -> str:
    """``etcd`` from PATH (Debian's ``etcd-server``; ``make test`` installs it)."""
    binary = shutil.which("etcd") or shutil.which("etcd", path="/usr/sbin:/usr/bin")
    if binary is None:
        raise RuntimeError("etcd is not installed: apt-get install etcd-server (see debian-packages.txt)")
    return binary


class EtcdMember:
    """One member: ``start`` again after ``kill``/``stop`` keeps its name, ports and data."""

    def __init__(self, name: str, data: Path, scheme: str) -> None:
        self.name = name
        self.port = free_port()
        self.peer_port = free_port()
        self.endpoint = f"127.0.0.1:{self.port}"
        self.data = data
        self.scheme = scheme
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def peer_url(self) -> str:
        return f"http://127.0.0.1:{self.peer_port}"

    def start(self, initial_cluster: str, flags: list[str]) -> None:
        client_url = f"{self.scheme}://{self.endpoint}"
        argv = [
            etcd_binary(), "--name", self.name, "--data-dir", str(self.data / self.name),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", self.peer_url, "--initial-advertise-peer-urls", self.peer_url,
            "--initial-cluster", initial_cluster, "--initial-cluster-token", "sessiontodo-tests",
            "--logger", "zap", "--log-level", "warn", "--log-outputs", "stderr",
            *flags,
        ]  # fmt: skip
        with (self.data / f"{self.name}.log").open("ab") as log:  # etcd's and its gRPC library's lines
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL: a crash."""
        self._end(signal.SIGKILL)

    def stop(self) -> None:
        """SIGTERM: etcd shuts down cleanly."""
        self._end(signal.SIGTERM)

    def freeze(self) -> None:
        """SIGSTOP: the member is there (its sockets accept) but answers nothing."""
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)

    def _end(self, signum: int) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signum)
            self.process.wait(30)
        self.process = None

    def log_text(self) -> str:
        log = self.data / f"{self.name}.log"
        return log.read_text()[-4000:] if log.exists() else ""


class EtcdCluster:
    """``size`` members forming one cluster; with ``ca`` they serve TLS and require client certificates;
    ``flags`` go to every member (``--max-txn-ops 5120``)."""

    def __init__(self, size: int = 1, ca: CertificateAuthority | None = None, flags: Sequence[str] = ()) -> None:
        shm = Path("/dev/shm")
        self._data = Path(tempfile.mkdtemp(prefix="sessiontodo-etcd-", dir=shm if shm.is_dir() else None))
        self._ca = ca
        self.members = [EtcdMember(f"m{n}", self._data, "https" if ca else "http") for n in range(size)]
        self._flags = list(flags)
        self._tls: list[str] = []
        self.client: Issued | None = None
        """The certificate the store presents (with ``ca``)."""
        if ca is not None:
            issued = ca.issue("127.0.0.1", server=True)
            self._tls = ["--cert-file", str(issued.cert), "--key-file", str(issued.key)]
            self._tls += ["--trusted-ca-file", str(ca.cert), "--client-cert-auth"]
            self.client = ca.issue("sessiontodo", server=False)

    @property
    def endpoints(self) -> str:
        return ",".join(member.endpoint for member in self.members)

    def url(self, prefix: str = "sessiontodo") -> str:
        if self._ca is None or self.client is None:
            return f"etcd://{self.endpoints}/{prefix}"
        return f"etcds://{self.endpoints}/{prefix}?ca={self._ca.cert}&cert={self.client.cert}&key={self.client.key}"

    def start(self) -> EtcdCluster:
        """Start every member that is not running (the cluster, or members that were killed)."""
        initial = ",".join(f"{member.name}={member.peer_url}" for member in self.members)
        for member in self.members:
            if not member.running:
                member.start(initial, self._tls + self._flags)
        self.wait_until_serving()
        return self

    def channel(self, member: EtcdMember) -> grpc.Channel:
        if self._ca is None or self.client is None:
            return grpc.insecure_channel(member.endpoint)
        credentials = grpc.ssl_channel_credentials(self._ca.cert_pem, self.client.key_pem, self.client.cert_pem)
        return grpc.secure_channel(member.endpoint, credentials)

    def call(self, member: EtcdMember, call: Callable[[grpc.Channel], T]) -> T:
        with self.channel(member) as channel:
            return call(channel)

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        """Until every running member answers a linearizable read (so the cluster has a leader)."""
        deadline = time.monotonic() + timeout
        for member in self.members:
            while member.running:
                try:
                    self.call(
                        member, lambda channel: pb_grpc.KVStub(channel).Range(pb.RangeRequest(key=b"-"), timeout=1)
                    )
                    break
                except grpc.RpcError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"etcd member {member.name} did not serve:\n{member.log_text()}") from None
                    time.sleep(0.05)

    def leader(self, timeout: float = 30.0) -> EtcdMember:
        """The member that leads now (waiting for an election to end)."""
        deadline = time.monotonic() + timeout
        while True:
            for member in self.members:
                if not member.running:
                    continue
                try:
                    status = self.call(
                        member,
                        lambda channel: pb_grpc.MaintenanceStub(channel).Status(pb.StatusRequest(), timeout=1),
                    )
                except grpc.RpcError:
                    continue
                if status.leader and status.leader == status.header.member_id:
                    return member
            if time.monotonic() > deadline:
                raise RuntimeError("the etcd cluster has no leader")
            time.sleep(0.05)

    def followers(self) -> list[EtcdMember]:
        leader = self.leader()
        return [member for member in self.members if member is not leader]

    def compact(self) -> int:
        """Compact the history up to the current revision; returns that revision."""
        member = next(member for member in self.members if member.running)
        kv = pb_grpc.KVStub
        revision = self.call(member, lambda channel: kv(channel).Range(pb.RangeRequest(key=b"-"))).header.revision
        self.call(member, lambda channel: kv(channel).Compact(pb.CompactionRequest(revision=revision, physical=True)))
        return int(revision)

    def enable_auth(self, password: str) -> None:
        """etcd's authentication, with a root user: every call then needs a token."""
        member = self.members[0]

        def enable(channel: grpc.Channel) -> None:
            auth = pb_grpc.AuthStub(channel)
            auth.UserAdd(pb.AuthUserAddRequest(name="root", password=password))
            auth.UserGrantRole(pb.AuthUserGrantRoleRequest(user="root", role="root"))
            auth.AuthEnable(pb.AuthEnableRequest())

        self.call(member, enable)

    def stop(self) -> None:
        """Every member, cleanly."""
        for member in self.members:
            member.stop()

    def close(self) -> None:
        for member in self.members:
            member.kill()
        shutil.rmtree(self._data, ignore_errors=True)

    def __enter__(self) -> EtcdCluster:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

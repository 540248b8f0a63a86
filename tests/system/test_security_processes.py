"""A secured server process as users run it: real grpcurl over TLS with a bearer token (the commands
of docs/security.md), mutual TLS, SIGHUP reloading the certificate, and Node grpc-js over TLS."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support import GOOGLEAPIS_PROTO_DIR, GRPCURL, NODE_SUITES, ROOT, ServerProcess, run_node_suite
from tests.support.certificates import CertificateAuthority, Issued, auth_toml

pytestmark = [pytest.mark.peer, pytest.mark.process]

SERVICE = "sessiontodo.v1.TodoService"
WRITER, READER = "writer-token-0123456789", "reader-token-0123456789"
EXIT_UNAUTHENTICATED, EXIT_PERMISSION_DENIED = 64 + 16, 64 + 7


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(auth_toml((WRITER, "acme", "writer"), (READER, "acme", "reader")))
    return path


def start_process(ca: CertificateAuthority, *args: str, client: Issued | None = None) -> ServerProcess:
    """A server process with ``args``, started by ``with`` once its health check answers over TLS (as
    ``client`` for mutual TLS)."""
    credentials = grpc.ssl_channel_credentials(
        ca.cert_pem, client.key_pem if client else None, client.cert_pem if client else None
    )
    return ServerProcess("--store", "memory://", *args, credentials=credentials)


@pytest.fixture
def secured(ca: CertificateAuthority, server_cert: Issued, auth_file: Path) -> Iterator[ServerProcess]:
    """A server process with TLS and bearer tokens."""
    args = ("--tls-cert", str(server_cert.cert), "--tls-key", str(server_cert.key), "--auth-file", str(auth_file))
    with start_process(ca, *args) as server:
        yield server
        server.stop()


def grpcurl(*args: str, request: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    data = ["-d", json.dumps(request)] if request is not None else []
    return subprocess.run([str(GRPCURL), *data, *args], capture_output=True, text=True, timeout=30, cwd=ROOT)


def test_grpcurl_over_tls_with_a_writer_token_writes_and_a_reader_token_reads(
    secured: ServerProcess, ca: CertificateAuthority
) -> None:
    def as_(token: str) -> list[str]:
        return ["-cacert", str(ca.cert), "-H", f"authorization: Bearer {token}"]

    created = grpcurl(*as_(WRITER), secured.address, f"{SERVICE}/CreateSession", request={"session_id": "demo"})
    assert created.returncode == 0, created.stderr
    replaced = grpcurl(
        *as_(WRITER),
        secured.address,
        f"{SERVICE}/ReplaceTodos",
        request={"session_id": "demo", "todos": [{"content": "Rotate the keys"}]},
    )
    assert replaced.returncode == 0, replaced.stderr

    read = grpcurl(*as_(READER), secured.address, f"{SERVICE}/GetTodos", request={"session_id": "demo"})
    assert read.returncode == 0, read.stderr
    assert [todo["content"] for todo in json.loads(read.stdout)["todos"]] == ["Rotate the keys"]
    denied = grpcurl(*as_(READER), secured.address, f"{SERVICE}/RemoveSession", request={"session_id": "demo"})
    assert denied.returncode == EXIT_PERMISSION_DENIED, denied.stderr


def test_grpcurl_reflection_needs_a_token_when_auth_is_on(secured: ServerProcess, ca: CertificateAuthority) -> None:
    anonymous = grpcurl("-cacert", str(ca.cert), secured.address, "list")
    assert anonymous.returncode != 0, anonymous.stderr
    assert "Unauthenticated" in anonymous.stderr, anonymous.stderr

    listed = grpcurl("-cacert", str(ca.cert), "-H", f"authorization: Bearer {READER}", secured.address, "list")
    assert listed.returncode == 0, listed.stderr
    assert SERVICE in listed.stdout.split()


def test_grpcurl_without_the_ca_or_without_tls_gets_nowhere(secured: ServerProcess) -> None:
    for flags in (["-plaintext"], []):
        result = grpcurl(*flags, "-H", f"authorization: Bearer {READER}", secured.address, "list")
        assert result.returncode != 0, result.stdout


def test_grpcurl_with_a_client_certificate_passes_mutual_tls(
    tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    client_ca = CertificateAuthority(tmp_path, "client CA")
    agent = client_ca.issue("agent-1", server=False)
    args = (
        "--tls-cert",
        str(server_cert.cert),
        "--tls-key",
        str(server_cert.key),
        "--tls-client-ca",
        str(client_ca.cert),
    )
    with start_process(ca, *args, client=agent) as server:
        with_cert = grpcurl(
            "-cacert", str(ca.cert), "-cert", str(agent.cert), "-key", str(agent.key), server.address, "list"
        )
        assert with_cert.returncode == 0, with_cert.stderr
        without = grpcurl("-cacert", str(ca.cert), server.address, "list")
        assert without.returncode != 0, without.stdout
        server.stop()


def test_sighup_makes_the_process_serve_a_rotated_certificate(
    tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    with start_process(ca, "--tls-cert", str(server_cert.cert), "--tls-key", str(server_cert.key)) as server:
        rotated_ca = CertificateAuthority(tmp_path, "rotated CA")
        server_cert.take_over(rotated_ca.issue("127.0.0.1 rotated", server=True))
        assert server.process is not None
        server.process.send_signal(signal.SIGHUP)

        deadline = time.monotonic() + 15
        while grpcurl("-cacert", str(rotated_ca.cert), server.address, "list").returncode != 0:
            assert time.monotonic() < deadline, "the rotated certificate was never served"
            time.sleep(0.1)
        assert grpcurl("-cacert", str(ca.cert), server.address, "list").returncode != 0
        assert server.stop() == 0


async def test_a_grpc_js_client_with_tls_credentials_and_a_token_passes_the_node_suite(
    secured: ServerProcess, ca: CertificateAuthority
) -> None:
    run = await run_node_suite(
        NODE_SUITES / "grpc.test.mjs",
        {
            "SESSIONTODO_ADDRESS": secured.address,
            "GOOGLEAPIS_PROTO_DIR": str(GOOGLEAPIS_PROTO_DIR),
            "SESSIONTODO_CA_FILE": str(ca.cert),
            "SESSIONTODO_TOKEN": WRITER,
        },
    )

    run.assert_all_passed()

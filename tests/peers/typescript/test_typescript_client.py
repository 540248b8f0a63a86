"""@sessiontodo/client (clients/typescript) against real servers, with Node's test runner.

The suites beside this file import the package as ``make typescript`` builds it: client.test.mjs
against a running server, restart.test.mjs against server processes it starts and stops itself
(so it can restart and kill them), tls.test.mjs against a server with TLS and bearer tokens.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from tests.support import ROOT, ServerProcess, run_node_suite
from tests.support.certificates import CertificateAuthority, Issued, auth_toml

pytestmark = pytest.mark.process

SUITES = Path(__file__).parent
WRITER, READER = "ts-writer-token-0123456789", "ts-reader-token-0123456789"


async def test_the_client_passes_its_suite_against_a_running_server(start: Callable[..., Any]) -> None:
    server = await start(progress_interval=0.2)

    run = await run_node_suite(SUITES / "client.test.mjs", {"SESSIONTODO_ADDRESS": server.address})

    run.assert_all_passed(at_least=50)


@pytest.mark.slow
async def test_the_client_retries_and_resumes_across_server_restarts_and_crashes(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "sessiontodo_server", "--host", "127.0.0.1", "--shutdown-grace", "1"]
    store = f"sqlite:///{tmp_path / 'todos.db'}"

    run = await run_node_suite(
        SUITES / "restart.test.mjs",
        {"SESSIONTODO_SERVER_COMMAND": json.dumps([*command, "--store", store]), "SESSIONTODO_ROOT": str(ROOT)},
    )

    run.assert_all_passed(at_least=9)


async def test_the_client_speaks_tls_with_bearer_tokens(
    tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(auth_toml((WRITER, "acme", "writer"), (READER, "acme", "reader")))
    tokens = {"writer": tmp_path / "writer.token", "reader": tmp_path / "reader.token"}
    tokens["writer"].write_text(f"{WRITER}\n")
    tokens["reader"].write_text(READER)
    args = ("--tls-cert", str(server_cert.cert), "--tls-key", str(server_cert.key), "--auth-file", str(auth_file))
    credentials = grpc.ssl_channel_credentials(ca.cert_pem)
    with ServerProcess("--store", "memory://", *args, credentials=credentials) as server:
        run = await run_node_suite(
            SUITES / "tls.test.mjs",
            {
                "SESSIONTODO_ADDRESS": server.address,
                "SESSIONTODO_CA_FILE": str(ca.cert),
                "SESSIONTODO_WRITER_TOKEN_FILE": str(tokens["writer"]),
                "SESSIONTODO_READER_TOKEN_FILE": str(tokens["reader"]),
            },
        )
        server.stop()

    run.assert_all_passed(at_least=4)

"""The Go client (clients/go) against real servers, with `go test` and Debian's Go toolchain.

`make go` generates its protobuf code and vendors Debian's grpc-go sources; the test program is
built once (`go test -c`) and run with SESSIONTODO_ADDRESS naming the server under test.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import ROOT, ServerProcess, free_port

# Building the test program compiles grpc-go the first time: minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.process, pytest.mark.slow, pytest.mark.timeout(600)]

GO_CLIENT = ROOT / "clients" / "go"
TIMEOUT = 180


@pytest.fixture(scope="module")
def go_tests(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Go client's test program, built offline from vendor/ (GOPROXY=off: nothing is downloaded)."""
    program = tmp_path_factory.mktemp("go") / "client.test"
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "-mod=vendor"}
    subprocess.run(["go", "test", "-c", "-o", str(program), "."], cwd=GO_CLIENT, env=env, check=True, timeout=TIMEOUT)
    return program


def run_go_tests(program: Path, address: str, pattern: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SESSIONTODO_ADDRESS": address}
    return subprocess.run(
        [str(program), "-test.v", "-test.count=1", "-test.run", pattern],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def test_the_go_client_passes_its_suite_and_resumes_its_watches(go_tests: Path) -> None:
    # Every connection ends after about 2 s (a deploy, a load balancer): the watches must resume.
    with ServerProcess("--store", "memory://", "--max-connection-age", "2", "--shutdown-grace", "1") as server:
        run = run_go_tests(go_tests, server.address, "TestWrites|TestErrors|TestWatch|TestFeed|TestClaims")

    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.count("--- PASS") == 5, run.stdout


def test_the_go_client_waits_for_a_server_that_is_still_starting(go_tests: Path) -> None:
    port = free_port()
    env = {**os.environ, "SESSIONTODO_ADDRESS": f"127.0.0.1:{port}"}
    command = [str(go_tests), "-test.v", "-test.count=1", "-test.run", "TestWaitsForAStartingServer"]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as client:
        assert client.stdout is not None
        lines = [client.stdout.readline()]
        while lines[-1] and lines[-1].strip() != "calling":
            lines.append(client.stdout.readline())
        time.sleep(3)  # longer than a retry budget spent at once (5 tries, about 1.5 s)
        with ServerProcess("--store", "memory://", port=port):
            output, _ = client.communicate(timeout=TIMEOUT)

    assert client.returncode == 0, "".join(lines) + output

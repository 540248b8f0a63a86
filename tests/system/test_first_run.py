"""What a newcomer sees first: a taken port, ``--help``, a sidecar pointed at nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import ROOT, free_port

pytestmark = pytest.mark.process

COMMANDS = {
    "sessiontodo_server": ("SESSIONTODO_PORT", "sessiontodo_server.settings"),
    "sessiontodo_opencode": ("SESSIONTODO_OPENCODE_PORT", "sessiontodo_opencode.settings"),
}


def run(module: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_a_taken_port_is_one_line_naming_the_address_and_how_to_change_it(module: str, taken_port: int) -> None:
    result = run(module, "--port", str(taken_port))

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"127.0.0.1:{taken_port}" in result.stderr
    assert "Address already in use" in result.stderr
    assert "--port" in result.stderr
    assert COMMANDS[module][0] in result.stderr


@pytest.mark.parametrize("module", sorted(COMMANDS))
def test_help_names_the_environment_variable_of_every_flag(module: str) -> None:
    result = run(module, "--help")

    assert result.returncode == 0, result.stderr
    help_text = " ".join(result.stdout.split())  # argparse wraps lines anywhere
    settings = __import__(COMMANDS[module][1], fromlist=["Settings"]).Settings
    prefix = settings.model_config["env_prefix"]
    for name in settings.model_fields:
        assert f"--{name.replace('_', '-')}" in help_text
        assert f"[env {prefix}{name.upper()}]" in help_text


def test_help_explains_each_limit() -> None:
    help_text = " ".join(run("sessiontodo_server", "--help").stdout.split())

    options = help_text.split("options:", 1)[1]
    for flag in ("--max-session-id-length", "--max-todos-per-session", "--max-sessions", "--max-watchers"):
        explained = options.split(f" {flag} N ", 1)[1].split(" --", 1)[0]
        assert "INVALID_ARGUMENT" in explained or "RESOURCE_EXHAUSTED" in explained, explained


def test_the_sidecar_logs_an_unreachable_sessiontodo_at_start_up() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    process = subprocess.Popen(
        [sys.executable, "-m", "sessiontodo_opencode", "--port", "0", "--sessiontodo-address", nowhere],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert process.stderr is not None
        lines = []
        for line in process.stderr:
            lines.append(line)
            if "unreachable" in line:
                break
        assert f"sessiontodo at {nowhere} is unreachable" in lines[-1], "".join(lines)
        assert "--sessiontodo-address" in lines[-1]
    finally:
        process.terminate()
        assert process.wait(30) == 0

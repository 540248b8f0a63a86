"""The command line of sessiontodo-mcp: help for people, one line and status 2 for a bad flag."""

from __future__ import annotations

import subprocess

import pytest

from sessiontodo_mcp.settings import Settings
from tests.peers.mcp.mcp_support import MCP_COMMAND

pytestmark = pytest.mark.process


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MCP_COMMAND), *args], capture_output=True, text=True, timeout=60)


def test_help_names_every_flags_environment_variable() -> None:
    help_text = " ".join(run("--help").stdout.split())
    missing = [name for name in Settings.model_fields if f"[env SESSIONTODO_MCP_{name.upper()}]" not in help_text]
    assert missing == []


def test_help_shows_what_a_flag_takes() -> None:
    assert "--sessiontodo-address HOST:PORT" in run("--help").stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "sessiontodo-mcp: unrecognized arguments: --bogus (see --help)\n"),
        (["--transport", "ftp"], "sessiontodo-mcp: --transport / SESSIONTODO_MCP_TRANSPORT: Input should be"),
        (["--port", "70000"], "sessiontodo-mcp: --port / SESSIONTODO_MCP_PORT: Input should be less than or"),
        (["--transport", "http", "--session-id", "x"], "sessiontodo-mcp: --session-id is for stdio"),
        (["--http-token", "t"], "sessiontodo-mcp: --http-token and --http-token-file are for --transport http"),
        (["--transport", "http", "--host", "0.0.0.0"], "sessiontodo-mcp: refusing to listen on '0.0.0.0'"),
    ],
)
def test_a_bad_flag_is_one_line_on_stderr_and_status_2(args: list[str], message: str) -> None:
    done = run(*args)
    assert (done.returncode, done.stderr.count("\n"), done.stderr.startswith(message)) == (2, 1, True), done.stderr


def test_nothing_but_protocol_reaches_stdout_when_stdin_closes_at_once() -> None:
    done = subprocess.run([str(MCP_COMMAND)], input="", capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")

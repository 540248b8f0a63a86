"""The command line of sessiontodo-mcp: help for people, one line and status 2 for a bad flag."""

from __future__ import annotations

import subprocess
import sys

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


def connection_flags(help_text: str, env_prefix: str) -> str:
    """The help's "connection to sessiontodo" group, unwrapped, with the program's env prefix taken out."""
    section = help_text.split("connection to sessiontodo:\n", 1)[1].split("\n\n", 1)[0]
    return " ".join(section.split()).replace(env_prefix, "PREFIX_")


def test_the_connection_flags_are_every_gateways_with_the_same_help() -> None:
    sidecar = subprocess.run(
        [sys.executable, "-m", "sessiontodo_opencode", "--help"], capture_output=True, text=True, timeout=60
    )

    ours = connection_flags(run("--help").stdout, "SESSIONTODO_MCP_")
    assert ours == connection_flags(sidecar.stdout, "SESSIONTODO_OPENCODE_")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus"], "sessiontodo-mcp: unknown flag --bogus; did you mean --host? (--help lists the flags)\n"),
        (["--transport", "ftp"], "sessiontodo-mcp: --transport (or SESSIONTODO_MCP_TRANSPORT) 'ftp': Input should be"),
        (["--port", "70000"], "sessiontodo-mcp: --port (or SESSIONTODO_MCP_PORT) '70000': Input should be less than"),
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

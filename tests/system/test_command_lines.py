"""Every command's first-hour messages, as a person sees them: the exact line on stderr and the exit code.

A wrong flag (with "did you mean"), a wrong value, a taken port, a store in use: one line that says
what to do, exit status 2, no traceback. The processes run as users run them (``python -m …``),
against real servers on free ports, stopped by each test.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.support import ROOT, free_port

pytestmark = [pytest.mark.process]
STARTED = re.compile(r"serving on 127\.0\.0\.1:(\d+) \((.*?)\), data in (.*?); Ctrl-C to stop")


def run(module: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


class Server:
    """``python -m sessiontodo_server`` on a free port, started and stopped by a test."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sessiontodo_server", "--port", "0", *args],
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.process.stderr is not None
        for line in self.process.stderr:  # ends when the process does: a server that cannot start fails here
            if started := STARTED.search(line):
                self.started_line = line
                self.port = int(started.group(1))
                return
        raise AssertionError(f"the server did not start (exit status {self.process.wait()})")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield listener.getsockname()[1]


def only_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line on stderr (fails if there are more: a traceback, a usage block)."""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# The server


def test_a_mistyped_server_flag_is_one_line_with_the_flag_it_probably_meant() -> None:
    result = run("sessiontodo_server", "--prot", "50060")
    assert only_line(result) == "sessiontodo-server: unknown flag --prot; did you mean --port? (--help lists the flags)"
    assert result.returncode == 2


def test_a_wrong_server_value_is_one_line_naming_the_flag_and_its_variable() -> None:
    result = run("sessiontodo_server", "--port", "abc")
    assert only_line(result) == (
        "sessiontodo-server: --port (or SESSIONTODO_PORT) 'abc': Input should be a valid integer, "
        "unable to parse string as an integer"
    )
    assert result.returncode == 2


def test_a_wrong_value_from_the_environment_is_the_same_line() -> None:
    result = run("sessiontodo_server", env={"SESSIONTODO_DURABILITY": "sometimes"})
    assert only_line(result) == (
        "sessiontodo-server: --durability (or SESSIONTODO_DURABILITY) 'sometimes': Input should be 'process' or 'fsync'"
    )
    assert result.returncode == 2


def test_a_store_url_without_its_scheme_is_one_line_listing_the_valid_ones() -> None:
    result = run("sessiontodo_server", "--store", "memory", "--port", "0")
    assert only_line(result) == (
        "sessiontodo-server: unsupported store URL 'memory': use memory://, sqlite:///path.db, "
        "redis://host:port/db or etcd://host:2379,…/prefix (--store / SESSIONTODO_STORE)"
    )
    assert result.returncode == 2


def test_a_port_taken_by_another_program_says_to_stop_it_or_pick_another_port(taken_port: int) -> None:
    result = run("sessiontodo_server", "--port", str(taken_port), "--store", "memory://")
    assert only_line(result) == (
        f"sessiontodo-server: cannot listen on 127.0.0.1:{taken_port}: Address already in use; stop what uses that "
        "port, or pass another --port (SESSIONTODO_PORT)"
    )
    assert result.returncode == 2


def test_a_second_server_on_the_same_port_says_the_first_is_running() -> None:
    first = Server("--store", "memory://")
    try:
        result = run("sessiontodo_server", "--port", str(first.port), "--store", "memory://")
    finally:
        first.stop()
    assert only_line(result) == (
        f"sessiontodo-server: cannot listen on 127.0.0.1:{first.port}: Address already in use: a sessiontodo server "
        "is already running there; stop it (Ctrl-C in its terminal), or start this one with another --port "
        "(SESSIONTODO_PORT) and its own --store"
    )
    assert result.returncode == 2


def test_a_second_server_on_the_same_sqlite_file_names_both_ways_out(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/todos.db"
    first = Server("--store", store)
    try:
        result = run("sessiontodo_server", "--port", "0", "--store", store)
    finally:
        first.stop()
    assert only_line(result) == (
        f"sessiontodo-server: sqlite file {tmp_path}/todos.db is in use by another sessiontodo server: stop that "
        "server (Ctrl-C in its terminal), or give this one its own --store (e.g. sqlite:///data/second.db) and --port"
    )
    assert result.returncode == 2


def test_the_start_up_line_names_the_address_the_security_the_absolute_data_path_and_how_to_stop(
    tmp_path: Path,
) -> None:
    server = Server("--store", f"sqlite:///{os.path.relpath(tmp_path, ROOT)}/todos.db")
    server.stop()
    started = STARTED.search(server.started_line)
    assert started is not None
    assert (started.group(2), started.group(3)) == ("plaintext, no authentication", f"{tmp_path}/todos.db")


def test_the_server_help_groups_its_options_and_shows_real_metavars_and_examples() -> None:
    result = run("sessiontodo_server", "--help")
    assert result.returncode == 0
    for heading in ("listening:", "data:", "security:", "limits (a call beyond one fails and changes nothing):"):
        assert f"\n{heading}\n" in result.stdout
    assert "--tls-cert FILE" in result.stdout
    assert "--shutdown-grace SECONDS" in result.stdout
    assert "{" not in result.stdout.replace("{process,fsync}", "").replace("{auto,uvloop,asyncio}", "").replace(
        "{text,json}", ""
    )
    assert "\nexamples:\n  python -m sessiontodo_server " in result.stdout


# The gateways


def test_a_mistyped_sidecar_flag_is_one_line_with_the_flag_it_probably_meant() -> None:
    result = run("sessiontodo_opencode", "--sessiontodo-adress", "127.0.0.1:1")
    assert only_line(result) == (
        "sessiontodo-opencode: unknown flag --sessiontodo-adress; did you mean --sessiontodo-address? "
        "(--help lists the flags)"
    )
    assert result.returncode == 2


def test_a_port_the_sidecar_cannot_take_says_what_to_do(taken_port: int) -> None:
    result = run("sessiontodo_opencode", "--port", str(taken_port), "--sessiontodo-address", "127.0.0.1:1")
    assert only_line(result) == (
        f"sessiontodo-opencode: cannot listen on 127.0.0.1:{taken_port}: Address already in use; stop what uses that "
        "port (another sidecar, or OpenCode itself), or pass another --port (SESSIONTODO_OPENCODE_PORT)"
    )
    assert result.returncode == 2


def test_tls_alone_is_a_flag_and_a_wrong_boolean_is_one_line() -> None:
    result = run("sessiontodo_opencode", "--tls", "maybe")
    assert only_line(result) == (
        "sessiontodo-opencode: --tls (or SESSIONTODO_OPENCODE_TLS) 'maybe': Input should be a valid boolean, "
        "unable to interpret input"
    )
    assert result.returncode == 2


def test_the_sidecar_help_has_no_python_types_and_names_no_internals() -> None:
    result = run("sessiontodo_opencode", "--help")
    assert result.returncode == 0
    for leak in ("SecretStr", "Path,null", "ServiceConnection", "{"):
        assert leak not in result.stdout
    assert "--token SECRET" in result.stdout
    assert "--ca-file FILE" in result.stdout
    assert "\nconnection to sessiontodo:\n" in result.stdout


def test_the_mirror_without_its_opencode_url_says_which_flag_is_missing() -> None:
    result = run("sessiontodo_opencode.mirror_main")
    assert only_line(result) == (
        "sessiontodo-opencode-mirror: --opencode (or SESSIONTODO_OPENCODE_MIRROR_OPENCODE): Field required"
    )
    assert result.returncode == 2


def test_a_mistyped_web_board_flag_is_one_line_with_the_flag_it_probably_meant() -> None:
    result = run("sessiontodo_web", "--prot", "8081")
    assert only_line(result) == "sessiontodo-web: unknown flag --prot; did you mean --port? (--help lists the flags)"
    assert result.returncode == 2


def test_flags_that_contradict_each_other_are_one_line_naming_both() -> None:
    result = run("sessiontodo_web", "--viewer-token", "a", "--viewer-token-file", "b")
    assert only_line(result) == "sessiontodo-web: give --viewer-token or --viewer-token-file, not both"
    assert result.returncode == 2


def test_a_mistyped_acp_proxy_flag_is_one_line() -> None:
    result = run(
        "sessiontodo_acp", "--adress", "127.0.0.1:1", "--", sys.executable, "-c", "import time; time.sleep(30)"
    )
    assert only_line(result) == (
        "sessiontodo-acp-proxy: unknown flag --adress; did you mean --address? (--help lists the flags)"
    )
    assert result.returncode == 2


def test_the_acp_proxy_help_lists_every_environment_variable() -> None:
    result = run("sessiontodo_acp", "--help")
    from sessiontodo_acp.settings import ProxySettings

    help_text = " ".join(result.stdout.split())
    assert result.returncode == 0
    for name in ProxySettings.model_fields:
        assert f"[env SESSIONTODO_ACP_{name.upper()}]" in help_text


def test_the_acp_proxy_without_an_agent_command_says_how_to_give_one() -> None:
    result = run("sessiontodo_acp", "--address", "127.0.0.1:1")
    assert only_line(result) == (
        "sessiontodo-acp-proxy: give the agent command after --, e.g. sessiontodo-acp-proxy -- my-agent --acp "
        "(--help lists the flags)"
    )
    assert result.returncode == 2


# sessiontodoctl's usage errors (its verbs against a server: tests/test_ctl_verbs.py)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--adress", "x", "ls"],
            "sessiontodoctl: unknown flag --adress; did you mean --address? (sessiontodoctl --help)",
        ),
        (["lss"], "sessiontodoctl: No such command 'lss'. Did you mean 'ls'? (sessiontodoctl --help)"),
        (["get"], "sessiontodoctl: Missing argument 'SESSION'. (sessiontodoctl get --help)"),
        (
            ["get", "s", "-o", "xml"],
            "sessiontodoctl: Invalid value for '--output' / '-o': Value error, 'xml' is not one of 'table', "
            "'json', 'yaml'. (sessiontodoctl get --help)",
        ),
        (
            ["edit", "s", "0"],
            "sessiontodoctl: Invalid value: nothing to change: give --content, --priority or --status "
            "(sessiontodoctl edit --help)",
        ),
    ],
)
def test_a_ctl_usage_error_is_one_line_and_exit_2(args: list[str], line: str) -> None:
    result = run("sessiontodo_ctl", "--address", "127.0.0.1:1", *args)
    assert only_line(result) == line
    assert result.returncode == 2


# sessiontodoctl's verbs, against a real server; stdout is a pipe here, as in scripts


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server("--store", "memory://")
    yield running
    running.stop()


def ctl(server: Server, *args: str) -> subprocess.CompletedProcess[str]:
    return run("sessiontodo_ctl", "--address", f"127.0.0.1:{server.port}", *args)


def statuses(server: Server, session: str) -> list[str]:
    return [todo["status"] for todo in json.loads(ctl(server, "get", session, "-o", "json").stdout)["todos"]]


def contents(server: Server, session: str) -> list[str]:
    return [todo["content"] for todo in json.loads(ctl(server, "get", session, "-o", "json").stdout)["todos"]]


def plan(server: Server, session: str, tmp_path: Path, todos: list[dict[str, str]]) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(todos))
    ctl(server, "create", session)
    assert ctl(server, "replace", session, "-f", str(path)).returncode == 0


def test_start_done_and_cancel_set_the_status_of_the_todos_named_by_position(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "a"}, {"content": "b"}, {"content": "c"}])
    results = [ctl(server, verb, "s", position) for verb, position in (("start", "0"), ("done", "1"), ("cancel", "2"))]
    assert [result.returncode for result in results] == [0, 0, 0]
    assert statuses(server, "s") == ["in_progress", "completed", "cancelled"]


def test_a_todo_is_named_by_a_unique_prefix_of_its_id(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"id": "parser-1", "content": "a"}, {"id": "tests-1", "content": "b"}])
    result = ctl(server, "done", "s", "tes")
    assert result.stdout.startswith("completed tests-1, revision ")
    assert statuses(server, "s") == ["pending", "completed"]


def test_an_ambiguous_prefix_is_one_line_naming_the_candidates_and_changes_nothing(
    server: Server, tmp_path: Path
) -> None:
    plan(server, "s", tmp_path, [{"id": "task-1", "content": "a"}, {"id": "task-2", "content": "b"}])
    result = ctl(server, "done", "s", "task")
    assert only_line(result) == (
        "sessiontodoctl: Invalid value for TODO: todo 'task' is ambiguous in s: it begins task-1, task-2; "
        "give more of the id (sessiontodoctl done --help)"
    )
    assert result.returncode == 2
    assert statuses(server, "s") == ["pending", "pending"]


def test_edit_changes_what_is_given_and_keeps_the_rest(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "write the parser", "status": "in_progress"}])
    ctl(server, "edit", "s", "0", "--content", "write the lexer", "--priority", "high")
    [todo] = json.loads(ctl(server, "get", "s", "-o", "json").stdout)["todos"]
    assert (todo["content"], todo["priority"], todo["status"]) == ("write the lexer", "high", "in_progress")


def test_rm_todo_removes_the_todo_at_a_position(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "a"}, {"content": "b"}, {"content": "c"}])
    ctl(server, "rm-todo", "s", "1")
    assert contents(server, "s") == ["a", "c"]


def test_move_puts_a_todo_at_another_position(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "a"}, {"content": "b"}, {"content": "c"}])
    ctl(server, "move", "s", "2", "0")
    assert contents(server, "s") == ["c", "a", "b"]


def test_a_write_to_a_missing_session_says_to_create_it_first(server: Server) -> None:
    result = ctl(server, "add", "nope", "something")
    assert result.stderr.splitlines() == [
        "Error: NOT_FOUND: session not found: 'nope'",
        "create the session first: sessiontodoctl create nope",
    ]
    assert result.returncode == 1


def test_a_refused_write_prints_each_violation_once(server: Server) -> None:
    ctl(server, "create", "s")
    result = ctl(server, "add", "s", "")
    assert result.stderr.splitlines() == ["Error: INVALID_ARGUMENT:", "  todo.content: must not be empty"]
    assert result.returncode == 1


def test_piped_ls_prints_plain_columns_with_whole_ids(server: Server) -> None:
    long_id = "ses_" + "0123456789abcdef" * 6
    ctl(server, "create", long_id, "--label", "project=web")
    assert ctl(server, "ls").stdout.splitlines() == [
        f"{'SESSION':<{len(long_id)}}  PARENT  REVISION  TODOS  LABELS",
        f"{long_id}                 0      0  project=web",
    ]


def test_get_in_yaml_is_a_document_a_script_can_load(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "a"}])
    document = yaml.safe_load(ctl(server, "-o", "yaml", "get", "s").stdout)
    assert (document["revision"], document["todos"][0]["content"]) == (1, "a")


def test_piped_feed_keeps_each_change_on_one_line_and_tells_the_connection_on_stderr(server: Server) -> None:
    long_id = "ses_" + "0123456789abcdef" * 6
    ctl(server, "create", long_id)
    feed = subprocess.Popen(
        [sys.executable, "-m", "sessiontodo_ctl", "-a", f"127.0.0.1:{server.port}", "feed", "--snapshot"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert feed.stdout is not None
        assert feed.stderr is not None
        first = feed.stdout.readline()
        told = [feed.stderr.readline(), feed.stderr.readline()]
    finally:
        feed.terminate()
        feed.wait(timeout=30)
    assert first.split() == ["snapshot", long_id, "revision", "0", "0/0", "completed"]
    assert told == [f"connecting to 127.0.0.1:{server.port}…\n", f"connected to 127.0.0.1:{server.port}\n"]


def test_a_feed_pointed_at_nothing_says_it_is_reconnecting(taken_port: int) -> None:
    feed = subprocess.Popen(
        [sys.executable, "-m", "sessiontodo_ctl", "-a", f"127.0.0.1:{taken_port}", "feed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert feed.stderr is not None
        told = [feed.stderr.readline(), feed.stderr.readline()]
    finally:
        feed.terminate()
        feed.wait(timeout=30)
    assert told[0] == f"connecting to 127.0.0.1:{taken_port}…\n"
    assert told[1].startswith(f"reconnecting to 127.0.0.1:{taken_port} in ")


def test_piped_watch_in_json_prints_the_snapshot_then_each_change(server: Server, tmp_path: Path) -> None:
    plan(server, "s", tmp_path, [{"content": "a"}])
    watch = subprocess.Popen(
        [sys.executable, "-m", "sessiontodo_ctl", "-a", f"127.0.0.1:{server.port}", "watch", "s", "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    try:
        assert watch.stdout is not None
        snapshot = json.loads(watch.stdout.readline())
        ctl(server, "done", "s", "0")
        change = json.loads(watch.stdout.readline())
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    assert [(snapshot["kind"], snapshot["revision"]), (change["kind"], change["revision"])] == [
        ("snapshot", 1),
        ("todo_updated", 2),
    ]


def test_a_boolean_flag_alone_means_true() -> None:
    from sessiontodo_acp.settings import ProxySettings

    assert ProxySettings.from_flags(["--tls"]).tls is True


# The sessiontodo address: one flag everywhere (--sessiontodo-address), the older --address kept


def test_the_acp_proxy_takes_sessiontodo_address_and_its_older_spelling(monkeypatch: pytest.MonkeyPatch) -> None:
    from sessiontodo_acp.settings import ProxySettings

    monkeypatch.delenv("SESSIONTODO_ACP_ADDRESS", raising=False)
    assert ProxySettings.from_flags(["--sessiontodo-address", "127.0.0.1:7"]).sessiontodo_address == "127.0.0.1:7"
    assert ProxySettings.from_flags(["--address", "127.0.0.1:8"]).sessiontodo_address == "127.0.0.1:8"


def test_the_acp_proxy_still_reads_its_older_address_variable_after_the_new_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from sessiontodo_acp.settings import ProxySettings

    monkeypatch.setenv("SESSIONTODO_ACP_ADDRESS", "127.0.0.1:7")
    assert ProxySettings.from_flags([]).sessiontodo_address == "127.0.0.1:7"
    monkeypatch.setenv("SESSIONTODO_ACP_SESSIONTODO_ADDRESS", "127.0.0.1:8")
    assert ProxySettings.from_flags([]).sessiontodo_address == "127.0.0.1:8"


@pytest.mark.parametrize("flag", ["--sessiontodo-address", "--address", "-a"])
def test_sessiontodoctl_takes_sessiontodo_address_and_its_older_spellings(server: Server, flag: str) -> None:
    result = run("sessiontodo_ctl", flag, f"127.0.0.1:{server.port}", "create", "s")
    assert (result.returncode, result.stdout.strip()) == (0, "created s")


@pytest.mark.parametrize("module", ["sessiontodo_opencode", "sessiontodo_mcp", "sessiontodo_web", "sessiontodo_acp"])
def test_a_sessiontodo_address_that_is_not_host_and_port_is_refused_at_start(module: str) -> None:
    agent = ["--", sys.executable, "-c", "pass"] if module == "sessiontodo_acp" else []
    result = run(module, "--sessiontodo-address", "not-a-host-port", *agent)
    assert re.fullmatch(
        r"[a-z-]+: --sessiontodo-address \(or [A-Z_]+\) 'not-a-host-port': "
        r"no host named 'not-a-host-port' \(expected HOST:PORT, such as 127\.0\.0\.1:50051\)",
        only_line(result),
    )
    assert result.returncode == 2


def test_sessiontodoctl_refuses_a_host_that_does_not_exist_at_once() -> None:
    result = run("sessiontodo_ctl", "-a", "not-a-host-port", "ls")
    assert only_line(result) == (
        "sessiontodoctl: no host named 'not-a-host-port' (expected HOST:PORT, such as 127.0.0.1:50051)"
    )
    assert result.returncode == 2


# sessiontodoctl's first hour: -o after any verb, version, other tools' verbs, a server not there yet


def test_a_write_verb_takes_dash_o_after_the_command(server: Server) -> None:
    result = ctl(server, "create", "s", "-o", "json")
    assert json.loads(result.stdout)["created"] is True
    added = ctl(server, "add", "s", "Write the parser", "-o", "yaml")
    assert yaml.safe_load(added.stdout)["todo"]["content"] == "Write the parser"
    done = ctl(server, "done", "s", "0", "-o", "json")
    assert json.loads(done.stdout)["todo"]["status"] == "completed"


def test_sessiontodoctl_version_prints_the_installed_version() -> None:
    from sessiontodo_client import __version__

    result = run("sessiontodo_ctl", "version")
    assert (result.returncode, result.stdout) == (0, f"sessiontodoctl {__version__}\n")


def test_delete_suggests_rm() -> None:
    result = run("sessiontodo_ctl", "delete", "s")
    assert only_line(result) == "sessiontodoctl: No such command 'delete'. Did you mean 'rm'? (sessiontodoctl --help)"
    assert result.returncode == 2


def test_sessiontodoctl_started_before_the_server_waits_for_it_and_says_so_once() -> None:
    port = free_port()
    command = [sys.executable, "-m", "sessiontodo_ctl", "-a", f"127.0.0.1:{port}", "--timeout", "90", "create", "s"]
    ctl_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    assert ctl_process.stderr is not None
    waiting = ctl_process.stderr.readline()  # said before the server exists: it waits for it
    server = Server("--store", "memory://", "--port", str(port))
    try:
        out, err = ctl_process.communicate(timeout=90)
    finally:
        server.stop()
    assert waiting == f"sessiontodoctl: waiting for sessiontodo at 127.0.0.1:{port} to accept connections (up to 90s)\n"
    assert (ctl_process.returncode, out, err) == (0, "created s\n", "")


def test_nothing_at_the_port_is_one_clear_line_once_the_wait_is_over() -> None:
    port = free_port()
    result = run("sessiontodo_ctl", "-a", f"127.0.0.1:{port}", "--timeout", "0.5", "ls")
    assert result.stderr.splitlines()[1:] == [
        f"Error: UNAVAILABLE: nothing accepted a connection at 127.0.0.1:{port} within 0.5s: is sessiontodo running "
        "there? (-a HOST:PORT or SESSIONTODO_ADDRESS names the server, --timeout the wait)"
    ]
    assert result.returncode == 1


def test_a_redis_store_down_at_start_is_named_with_its_password_hidden() -> None:
    port = free_port()
    result = run("sessiontodo_server", "--port", "0", "--store", f"redis://:hunter2@127.0.0.1:{port}/0")
    assert result.stderr.splitlines()[-1].endswith(
        f"the store at redis://:***@127.0.0.1:{port}/0 is unreachable: start it, or point --store "
        "(SESSIONTODO_STORE) at one that runs"
    )
    assert "hunter2" not in result.stderr
    assert result.returncode == 1

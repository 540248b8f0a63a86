"""sessiontodoctl as a person or a script runs it: the installed command against a real server, and
the live ``watch`` view in a real terminal (tmux), read back with capture-pane."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import Todo, TodoClient, TodoStatus
from sessiontodo_server.app import RunningServer
from tests.support import eventually
from tests.support.certificates import CertificateAuthority, Issued, auth_toml

pytestmark = pytest.mark.process

CTL = str(Path(sys.executable).parent / "sessiontodoctl")


async def ctl(*args: str, env: dict[str, str] | None = None, stdin: bytes = b"") -> tuple[int, str, str]:
    """Run the installed ``sessiontodoctl``; returns exit status, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        CTL,
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "120", **(env or {})},
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_script_creates_fills_and_reads_a_session(
    server: RunningServer, client: TodoClient, tmp_path: Path
) -> None:
    address = ("--address", server.address)
    assert (await ctl(*address, "create", "demo"))[:2] == (0, "created demo\n")
    code, out, _ = await ctl(*address, "-o", "json", "add", "demo", "Write the parser", "--priority", "high")
    assert code == 0
    parser_id = json.loads(out)["todo"]["id"]
    plan = tmp_path / "plan.json"
    code, out, _ = await ctl(*address, "-o", "json", "get", "demo")
    listed = json.loads(out)
    listed["todos"].append({"content": "Write the tests", "status": "in_progress"})
    plan.write_text(json.dumps(listed))
    code, _, err = await ctl(*address, "replace", "demo", "-f", str(plan), "--expected-revision", "1")
    assert code == 0, err
    assert (await ctl(*address, "done", "demo", parser_id))[0] == 0

    todos = await client.get_todos("demo")
    assert [(todo.content, todo.status) for todo in todos.todos] == [
        ("Write the parser", TodoStatus.COMPLETED),
        ("Write the tests", TodoStatus.IN_PROGRESS),
    ]
    assert todos.revision == 3


async def test_the_address_comes_from_the_environment_and_a_plan_from_stdin(server: RunningServer) -> None:
    env = {"SESSIONTODO_ADDRESS": server.address}
    assert (await ctl("create", "s", env=env))[0] == 0
    code, out, err = await ctl("-o", "json", "replace", "s", "-f", "-", env=env, stdin=b'[{"content": "from stdin"}]')
    assert code == 0, err
    assert [todo["content"] for todo in json.loads(out)["todos"]] == ["from stdin"]
    code, out, _ = await ctl("ls", env=env)
    assert code == 0
    assert "s" in out


async def test_errors_exit_1_with_the_code_and_every_violation_and_change_nothing(server: RunningServer) -> None:
    address = ("--address", server.address)
    code, out, err = await ctl(*address, "get", "missing")
    assert (code, out) == (1, "")
    assert "NOT_FOUND" in err
    assert "missing" in err
    await ctl(*address, "create", "s")
    bad = b'[{"content": ""}, {"id": "x", "content": "a"}, {"id": "x", "content": "b"}]'
    code, _, err = await ctl(*address, "replace", "s", "-f", "-", stdin=bad)
    assert code == 1
    assert "todos[0].content: must not be empty" in err
    assert "todos[2].id: duplicate id 'x'" in err
    assert (await ctl(*address, "-o", "json", "get", "s"))[1].strip() == '{"todos": [], "revision": 0}'


async def test_health_and_an_unreachable_server(server: RunningServer) -> None:
    code, out, _ = await ctl("--address", server.address, "health")
    assert code == 0
    assert out.count("SERVING") == 2
    code, _, err = await ctl("--address", "127.0.0.1:1", "--timeout", "2", "health")
    assert code == 1
    assert "UNAVAILABLE" in err


async def test_mutual_tls_with_a_client_certificate_and_a_token_from_a_file(
    start: Callable[..., Any], tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    (tmp_path / "auth.toml").write_text(auth_toml(("ctl-token-0123456789", "acme", "writer")))
    (tmp_path / "token").write_text("ctl-token-0123456789\n")
    server: RunningServer = await start(
        tls_cert=server_cert.cert, tls_key=server_cert.key, tls_client_ca=ca.cert, auth_file=tmp_path / "auth.toml"
    )
    operator = ca.issue("operator", server=False)
    trusting = ("--address", server.address, "--timeout", "5", "--tls-ca", str(ca.cert))
    certified = (*trusting, "--client-cert", str(operator.cert), "--client-key", str(operator.key))

    code, out, err = await ctl(*certified, "--token-file", str(tmp_path / "token"), "create", "s")
    assert (code, out) == (0, "created s\n"), err
    code, _, err = await ctl(*trusting, "--token-file", str(tmp_path / "token"), "get", "s")
    assert code == 1
    assert "UNAVAILABLE" in err
    code, _, err = await ctl(*certified, "get", "s")
    assert code == 1
    assert "UNAUTHENTICATED" in err


async def test_the_client_certificate_and_token_also_come_from_the_environment(
    start: Callable[..., Any], tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key, tls_client_ca=ca.cert)
    operator = ca.issue("operator", server=False)
    env = {
        "SESSIONTODO_ADDRESS": server.address,
        "SESSIONTODO_TLS_CA": str(ca.cert),
        "SESSIONTODO_CLIENT_CERT": str(operator.cert),
        "SESSIONTODO_CLIENT_KEY": str(operator.key),
    }
    code, out, err = await ctl("create", "s", env=env)
    assert (code, out) == (0, "created s\n"), err


async def test_a_token_goes_in_plaintext_to_a_loopback_server(start: Callable[..., Any], tmp_path: Path) -> None:
    (tmp_path / "auth.toml").write_text(auth_toml(("ctl-token-0123456789", "acme", "writer")))
    server: RunningServer = await start(auth_file=tmp_path / "auth.toml")
    code, out, err = await ctl("--address", server.address, "--token", "ctl-token-0123456789", "create", "s")
    assert (code, out) == (0, "created s\n"), err
    code, _, err = await ctl("--address", server.address, "--token", "another-token-0123", "get", "s")
    assert code == 1
    assert "UNAUTHENTICATED" in err


@pytest.mark.parametrize("address", ["10.1.2.3:50051", "todos.internal:50051", "[2001:db8::1]:50051"])
async def test_a_token_is_never_sent_in_plaintext_to_another_machine(address: str) -> None:
    code, out, err = await ctl("--address", address, "--token", "s3cret", "health")
    assert (code, out) == (2, "")
    assert err == (
        f"sessiontodoctl: refusing to send a bearer token in plaintext to {address}: use TLS or a loopback address\n"
    )


async def test_a_client_certificate_without_its_key_is_one_line_and_exit_2(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    operator = ca.issue("operator", server=False)
    code, _, err = await ctl("--tls-ca", str(ca.cert), "--client-cert", str(operator.cert), "health")
    assert (code, err) == (2, "sessiontodoctl: a client certificate needs its key, and a key its certificate\n")


class Terminal:
    """A detached tmux session of its own (its own server socket), 100 columns by 30 rows."""

    def __init__(self, command: list[str]) -> None:
        tmux = shutil.which("tmux")
        assert tmux, "tmux must be installed (see .ci/run)"
        self._tmux = [tmux, "-L", f"sessiontodo-{uuid.uuid4().hex[:12]}"]
        subprocess.run(
            [*self._tmux, "new-session", "-d", "-x", "100", "-y", "30", "-e", "TERM=xterm-256color", *command],
            check=True,
        )

    def screen(self) -> str:
        return subprocess.run([*self._tmux, "capture-pane", "-p"], check=True, capture_output=True, text=True).stdout

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], check=False, capture_output=True)


@pytest.mark.peer
async def test_watch_shows_the_list_changing_live_in_a_terminal(server: RunningServer, client: TodoClient) -> None:
    await client.create_session("demo")
    await client.replace_todos("demo", [Todo(id="parse", content="Write the parser")])
    terminal = Terminal([CTL, "--address", server.address, "watch", "demo"])
    try:

        def showing(*texts: str) -> bool:
            screen = terminal.screen()
            return all(text in screen for text in texts)

        await eventually(lambda: showing("revision 1", "[ ] │ parse", "Write the parser", "0/1 completed"), 30)

        added = await client.add_todo("demo", Todo(id="docs", content="Write the docs"), origin="opencode")
        await eventually(
            lambda: showing("revision 2", "todo_added docs  by opencode", "Write the docs", "0/2 completed"), 30
        )

        await client.update_todo("demo", "parse", status=TodoStatus.COMPLETED)
        await eventually(lambda: showing(f"revision {added.revision + 1}", "[x] │ parse", "1/2 completed"), 30)
        screen = terminal.screen()
        assert screen.count("revision") == 1, screen  # the view was redrawn in place, not appended

        await client.remove_session("demo")
        await eventually(lambda: showing("the session was removed"), 30)
    finally:
        terminal.close()


async def test_ls_shows_labels_and_filters_by_them(server: RunningServer, client: TodoClient) -> None:
    await client.create_session("web", labels={"project": "web", "title": "Fix login"})
    await client.create_session("api", labels={"project": "api"})
    code, out, _ = await ctl("--address", server.address, "ls", "--label", "project=web")
    assert code == 0
    assert "project=web,title=Fix login" in out
    assert "api" not in out


async def test_feed_tails_every_change_with_its_origin(server: RunningServer, client: TodoClient) -> None:
    await client.create_session("a")
    process = await asyncio.create_subprocess_exec(
        CTL,
        *("--address", server.address, "-o", "json", "feed", "--snapshot", "--session", "a", "--session", "b"),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:

        async def line() -> dict[str, object]:
            return json.loads(await asyncio.wait_for(process.stdout.readline(), 30))  # type: ignore[union-attr]

        snapshot = await line()
        assert (snapshot["kind"], snapshot["session_id"]) == ("snapshot", "a")
        await client.create_session("b", origin="opencode")
        await client.add_todo("a", Todo(content="x"), origin="acp-proxy")
        created, added = await line(), await line()
        assert (created["kind"], created["session_id"], created["origin"]) == ("session_created", "b", "opencode")
        assert (added["kind"], added["session_id"], added["origin"]) == ("todo_added", "a", "acp-proxy")
        assert isinstance(added["cursor"], str)
        assert added["cursor"]
    finally:
        process.terminate()
        await process.wait()

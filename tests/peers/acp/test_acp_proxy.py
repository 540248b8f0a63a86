"""The stdio proxy between a real SDK editor and the SDK test agent, against a real sessiontodo server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import NotFound, Todo, TodoClient, TodoPriority, TodoStatus
from tests.support import ServerProcess, eventually, free_port

pytestmark = pytest.mark.process

WAIT = 30.0
"""Seconds to wait for an eventual outcome: proxies and agents are separate processes on a busy machine."""


async def soon(check: Any) -> None:
    await eventually(check, timeout=WAIT)


def entry(content: str, status: str = "pending", priority: str = "medium", **meta: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"content": content, "status": status, "priority": priority}
    if meta:
        value["_meta"] = meta
    return value


async def stored(client: TodoClient, session_id: str) -> list[tuple[str, TodoStatus | int, TodoPriority | int]]:
    return [(t.content, t.status, t.priority) for t in (await client.get_todos(session_id)).todos]


async def test_a_plan_the_agent_sends_reaches_the_editor_and_sessiontodo(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("Analyze", "in_progress", "high"), entry("Write tests")])

        assert proxied.editor.contents(session_id) == [["Analyze", "Write tests"]]
        expected = [
            ("Analyze", TodoStatus.IN_PROGRESS, TodoPriority.HIGH),
            ("Write tests", TodoStatus.PENDING, TodoPriority.MEDIUM),
        ]
        await soon(lambda: _stored_equals(client, session_id, expected))


async def _stored_equals(client: TodoClient, session_id: str, expected: list[Any]) -> bool:
    try:
        return await stored(client, session_id) == expected
    except NotFound:
        return False


async def test_a_new_acp_session_becomes_a_sessiontodo_session(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await soon(lambda: _exists(client, session_id))


async def _exists(client: TodoClient, session_id: str) -> bool:
    return session_id in {session.session_id for session in await client.list_sessions()}


async def test_a_change_by_another_client_reaches_the_editor_as_a_plan_update(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await soon(lambda: _exists(client, session_id))

        await client.replace_todos(session_id, [Todo(id="g-1", content="from gRPC", priority=TodoPriority.LOW)])

        await soon(lambda: proxied.editor.plans[session_id] != [])
        assert proxied.editor.plans[session_id] == [
            [{"content": "from gRPC", "status": "pending", "priority": "low", "_meta": {"sessiontodo/todoId": "g-1"}}]
        ]


async def test_the_agents_own_plans_are_never_echoed_back_to_the_editor(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("one")], [entry("one", "completed"), entry("two")])
        await soon(
            lambda: _stored_equals(
                client,
                session_id,
                [("one", TodoStatus.COMPLETED, TodoPriority.MEDIUM), ("two", TodoStatus.PENDING, TodoPriority.MEDIUM)],
            )
        )

        # A later change by someone else comes after any echo on the watch: once it has
        # arrived, an echo would have arrived before it.
        await client.add_todo(session_id, Todo(content="three"))
        await soon(lambda: len(proxied.editor.plans[session_id]) == 3)

        assert proxied.editor.contents(session_id) == [["one"], ["one", "two"], ["one", "two", "three"]]


async def test_a_cancelled_todo_survives_a_round_trip_through_the_editor_and_the_agent(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await soon(lambda: _exists(client, session_id))
        await client.replace_todos(session_id, [Todo(id="c-1", content="Old idea", status=TodoStatus.CANCELLED)])
        await soon(lambda: proxied.editor.plans[session_id] != [])
        shown = proxied.editor.plans[session_id][-1]
        assert shown == [
            {
                "content": "[cancelled] Old idea",
                "status": "completed",
                "priority": "medium",
                "_meta": {"sessiontodo/todoId": "c-1", "sessiontodo/todoStatus": "cancelled"},
            }
        ]

        # The agent sends back what it was shown, plus a new entry.
        await proxied.send_plans(session_id, [*shown, entry("New idea")])

        async def round_tripped() -> bool:
            todos = (await client.get_todos(session_id)).todos
            return [t.content for t in todos] == ["Old idea", "New idea"]

        await soon(round_tripped)
        first = (await client.get_todos(session_id)).todos[0]
        assert (first.id, first.status) == ("c-1", TodoStatus.CANCELLED)


async def test_values_outside_acps_sets_are_stored_mapped_and_the_proxy_carries_on(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        odd = [
            entry("a", "blocked", "urgent"),
            entry("b", "cancelled", "high"),
            {"status": "pending", "priority": "low"},
            "not an entry",
        ]
        await proxied.send_plans(session_id, odd)
        await soon(
            lambda: _stored_equals(
                client,
                session_id,
                [("a", TodoStatus.PENDING, TodoPriority.MEDIUM), ("b", TodoStatus.CANCELLED, TodoPriority.HIGH)],
            )
        )

        await proxied.send_plans(session_id, [entry("fine")])
        await soon(lambda: _stored_equals(client, session_id, [("fine", TodoStatus.PENDING, TodoPriority.MEDIUM)]))


async def test_a_session_loaded_by_a_new_editor_is_watched_without_pushing_the_stored_plan(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as first:
        session_id = await first.new_session()
        await first.send_plans(session_id, [entry("kept across editors")])
        await soon(
            lambda: _stored_equals(
                client, session_id, [("kept across editors", TodoStatus.PENDING, TodoPriority.MEDIUM)]
            )
        )

    async with open_editor(server.address) as second:
        await second.conn.load_session(cwd=str(Path.cwd()), session_id=session_id, mcp_servers=[])
        await second.logged(f"session {session_id}: watching")
        await client.add_todo(session_id, Todo(content="added elsewhere"))
        await soon(lambda: second.editor.plans[session_id] != [])
        assert second.editor.contents(session_id) == [["kept across editors", "added elsewhere"]]


async def test_the_plan_an_agent_replays_on_load_is_stored_and_never_overwritten_by_an_older_list(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("A"), entry("B"), entry("C")])
        await soon(lambda: _stored_contents(client, session_id, ["A", "B", "C"]))
        await client.replace_todos(session_id, [Todo(content="older elsewhere")])
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["older elsewhere"]])

        await proxied.conn.load_session(cwd=str(Path.cwd()), session_id=session_id, mcp_servers=[])

        await soon(lambda: _stored_contents(client, session_id, ["A", "B", "C"]))
        await client.add_todo(session_id, Todo(content="D"))
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["A", "B", "C", "D"]])
        assert proxied.editor.contents(session_id) == [
            ["A", "B", "C"],
            ["older elsewhere"],
            ["A", "B", "C"],  # the replay, forwarded
            ["A", "B", "C", "D"],
        ]


async def _stored_contents(client: TodoClient, session_id: str, contents: list[str]) -> bool:
    try:
        return [todo.content for todo in (await client.get_todos(session_id)).todos] == contents
    except NotFound:
        return False


async def test_loading_a_session_sessiontodo_lost_keeps_the_plan_the_agent_replays(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("replayed")])
        await soon(lambda: _stored_equals(client, session_id, [("replayed", TodoStatus.PENDING, TodoPriority.MEDIUM)]))
        await client.remove_session(session_id)

        await proxied.conn.load_session(cwd=str(Path.cwd()), session_id=session_id, mcp_servers=[])

        await soon(lambda: _stored_equals(client, session_id, [("replayed", TodoStatus.PENDING, TodoPriority.MEDIUM)]))


async def test_a_session_removed_by_another_client_comes_back_with_the_agents_next_plan(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("first")])
        await soon(lambda: _exists(client, session_id))
        await client.remove_session(session_id)

        await proxied.send_plans(session_id, [entry("second")])
        await soon(lambda: _stored_equals(client, session_id, [("second", TodoStatus.PENDING, TodoPriority.MEDIUM)]))

        # ...and it is watched again: a change by someone else still reaches the editor.
        await client.add_todo(session_id, Todo(content="third"))
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["second", "third"]])


async def test_a_session_id_sessiontodo_refuses_is_forwarded_only(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        response = await proxied.conn.new_session(cwd=str(Path.cwd()), mcp_servers=[], wantedSessionId="has/slash")
        assert response.session_id == "has/slash"
        await proxied.send_plans("has/slash", [entry("still shown")])
        assert proxied.editor.contents("has/slash") == [["still shown"]]

        ordinary = await proxied.new_session()
        await proxied.send_plans(ordinary, [entry("stored")])
        await soon(lambda: _stored_equals(client, ordinary, [("stored", TodoStatus.PENDING, TodoPriority.MEDIUM)]))
        assert [s.session_id for s in await client.list_sessions()] == [ordinary]


async def test_closing_a_session_keeps_its_plan_and_releases_only_the_proxys_resources(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("stays")])
        await soon(lambda: _stored_contents(client, session_id, ["stays"]))

        await proxied.conn.close_session(session_id=session_id)

        await proxied.logged(f"session {session_id} closed")
        assert await stored(client, session_id) == [("stays", TodoStatus.PENDING, TodoPriority.MEDIUM)]
        # Loading it again replays the agent's plan, which stays the stored one.
        proxied.log.clear()
        await proxied.conn.load_session(cwd=str(Path.cwd()), session_id=session_id, mcp_servers=[])
        await proxied.logged(f"session {session_id}: watching")
        await client.add_todo(session_id, Todo(content="after the load"))
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["stays", "after the load"]])


async def test_deleting_a_session_removes_it_from_sessiontodo(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("soon gone")])
        await soon(lambda: _exists(client, session_id))

        assert await proxied.request("session/delete", {"sessionId": session_id}) == {}

        await soon(lambda: _gone(client, session_id))


async def test_a_plan_sessiontodo_refuses_pauses_mirroring_until_the_agent_sends_one_it_accepts(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("accepted")])
        await soon(lambda: _stored_contents(client, session_id, ["accepted"]))

        huge = [entry(f"step {n}") for n in range(1500)]  # over the 1,000-todo limit
        await proxied.send_plans(session_id, huge)
        await proxied.logged("does not hold the agent's latest plan")
        await client.add_todo(session_id, Todo(content="edit elsewhere while paused"))

        await proxied.send_plans(session_id, [entry("accepted again")])
        merged = ["accepted again", "edit elsewhere while paused"]  # an acknowledged edit is never undone
        await soon(lambda: _stored_contents(client, session_id, merged))
        await client.add_todo(session_id, Todo(content="fresh edit elsewhere"))
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [[*merged, "fresh edit elsewhere"]])

        shown = proxied.editor.contents(session_id)
        assert shown[2:] == [["accepted again"], merged, [*merged, "fresh edit elsewhere"]]
        assert [len(plan) for plan in shown[:2]] == [1, 1500], "nothing from sessiontodo was shown while paused"


async def test_an_entry_sessiontodo_refuses_pauses_mirroring_as_well(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("x" * 5000)])  # over the 4,096-character limit
        await proxied.logged("does not hold the agent's latest plan")
        await client.add_todo(session_id, Todo(content="edit while paused"))
        await proxied.send_plans(session_id, [entry("fine")])
        await soon(lambda: _stored_contents(client, session_id, ["edit while paused", "fine"]))
        await client.add_todo(session_id, Todo(content="fresh"))
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["edit while paused", "fine", "fresh"]])
        assert [plan[-1][:5] for plan in proxied.editor.contents(session_id)] == ["xxxxx", "fine", "fine", "fresh"]


async def _gone(client: TodoClient, session_id: str) -> bool:
    return not await _exists(client, session_id)


async def test_plans_reach_the_editor_while_sessiontodo_is_down_and_are_stored_once_it_is_back(
    start, open_editor
) -> None:
    port = free_port()
    fast_retries = {
        "SESSIONTODO_ACP_RETRY_INITIAL": "0.1",
        "SESSIONTODO_ACP_RETRY_MAX": "0.5",
        "SESSIONTODO_ACP_RETRY_ATTEMPTS": "1000",
    }
    async with open_editor(f"127.0.0.1:{port}", **fast_retries) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("draft")], [entry("final")])
        assert proxied.editor.contents(session_id) == [["draft"], ["final"]]
        await soon(lambda: any("retrying" in line for line in proxied.log))

        running = await start(port=port)
        async with TodoClient.connect(running.address) as client:
            await soon(lambda: _stored_equals(client, session_id, [("final", TodoStatus.PENDING, TodoPriority.MEDIUM)]))


async def test_the_latest_plan_that_gave_up_while_sessiontodo_was_down_is_stored_once_it_is_back(
    tmp_path: Path, open_editor
) -> None:
    flags = ("--store", f"sqlite:///{tmp_path / 'todos.db'}", "--shutdown-grace", "1")
    server = await asyncio.to_thread(ServerProcess(*flags).start)
    quick_give_up = {
        "SESSIONTODO_ACP_RETRY_INITIAL": "0.05",
        "SESSIONTODO_ACP_RETRY_MAX": "0.2",
        "SESSIONTODO_ACP_RETRY_ATTEMPTS": "3",
    }
    try:
        async with (
            open_editor(server.address, **quick_give_up) as proxied,
            TodoClient.connect(server.address) as client,
        ):
            kept, deleted = await proxied.new_session(), await proxied.new_session()
            await proxied.send_plans(kept, [entry("v1")])
            await proxied.send_plans(deleted, [entry("d1")])
            await soon(lambda: _stored_contents(client, kept, ["v1"]))
            await soon(lambda: _stored_contents(client, deleted, ["d1"]))
            revision_of_v1 = (await client.get_todos(kept)).revision

            assert await asyncio.to_thread(server.stop) == 0
            await proxied.send_plans(kept, [entry("v2")], [entry("v3")])
            await proxied.send_plans(deleted, [entry("d2")])
            await proxied.logged(f"session {kept}: storing a plan of 1 entries failed after 2 retries; kept")
            await proxied.logged(f"session {deleted}: storing a plan of 1 entries failed after 2 retries; kept")
            assert await proxied.request("session/delete", {"sessionId": deleted}) == {}
            await proxied.logged(f"session {deleted}: removing the deleted session failed after")

            server = await asyncio.to_thread(ServerProcess(*flags, port=server.port).start)
            await soon(lambda: _stored_contents(client, kept, ["v3"]))
            await proxied.logged(f"session {kept}: the agent's plan is stored again; mirroring resumes")

            assert (await client.get_todos(kept)).revision == revision_of_v1 + 1, "v2 never overwrote anything"
            assert await _stored_contents(client, deleted, ["d1"]), "nothing was sent for the deleted session"
    finally:
        server.stop()


async def test_unknown_methods_reach_the_agent_and_their_answers_reach_the_editor(server, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        answer = await proxied.conn.ext_method("sessiontodo_test/echo", {"nested": {"x": [1, "ü"]}})
        assert answer == {"method": "sessiontodo_test/echo", "params": {"nested": {"x": [1, "ü"]}}}


async def test_every_byte_passes_through_unchanged_and_nothing_else_reaches_stdout(raw_proxy) -> None:
    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"x/unknown","params":{"a":  1,"\xc3\xbc":"\xc3\xa9"},"extra":true}\n',
        b'{ "jsonrpc" : "2.0", "method" : "session/update", "params" : {"sessionId":"s-1","update":'
        b'{"sessionUpdate":"plan","entries":[{"content":"c","status":"pending","priority":"low","x":1}]}} }\n',
        b"not json at all\n",
        b"\n",
        b'{"jsonrpc":"2.0","id":"r","result":null}',
    ]
    data = b"".join(lines)
    code, stdout = await raw_proxy(["cat"], data, SESSIONTODO_ACP_LOG_LEVEL="DEBUG")
    assert code == 0
    assert stdout == data


async def test_a_line_from_the_editor_over_the_limit_is_refused_whole_with_a_json_rpc_error(raw_proxy) -> None:
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x/big", "params": {"blob": "y" * 300_000}}).encode()
    after = b'{"jsonrpc":"2.0","method":"x/after"}\n'
    code, stdout = await raw_proxy(["cat"], big + b"\n" + after, SESSIONTODO_ACP_MAX_LINE_BYTES="4096")
    assert code == 0
    refusal, forwarded = stdout.splitlines(keepends=True)
    assert json.loads(refusal)["error"]["code"] == -32600
    assert json.loads(refusal)["id"] is None
    assert forwarded == after, "nothing of the long line reached the agent, the next line did"


async def test_a_line_from_the_agent_over_the_limit_is_refused_whole_too(raw_proxy) -> None:
    agent = "import sys; print('[' + '1,' * 150000 + '1]', flush=True); sys.stdout.write(sys.stdin.readline())"
    after = b'{"jsonrpc":"2.0","method":"x/after"}\n'
    code, stdout = await raw_proxy([sys.executable, "-c", agent], after, SESSIONTODO_ACP_MAX_LINE_BYTES="4096")
    assert code == 0
    assert stdout == after


async def test_a_token_in_plaintext_to_another_host_is_refused_at_start_in_one_line() -> None:
    agent = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"]
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "sessiontodo_acp", "--", *agent],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SESSIONTODO_ACP_ADDRESS": "10.1.2.3:50051", "SESSIONTODO_ACP_TOKEN": "secret"},
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(b'{"jsonrpc":"2.0","method":"x"}\n'), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 2
    assert stdout == b""  # nothing forwarded: the editor sees the proxy fail, not a session without plans
    assert stderr.decode().splitlines() == [
        "sessiontodo-acp-proxy: refusing to send a bearer token in plaintext to 10.1.2.3:50051: use TLS (--tls, "
        "--ca-file) or a loopback address"
    ]


async def test_the_proxy_exits_with_the_agents_exit_code(raw_proxy) -> None:
    code, stdout = await raw_proxy([sys.executable, "-c", "import sys; sys.exit(7)"], b"")
    assert (code, stdout) == (7, b"")


async def test_a_missing_agent_command_exits_with_127(raw_proxy) -> None:
    code, _ = await raw_proxy(["/nonexistent/agent"], b"")
    assert code == 127


async def test_an_agent_that_ignores_the_end_of_its_input_is_stopped_and_nothing_is_left_running(
    raw_proxy, tmp_path: Path
) -> None:
    pid_file = tmp_path / "agent.pid"
    stubborn = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
    code, _ = await raw_proxy(
        [sys.executable, "-c", stubborn, str(pid_file)], b"", SESSIONTODO_ACP_AGENT_EXIT_TIMEOUT="0.5"
    )
    assert code == 128 + 15  # SIGTERM
    assert not _alive(int(pid_file.read_text()))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_a_signal_to_the_proxy_stops_the_agent_and_the_proxy_reports_it(tmp_path: Path) -> None:
    pid_file = tmp_path / "agent.pid"
    waiting = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiontodo_acp",
        "--",
        sys.executable,
        "-c",
        waiting,
        str(pid_file),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "SESSIONTODO_ACP_ADDRESS": "127.0.0.1:1"},
    )
    try:
        await soon(lambda: pid_file.exists() and pid_file.read_text() != "")
        process.terminate()
        code = await asyncio.wait_for(process.wait(), 20)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert code == 128 + 15
    assert not _alive(int(pid_file.read_text()))


def test_the_command_line_needs_an_agent_command(capsys) -> None:
    from sessiontodo_acp.launch import main

    with pytest.raises(SystemExit) as exit:
        main(["--sessiontodo-address", "localhost:1"])
    assert exit.value.code == 2
    assert "give the agent command after --" in capsys.readouterr().err


def test_flags_and_the_agent_command_are_split_at_the_double_dash() -> None:
    from sessiontodo_acp.launch import split_command

    assert split_command(["--address", "h:1", "--", "agent", "--address", "x"]) == (
        ["--address", "h:1"],
        ["agent", "--address", "x"],
    )


def test_every_setting_is_a_flag_derived_from_the_settings_model(monkeypatch) -> None:
    from sessiontodo_acp.settings import ProxySettings

    monkeypatch.setenv("SESSIONTODO_ACP_RETRY_ATTEMPTS", "3")
    settings = ProxySettings.from_flags(
        [
            *("--sessiontodo-address", "localhost:1", "--max-line-bytes", "4096"),
            *("--retry-deadline", "7", "--agent-exit-timeout", "1"),
        ]
    )
    assert (settings.sessiontodo_address, settings.max_line_bytes) == ("localhost:1", 4096)
    assert settings.retry_deadline == 7.0
    assert (settings.agent_exit_timeout, settings.retry_attempts) == (1.0, 3)
    assert set(ProxySettings.model_fields) <= {
        "sessiontodo_address",
        "log_level",
        "agent_exit_timeout",
        "drain_timeout",
        "retry_initial",
        "retry_max",
        "retry_attempts",
        "retry_deadline",
        "max_line_bytes",
        "idle_ttl",
        "tls",
        "ca_file",
        "client_cert",
        "client_key",
        "token",
        "token_file",
    }


def test_an_invalid_flag_is_a_usage_error(capsys) -> None:
    from sessiontodo_acp.settings import ProxySettings

    with pytest.raises((SystemExit, ValueError)) as refused:  # a ValueError: launch's main makes it exit 2
        ProxySettings.from_flags(["--max-line-bytes", "12"])
    if isinstance(refused.value, SystemExit):
        assert refused.value.code == 2


async def test_a_session_changed_elsewhere_after_the_agents_last_plan_is_shown_on_load(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as first:
        session_id = await first.new_session()
        await first.send_plans(session_id, [entry("the agent's plan")])
        await soon(lambda: _stored_contents(client, session_id, ["the agent's plan"]))

    await client.add_todo(session_id, Todo(content="added while no editor was open"), origin="another-backend")

    async with open_editor(server.address) as second:  # a fresh agent: nothing to replay
        await second.conn.load_session(cwd=str(Path.cwd()), session_id=session_id, mcp_servers=[])
        await soon(lambda: second.editor.plans[session_id] != [])
        assert second.editor.contents(session_id) == [["the agent's plan", "added while no editor was open"]]


async def test_reloading_a_session_last_changed_by_the_agent_shows_nothing(server, client, open_editor) -> None:
    async with open_editor(server.address) as first:
        session_id = await first.new_session()
        await first.send_plans(session_id, [entry("the agent's plan")])
        await soon(lambda: _stored_contents(client, session_id, ["the agent's plan"]))

    async with open_editor(server.address) as second:
        await second.request("session/load", {"sessionId": session_id, "cwd": str(Path.cwd()), "mcpServers": []})
        await client.add_todo(session_id, Todo(content="later"), origin="another-backend")
        await soon(lambda: second.editor.plans[session_id] != [])
        assert second.editor.contents(session_id) == [["the agent's plan", "later"]], "no injected plan came first"


async def test_entry_and_plan_meta_round_trip_through_sessiontodo_and_the_agents_keys_stay_its_own(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        agent_meta: dict[str, Any] = {"example.com/estimate": {"hours": 3}, "todoId": "the-agent's-own"}
        plan = {"entries": [{**entry("Estimate"), "_meta": agent_meta}], "_meta": {"example.com/planner": "v2"}}
        await proxied.send_plans(session_id, plan)
        await soon(lambda: _stored_contents(client, session_id, ["Estimate"]))
        (stored_todo,) = (await client.get_todos(session_id)).todos
        assert stored_todo.id != "the-agent's-own"

        await client.add_todo(session_id, Todo(content="from elsewhere"), origin="another-backend")

        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["Estimate", "from elsewhere"]])
        notification = proxied.editor.raw_plans[session_id][-1]
        assert notification.get("_meta") == {"example.com/planner": "v2"}
        assert notification["entries"][0]["_meta"] == {**agent_meta, "sessiontodo/todoId": stored_todo.id}


async def test_sessions_the_proxy_creates_expire_after_its_idle_ttl(server, client, open_editor) -> None:
    async with open_editor(server.address, SESSIONTODO_ACP_IDLE_TTL="3600") as proxied:
        session_id = await proxied.new_session()
        await soon(lambda: _exists(client, session_id))
        assert (await client.get_session(session_id)).idle_ttl == 3600


async def test_a_session_loaded_right_after_it_was_closed_stays_mirrored(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("replayed after the close")])
        await soon(lambda: _stored_contents(client, session_id, ["replayed after the close"]))
        await client.replace_todos(session_id, [Todo(content="older elsewhere")], origin="another-backend")

        load = {"sessionId": session_id, "cwd": str(Path.cwd()), "mcpServers": []}
        await asyncio.gather(proxied.conn.close_session(session_id=session_id), proxied.request("session/load", load))

        await soon(lambda: _stored_contents(client, session_id, ["replayed after the close"]))
        await client.add_todo(session_id, Todo(content="still watched"), origin="another-backend")
        await soon(lambda: proxied.editor.contents(session_id)[-1:] == [["replayed after the close", "still watched"]])

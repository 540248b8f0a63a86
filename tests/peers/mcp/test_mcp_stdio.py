"""sessiontodo-mcp over stdio, as an agent launches it, driven by the MCP SDK's client against a real server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import types
from mcp.shared.exceptions import McpError
from pydantic import AnyUrl

from sessiontodo_client import Todo, TodoClient, TodoStatus
from sessiontodo_mcp import resource_uri
from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import error_text, stdio_peer
from tests.support import eventually, free_port

pytestmark = pytest.mark.process

PLAN = [
    {"content": "Write the failing test", "status": "completed", "priority": "high"},
    {"content": "Make it pass", "status": "in_progress"},
    {"content": "Update the docs", "status": "pending", "priority": "low"},
]


async def test_todo_write_stores_the_list_in_the_session_named_by_session_id(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    async with stdio_peer(server.address, "--session-id", "plan-1", log=gateway_log) as peer:
        await peer.call("todo_write", todos=PLAN)
    stored = await client.get_todos("plan-1")
    assert [(t.content, t.status, t.priority) for t in stored.todos] == [
        ("Write the failing test", "completed", "high"),
        ("Make it pass", "in_progress", "medium"),
        ("Update the docs", "pending", "low"),
    ]


async def test_writes_carry_the_origin_mcp(server: RunningServer, client: TodoClient, gateway_log: Path) -> None:
    await client.create_session("plan-origin")
    changes = client.watch("plan-origin", after_revision=0)
    async with stdio_peer(server.address, "--session-id", "plan-origin", log=gateway_log) as peer:
        await peer.call("todo_write", todos=PLAN)
    change = await anext(changes)
    await changes.aclose()
    assert change.origin == "mcp"


async def test_a_process_without_session_id_gets_a_new_session_labelled_with_the_clients_name(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    async with stdio_peer(server.address, log=gateway_log, client_name="claude-code") as peer:
        session_id = await peer.session_id()
    session = await client.get_session(session_id)
    assert session.labels == {"client": "claude-code"}


async def test_todo_read_returns_what_another_client_wrote(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    await client.create_session("shared")
    await client.replace_todos("shared", [Todo(id="a", content="Written over gRPC")])
    async with stdio_peer(server.address, "--session-id", "shared", log=gateway_log) as peer:
        result = await peer.call("todo_read")
    assert result.structuredContent == {
        "session_id": "shared",
        "revision": 1,
        "todos": [{"id": "a", "content": "Written over gRPC", "status": "pending", "priority": "medium"}],
    }


async def test_todo_write_keeps_the_ids_it_is_given(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, log=gateway_log) as peer:
        first = await peer.call("todo_write", todos=[{"content": "One", "status": "pending"}])
        assert first.structuredContent is not None
        kept = first.structuredContent["todos"][0]["id"]
        second = await peer.call("todo_write", todos=[{"id": kept, "content": "One, renamed", "status": "completed"}])
    assert second.structuredContent is not None
    assert second.structuredContent["todos"][0]["id"] == kept


async def test_todo_update_changes_one_todo_and_leaves_the_others(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    await client.create_session("upd")
    await client.replace_todos("upd", [Todo(id="a", content="First"), Todo(id="b", content="Second")])
    async with stdio_peer(server.address, "--session-id", "upd", log=gateway_log) as peer:
        await peer.call("todo_update", id="b", status="completed")
    stored = await client.get_todos("upd")
    assert [(t.id, t.status) for t in stored.todos] == [("a", TodoStatus.PENDING), ("b", TodoStatus.COMPLETED)]


async def test_todo_update_of_an_unknown_id_is_a_not_found_tool_error(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, log=gateway_log) as peer:
        result = await peer.call("todo_update", id="nope", status="completed")
    assert error_text(result).startswith("not found: todo 'nope' not found")


async def test_todo_update_without_a_change_is_an_invalid_tool_error(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, log=gateway_log) as peer:
        result = await peer.call("todo_update", id="a")
    assert error_text(result) == "invalid: give at least one of content, status and priority to change"


async def test_todo_update_with_a_misspelt_argument_is_refused_rather_than_half_applied(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    """A model writing ``state=`` for ``status=`` must not get the todo renamed and its status dropped."""
    await client.create_session("typo")
    await client.replace_todos("typo", [Todo(id="a", content="Write the parser")])
    async with stdio_peer(server.address, "--session-id", "typo", log=gateway_log) as peer:
        result = await peer.call("todo_update", id="a", content="Parser written", state="completed")
    assert error_text(result).startswith("invalid: Additional properties are not allowed ('state' was unexpected)")
    stored = await client.get_todos("typo")
    assert [(t.content, t.status) for t in stored.todos] == [("Write the parser", TodoStatus.PENDING)]


@pytest.mark.parametrize(
    ("todos", "reason"),
    [
        ([{"content": "x", "status": "done"}], "invalid: todos[0].status: 'done' is not one of"),
        ([{"content": "", "status": "pending"}], "invalid: todos[0].content: '' should be non-empty"),
        ([{"status": "pending"}], "invalid: todos[0]: 'content' is a required property"),
        ([{"content": "x", "status": "pending", "activeForm": "x"}], "invalid: todos[0]: Additional properties"),
        (
            [{"id": "x", "content": "a", "status": "pending"}, {"id": "x", "content": "b", "status": "pending"}],
            "invalid: todos[1].id: duplicate id 'x'",
        ),
    ],
)
async def test_a_bad_list_is_an_invalid_tool_error_naming_the_field_and_changes_nothing(
    server: RunningServer, client: TodoClient, gateway_log: Path, todos: list[dict[str, str]], reason: str
) -> None:
    await client.create_session("bad")
    await client.replace_todos("bad", [Todo(content="Kept")])
    async with stdio_peer(server.address, "--session-id", "bad", log=gateway_log) as peer:
        result = await peer.call("todo_write", todos=todos)
    assert error_text(result).startswith(reason)
    assert [t.content for t in (await client.get_todos("bad")).todos] == ["Kept"]


async def test_a_write_at_a_stale_revision_is_a_conflict_and_changes_nothing(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    await client.create_session("race")
    async with stdio_peer(server.address, "--session-id", "race", log=gateway_log) as peer:
        read = await peer.call("todo_read")
        assert read.structuredContent is not None
        await client.replace_todos("race", [Todo(content="Someone else's")])
        result = await peer.call("todo_write", todos=PLAN, expected_revision=read.structuredContent["revision"])
    assert error_text(result).startswith("conflict: session 'race' is at revision 1, not 0")
    assert [t.content for t in (await client.get_todos("race")).todos] == ["Someone else's"]


async def test_an_unknown_tool_is_a_tool_error(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, log=gateway_log) as peer:
        result = await peer.call("todo_delete_everything")
    assert error_text(result) == (
        "not found: no tool 'todo_delete_everything'; the tools are todo_read, todo_write, todo_update, "
        "task_create, task_get, task_list, task_update, task_claim, task_release"
    )


async def test_an_unreachable_sessiontodo_is_an_unavailable_tool_error(gateway_log: Path) -> None:
    async with stdio_peer(f"127.0.0.1:{free_port()}", log=gateway_log) as peer:
        result = await peer.call("todo_read")
    assert error_text(result).startswith("unavailable: sessiontodo cannot be reached right now")


async def test_the_tools_are_listed_with_their_schemas(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, log=gateway_log) as peer:
        tools = (await peer.session.list_tools()).tools
    assert {tool.name: tool.inputSchema.get("required", []) for tool in tools} == {
        "todo_read": [],
        "todo_write": ["todos"],
        "todo_update": ["id"],
        "task_create": ["subject"],
        "task_get": ["task_id"],
        "task_list": [],
        "task_update": ["task_id"],
        "task_claim": ["owner"],
        "task_release": ["task_id", "owner"],
    }


async def test_the_resource_lists_the_sessions_own_list(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, "--session-id", "res", log=gateway_log) as peer:
        resources = (await peer.session.list_resources()).resources
    assert [str(resource.uri) for resource in resources] == ["sessiontodo://sessions/res/todos"]


async def test_reading_the_resource_returns_the_list_as_json(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    await client.create_session("res")
    await client.replace_todos("res", [Todo(id="a", content="Read me")])
    async with stdio_peer(server.address, "--session-id", "res", log=gateway_log) as peer:
        contents = (await peer.session.read_resource(AnyUrl(resource_uri("res")))).contents
    assert isinstance(contents[0], types.TextResourceContents)
    assert json.loads(contents[0].text)["todos"] == [
        {"id": "a", "content": "Read me", "status": "pending", "priority": "medium"}
    ]


async def test_another_sessions_resource_is_not_found(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    await client.create_session("someone-else")
    async with stdio_peer(server.address, "--session-id", "mine", log=gateway_log) as peer:
        with pytest.raises(McpError) as raised:
            await peer.session.read_resource(AnyUrl(resource_uri("someone-else")))
    assert raised.value.error.code == -32002


async def test_a_subscription_is_notified_of_a_change_made_over_grpc(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    async with stdio_peer(server.address, "--session-id", "watched", log=gateway_log) as peer:
        uri = resource_uri("watched")
        await peer.session.subscribe_resource(AnyUrl(uri))
        await client.replace_todos("watched", [Todo(content="Changed elsewhere")], origin="grpc-test")
        assert await peer.updates.next() == uri


async def test_an_update_names_the_revision_it_is_about_and_a_read_names_the_revision_it_returns(
    server: RunningServer, client: TodoClient, gateway_log: Path
) -> None:
    async with stdio_peer(server.address, "--session-id", "revised", log=gateway_log) as peer:
        uri = AnyUrl(resource_uri("revised"))
        await peer.session.subscribe_resource(uri)
        first = await client.replace_todos("revised", [Todo(content="one")], origin="grpc-test")
        second = await client.replace_todos("revised", [Todo(content="two")], origin="grpc-test")

        updates = [await peer.updates.next_update(), await peer.updates.next_update()]
        assert [update.model_dump(by_alias=True)["_meta"]["sessiontodo/revision"] for update in updates] == [
            first.revision,
            second.revision,
        ]
        read = await peer.session.read_resource(uri)
        assert read.contents[0].model_dump(by_alias=True)["_meta"]["sessiontodo/revision"] == second.revision


async def test_unsubscribing_ends_the_watch_behind_the_subscription(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, "--session-id", "quiet", log=gateway_log) as peer:
        uri = AnyUrl(resource_uri("quiet"))
        await peer.session.subscribe_resource(uri)
        await eventually(lambda: server.book.watcher_count == 1)
        await peer.session.unsubscribe_resource(uri)
        await eventually(lambda: server.book.watcher_count == 0)


async def test_the_end_of_the_mcp_session_ends_its_watches(server: RunningServer, gateway_log: Path) -> None:
    async with stdio_peer(server.address, "--session-id", "left-open", log=gateway_log) as peer:
        await peer.session.subscribe_resource(AnyUrl(resource_uri("left-open")))
        await eventually(lambda: server.book.watcher_count == 1)
    await eventually(lambda: server.book.watcher_count == 0)

"""sessiontodo-mcp over streamable HTTP: one sessiontodo session per MCP session, and the front door."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from pydantic import AnyUrl

from sessiontodo_client import Todo, TodoClient
from sessiontodo_mcp import SESSION_HEADER, resource_uri
from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import HttpGateway, http_peer, todo_contents
from tests.support import eventually, terminate

pytestmark = pytest.mark.process

PLAN = [{"content": "Plan over HTTP", "status": "in_progress", "priority": "high"}]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "curl", "version": "1"}},
}
ACCEPT = {"accept": "application/json, text/event-stream"}


async def test_each_mcp_session_gets_its_own_sessiontodo_session(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url) as first, http_peer(http_gateway.url) as second:
        assert await first.session_id() != await second.session_id()


async def test_a_list_written_in_one_mcp_session_is_not_seen_in_another(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url) as writer, http_peer(http_gateway.url) as other:
        await writer.call("todo_write", todos=PLAN)
        assert todo_contents(await other.call("todo_read")) == []


async def test_an_mcp_session_writes_to_its_own_session_labelled_with_the_clients_name(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    async with http_peer(http_gateway.url, client_name="qwen-code") as peer:
        await peer.call("todo_write", todos=PLAN)
        session = await client.get_session(await peer.session_id())
    assert session.labels == {"client": "qwen-code"}


async def test_the_session_header_resumes_a_session_across_mcp_sessions(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    headers = {SESSION_HEADER: "resumed-plan"}
    async with http_peer(http_gateway.url, headers=headers) as first:
        await first.call("todo_write", todos=PLAN)
    async with http_peer(http_gateway.url, headers=headers) as second:
        assert todo_contents(await second.call("todo_read")) == ["Plan over HTTP"]


async def test_a_subscription_over_http_is_notified_of_a_change_made_over_grpc(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    async with http_peer(http_gateway.url) as peer:
        session_id = await peer.session_id()
        uri = resource_uri(session_id)
        await peer.session.subscribe_resource(AnyUrl(uri))
        await client.replace_todos(session_id, [Todo(content="Changed elsewhere")])
        assert await peer.updates.next() == uri


async def test_a_subscription_hears_of_another_agents_write_to_the_same_session(
    http_gateway: HttpGateway,
) -> None:
    headers = {SESSION_HEADER: "pair"}
    async with (
        http_peer(http_gateway.url, headers=headers) as watcher,
        http_peer(http_gateway.url, headers=headers) as writer,
    ):
        uri = resource_uri(await watcher.session_id())
        await watcher.session.subscribe_resource(AnyUrl(uri))
        await writer.call("todo_write", todos=PLAN)
        assert await watcher.updates.next() == uri


async def test_a_host_header_other_than_an_address_or_localhost_is_refused(http_gateway: HttpGateway) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            http_gateway.url, json=INITIALIZE, headers={**ACCEPT, "host": "todos.attacker.example"}
        )
    assert response.status_code == 403


async def test_a_foreign_origin_is_refused(http_gateway: HttpGateway) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(
            http_gateway.url, json=INITIALIZE, headers={**ACCEPT, "origin": "https://evil.example"}
        )
    assert response.status_code == 403


async def test_an_initialize_from_a_plain_http_client_is_served(http_gateway: HttpGateway) -> None:
    async with httpx.AsyncClient() as http:
        response = await http.post(http_gateway.url, json=INITIALIZE, headers=ACCEPT)
    assert response.status_code == 200


async def initialized(http: httpx.AsyncClient, url: str) -> dict[str, str]:
    """The headers of a new MCP session, initialized."""
    opened = await http.post(url, json=INITIALIZE, headers=ACCEPT)
    assert opened.status_code == 200, opened.text
    headers = {**ACCEPT, "mcp-session-id": opened.headers["mcp-session-id"]}
    done = await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert done.status_code == 202
    return headers


MISHANDLED = [
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', -32600),  # an object id: the SDK answered 202
    (b'[{"jsonrpc": "2.0", "id": [1], "method": "tools/list"}]', -32600),
    (b"[" * 100_000 + b"]" * 100_000, -32700),  # nested 100k deep: the SDK answered 500
    (
        b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        -32700,
    ),
]


async def test_bodies_the_sdk_would_mishandle_are_answered_400_with_a_json_rpc_error(
    http_gateway: HttpGateway,
) -> None:
    answers = []
    async with httpx.AsyncClient() as http:
        headers = await initialized(http, http_gateway.url)
        for body, _ in MISHANDLED:
            answer = await http.post(
                http_gateway.url, content=body, headers={**headers, "content-type": "application/json"}
            )
            answers.append((answer.status_code, answer.json()["error"]["code"], answer.json()["id"]))
        still_served = await http.post(
            http_gateway.url, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=headers
        )
    assert answers == [(400, code, None) for _, code in MISHANDLED]
    assert still_served.status_code == 200


async def test_mcp_sessions_beyond_the_limit_are_refused_until_one_ends(
    server: RunningServer, gateway_log: Path
) -> None:
    gateway = await HttpGateway(server.address, "--max-sessions", "2", log=gateway_log).start()
    try:
        async with httpx.AsyncClient() as http:
            first = await initialized(http, gateway.url)
            await initialized(http, gateway.url)
            refused = await http.post(gateway.url, json=INITIALIZE, headers=ACCEPT)
            ended = await http.delete(gateway.url, headers=first)
            admitted = await http.post(gateway.url, json=INITIALIZE, headers=ACCEPT)
    finally:
        gateway.stop()
    assert refused.status_code == 503
    assert "Too many open sessions" in refused.text
    assert ended.status_code == 200
    assert admitted.status_code == 200


async def test_with_a_client_token_a_request_without_it_is_unauthorized(
    server: RunningServer, tmp_path: Path, gateway_log: Path
) -> None:
    token_file = tmp_path / "mcp-token"
    token_file.write_text(os.urandom(16).hex())
    gateway = await HttpGateway(server.address, "--http-token-file", str(token_file), log=gateway_log).start()
    try:
        async with httpx.AsyncClient() as http:
            response = await http.post(gateway.url, json=INITIALIZE, headers=ACCEPT)
    finally:
        gateway.stop()
    assert response.status_code == 401


async def test_with_a_client_token_a_client_presenting_it_is_served(
    server: RunningServer, tmp_path: Path, gateway_log: Path
) -> None:
    token = os.urandom(16).hex()
    token_file = tmp_path / "mcp-token"
    token_file.write_text(token)
    gateway = await HttpGateway(server.address, "--http-token-file", str(token_file), log=gateway_log).start()
    try:
        async with http_peer(gateway.url, headers={"authorization": f"Bearer {token}"}) as peer:
            result = await peer.call("todo_write", todos=PLAN)
    finally:
        gateway.stop()
    assert todo_contents(result) == ["Plan over HTTP"]


async def test_sigterm_stops_the_server_while_a_client_holds_a_subscription(http_gateway: HttpGateway) -> None:
    assert http_gateway.process is not None
    async with http_peer(http_gateway.url) as peer:
        await peer.session.subscribe_resource(AnyUrl(resource_uri(await peer.session_id())))
        stopped_by_sigterm = await asyncio.to_thread(terminate, http_gateway.process)
    assert stopped_by_sigterm


async def test_a_client_that_says_goodbye_leaves_no_error_in_the_log(server: RunningServer, gateway_log: Path) -> None:
    gateway = await HttpGateway(server.address, "--log-level", "debug", log=gateway_log).start()
    try:
        async with http_peer(gateway.url) as peer:
            await peer.call("todo_read")
        # The SDK's stream writer logs this last, after the ERROR it logged for the goodbye before.
        await eventually(lambda: "Closing standalone SSE writer" in logged(gateway_log), timeout=30)
    finally:
        gateway.stop()

    assert "ERROR" not in logged(gateway_log)
    assert "Traceback" not in logged(gateway_log)


def logged(log: Path) -> str:
    return log.read_text()


async def test_resource_templates_are_listed_none_rather_than_method_not_found(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url) as peer:
        templates = await peer.session.list_resource_templates()

    assert templates.resourceTemplates == []

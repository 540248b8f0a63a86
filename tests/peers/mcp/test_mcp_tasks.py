"""The task tools (shaped like Claude Code's Task tools) over streamable HTTP, driven by the MCP SDK's own
client against a real server: several MCP sessions share one list by naming the same sessiontodo session."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp import types

from sessiontodo_client import Todo, TodoClient, TodoStatus
from sessiontodo_mcp import SESSION_HEADER
from tests.peers.mcp.mcp_support import HttpGateway, McpPeer, error_text, http_peer

pytestmark = pytest.mark.process

TEAM = {SESSION_HEADER: "team"}


def structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, result
    assert result.structuredContent is not None, result
    return result.structuredContent


async def create(peer: McpPeer, subject: str, **arguments: Any) -> str:
    """A new task's id."""
    return str(structured(await peer.call("task_create", subject=subject, **arguments))["task"]["id"])


async def test_a_created_task_waits_for_its_blockers_and_is_ready_once_they_are_completed(
    http_gateway: HttpGateway,
) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        parser = await create(peer, "Write the parser", description="LL(1)", active_form="Writing the parser")
        tests = await create(peer, "Write the tests", blocked_by=[parser])
        before = structured(await peer.call("task_list"))["tasks"]
        await peer.call("task_update", task_id=parser, status="completed")
        after = structured(await peer.call("task_get", task_id=tests))["task"]
    assert [(task["subject"], task["blocked_by"], task["ready"]) for task in before] == [
        ("Write the parser", [], True),
        ("Write the tests", [parser], False),
    ]
    assert (after["blocked_by"], after["ready"]) == ([], True)


async def test_add_blocks_makes_another_task_wait_and_deleted_deletes(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        first = await create(peer, "Design")
        second = await create(peer, "Build")
        linked = structured(await peer.call("task_update", task_id=first, add_blocks=[second]))
        waiting = structured(await peer.call("task_get", task_id=second))["task"]
        deleted = structured(await peer.call("task_update", task_id=first, status="deleted"))
        listed = structured(await peer.call("task_list"))["tasks"]
    assert linked["task"]["blocks"] == [second]
    assert waiting["blocked_by"] == [first]
    assert deleted["deleted"] is True
    assert [(task["id"], task["blocked_by"]) for task in listed] == [(second, [])]


async def test_concurrent_claims_from_three_agents_give_each_task_to_exactly_one(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    async with (
        http_peer(http_gateway.url, headers=TEAM) as a,
        http_peer(http_gateway.url, headers=TEAM) as b,
        http_peer(http_gateway.url, headers=TEAM) as c,
    ):
        for number in range(2):
            await create(a, f"Task {number}")
        results = await asyncio.gather(
            *(peer.call("task_claim", owner=name) for peer, name in ((a, "a"), (b, "b"), (c, "c")))
        )
    answers = [structured(result) for result in results]
    claimed = [answer["task"]["id"] for answer in answers if answer["task"] is not None]
    stored = (await client.get_todos("team")).todos
    assert len(claimed) == len(set(claimed)) == 2
    assert sum(answer["nothing_ready"] for answer in answers) == 1
    assert sorted(todo.owner for todo in stored) == sorted(
        answer["task"]["owner"] for answer in answers if answer["task"] is not None
    )


async def test_claiming_a_taken_task_is_refused_naming_who_took_it(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        task = await create(peer, "Only one")
        await peer.call("task_claim", owner="qwen-1", task_id=task)
        refused = await peer.call("task_claim", owner="qwen-2", task_id=task)
    assert error_text(refused).startswith(f"refused: {task} is taken by qwen-1")


async def test_claiming_a_blocked_task_is_refused_naming_its_blockers(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        first = await create(peer, "First")
        second = await create(peer, "Second", blocked_by=[first])
        refused = await peer.call("task_claim", owner="qwen-1", task_id=second)
    assert error_text(refused).startswith(f"refused: {second} is blocked by {first}")


async def test_a_released_task_is_ready_again(http_gateway: HttpGateway) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        task = await create(peer, "Give it back")
        claimed = structured(await peer.call("task_claim", owner="qwen-1", lease_seconds=60))["task"]
        released = structured(await peer.call("task_release", task_id=task, owner="qwen-1"))["task"]
    assert (claimed["owner"], claimed["status"], "lease_expires_at" in claimed) == ("qwen-1", "in_progress", True)
    assert (released["owner"], released["status"], released["ready"]) == ("", "pending", True)


async def test_an_unknown_argument_is_refused_and_changes_nothing(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        refused = await peer.call("task_create", subject="x", addBlockedBy=["1"])
    assert error_text(refused).startswith("invalid: Additional properties are not allowed ('addBlockedBy'")
    assert (await client.get_todos("team")).todos == []


async def test_todo_write_keeps_the_owners_and_blockers_of_the_todos_it_continues(
    http_gateway: HttpGateway, client: TodoClient
) -> None:
    await client.create_session("team")
    await client.replace_todos("team", [Todo(id="a", content="Parse"), Todo(id="b", content="Test", blocked_by=["a"])])
    await client.claim_todo("team", "w1", "a")
    plan = [{"content": "Parse", "status": "completed"}, {"content": "Test", "status": "pending"}]
    async with http_peer(http_gateway.url, headers=TEAM) as peer:
        await peer.call("todo_write", todos=plan)
    stored = (await client.get_todos("team")).todos
    assert [(t.id, t.status, t.owner, t.blocked_by) for t in stored] == [
        ("a", TodoStatus.COMPLETED, "w1", []),
        ("b", TodoStatus.PENDING, "", ["a"]),
    ]

"""An agent's plan through the proxy never undoes a newer acknowledged write, and every plan is stored in order.

A real SDK editor, the proxy process, the SDK test agent and a real sessiontodo server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from sessiontodo_client import ChangeKind, NotFound, Todo, TodoClient, TodoStatus, WatchEvent
from tests.support import ROOT, eventually

pytestmark = pytest.mark.process

WAIT = 30.0


def entry(content: str, status: str = "pending") -> dict[str, Any]:
    return {"content": content, "status": status, "priority": "medium"}


async def contents(client: TodoClient, session_id: str) -> list[tuple[str, TodoStatus | int]]:
    try:
        return [(todo.content, todo.status) for todo in (await client.get_todos(session_id)).todos]
    except NotFound:
        return []


async def test_an_agents_plan_keeps_a_todo_added_elsewhere_after_the_agents_last_plan(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("A")])
        await eventually(lambda: _is(client, session_id, [("A", TodoStatus.PENDING)]), timeout=WAIT)
        await client.add_todo(session_id, Todo(content="X from gRPC"))  # acknowledged

        await proxied.send_plans(session_id, [entry("A", "completed"), entry("B")])

        merged = [("A", TodoStatus.COMPLETED), ("B", TodoStatus.PENDING), ("X from gRPC", TodoStatus.PENDING)]
        await eventually(lambda: _is(client, session_id, merged), timeout=WAIT)
        await eventually(lambda: proxied.editor.contents(session_id)[-1:] == [["A", "B", "X from gRPC"]], timeout=WAIT)


async def test_an_agents_plan_keeps_a_status_changed_elsewhere_on_a_todo_it_left_alone(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("A"), entry("B")])
        await eventually(
            lambda: _is(client, session_id, [("A", TodoStatus.PENDING), ("B", TodoStatus.PENDING)]), timeout=WAIT
        )
        todo_b = (await client.get_todos(session_id)).todos[1]
        await client.update_todo(session_id, todo_b.id, status=TodoStatus.CANCELLED)

        await proxied.send_plans(session_id, [entry("A", "in_progress"), entry("B")])

        expected = [("A", TodoStatus.IN_PROGRESS), ("B", TodoStatus.CANCELLED)]
        await eventually(lambda: _is(client, session_id, expected), timeout=WAIT)
        assert (await client.get_todos(session_id)).todos[1].id == todo_b.id


async def test_every_plan_of_a_burst_is_stored_in_the_agents_order(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await eventually(lambda: _exists(client, session_id), timeout=WAIT)
        seen: list[list[str]] = []
        watching = asyncio.create_task(_record(client, session_id, seen))
        try:
            plans = [[entry(f"step {n}")] for n in range(40)]
            await proxied.send_plans(session_id, *plans)
            await eventually(lambda: seen[-1:] == [["step 39"]], timeout=WAIT)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
        assert seen == [[f"step {n}"] for n in range(40)], "each plan stored once, in order, none coalesced"


async def _record(client: TodoClient, session_id: str, seen: list[list[str]]) -> None:
    event: WatchEvent
    async for event in client.watch(session_id):
        if event.kind in (ChangeKind.TODOS_REPLACED, ChangeKind.TODO_ADDED, ChangeKind.TODO_UPDATED):
            seen.append([todo.content for todo in event.todos])


async def _is(client: TodoClient, session_id: str, expected: list[tuple[str, TodoStatus]]) -> bool:
    return await contents(client, session_id) == expected


async def _exists(client: TodoClient, session_id: str) -> bool:
    return session_id in {session.session_id for session in await client.list_sessions()}


async def test_an_agents_plan_keeps_the_task_graph_fields_of_the_todos_it_matches(server, client, open_editor) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("A"), entry("B"), entry("C")])
        three = [("A", TodoStatus.PENDING), ("B", TodoStatus.PENDING), ("C", TodoStatus.PENDING)]
        await eventually(lambda: _is(client, session_id, three), timeout=WAIT)
        todo_a, todo_b, todo_c = (await client.get_todos(session_id)).todos
        await client.update_todo(
            session_id,
            todo_b.id,
            description="The whole story of B",
            active_form="Doing B",
            owner="ci-agent",
            add_blocked_by=[todo_a.id, todo_c.id],
        )

        await proxied.send_plans(session_id, [entry("A", "completed"), entry("B")])  # and C removed

        await eventually(
            lambda: _is(client, session_id, [("A", TodoStatus.COMPLETED), ("B", TodoStatus.PENDING)]), timeout=WAIT
        )
        kept = (await client.get_todos(session_id)).todos[1]
        assert (kept.id, kept.description, kept.active_form, kept.owner) == (
            todo_b.id,
            "The whole story of B",
            "Doing B",
            "ci-agent",
        )
        assert kept.blocked_by == [todo_a.id], "the blocker the agent removed is dropped, the other kept"


async def test_a_plan_replayed_on_load_keeps_the_task_graph_fields_of_the_todos_it_matches(
    server, client, open_editor
) -> None:
    async with open_editor(server.address) as proxied:
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [entry("A"), entry("B")])
        await eventually(
            lambda: _is(client, session_id, [("A", TodoStatus.PENDING), ("B", TodoStatus.PENDING)]), timeout=WAIT
        )
        todo_a, todo_b = (await client.get_todos(session_id)).todos
        await client.update_todo(session_id, todo_b.id, owner="ci-agent", add_blocked_by=[todo_a.id])

        await proxied.conn.load_session(cwd=str(ROOT), session_id=session_id, mcp_servers=[])  # replays [A, B]
        await proxied.send_plans(session_id, [entry("A"), entry("B"), entry("C")])  # stored after the replay

        three = [("A", TodoStatus.PENDING), ("B", TodoStatus.PENDING), ("C", TodoStatus.PENDING)]
        await eventually(lambda: _is(client, session_id, three), timeout=WAIT)
        kept = (await client.get_todos(session_id)).todos[1]
        assert (kept.id, kept.owner, kept.blocked_by) == (todo_b.id, "ci-agent", [todo_a.id])

"""An ACP agent embedding the publisher and an ACP client embedding the sink, both on the official SDK.

Agent and client talk over a socket pair in this process. The agent's todos live in one
sessiontodo server, the client's in another, so every plan crosses ACP exactly once.
"""

from __future__ import annotations

import asyncio
import socket
from collections import defaultdict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import acp
import grpc
from acp.core import AgentSideConnection
from acp.schema import (
    AgentCapabilities,
    AgentPlanUpdate,
    CloseSessionResponse,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
)

from sessiontodo_acp import PlanPublisher, PlanSink, plan_update_from_todos
from sessiontodo_client import ChangeKind, NotFound, RetryPolicy, Todo, TodoClient, TodoList, TodoStatus, Unavailable
from tests.support import eventually, free_port


class PublishingAgent:
    """An ACP agent whose plans are its sessiontodo lists, shown to the editor by a ``PlanPublisher``."""

    def __init__(self, todos: TodoClient) -> None:
        self._todos = todos
        self.conn: Any = None
        self.publisher: PlanPublisher | None = None
        self._next = 0

    def on_connect(self, conn: Any) -> None:
        self.conn = conn
        self.publisher = PlanPublisher.to_editor(self._todos, conn)

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        capabilities = AgentCapabilities(
            load_session=True, session_capabilities=SessionCapabilities(close=SessionCloseCapabilities())
        )
        return InitializeResponse(protocol_version=acp.PROTOCOL_VERSION, agent_capabilities=capabilities)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        self._next += 1
        session_id = f"agent-{self._next}"
        assert self.publisher is not None
        await self.publisher.session_new(session_id)
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        assert self.publisher is not None
        await self.publisher.session_load(session_id)
        return LoadSessionResponse()

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        assert self.publisher is not None
        await self.publisher.session_close(session_id)
        return CloseSessionResponse()

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        return PromptResponse(stop_reason="end_turn")

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        return None


class StoringEditor:
    """An ACP client that records the plans it is shown and stores them through a ``PlanSink``."""

    def __init__(self, sink: PlanSink) -> None:
        self.sink = sink
        self.plans: dict[str, list[list[str]]] = defaultdict(list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentPlanUpdate):
            self.plans[session_id].append([entry.content for entry in update.entries])
        await self.sink.session_update(session_id, update, **kwargs)

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass
class Pair:
    agent: PublishingAgent
    editor: StoringEditor
    conn: Any
    agent_todos: TodoClient
    editor_todos: TodoClient

    async def new_session(self) -> str:
        session_id = str((await self.conn.new_session(cwd="/", mcp_servers=[])).session_id)
        self.editor.sink.session_new(session_id)
        return session_id


class FirstWriteLags(TodoClient):
    """A client whose first ReplaceTodos waits until ``release`` is set, as on a congested network."""

    def __init__(self, address: str) -> None:
        super().__init__(grpc.aio.insecure_channel(address))
        self._lagged = False
        self.release = asyncio.Event()
        self.lagged_write_done = asyncio.Event()

    async def replace_todos(self, *args: Any, **kwargs: Any) -> TodoList:
        if self._lagged:
            return await super().replace_todos(*args, **kwargs)
        self._lagged = True
        await self.release.wait()
        try:
            return await super().replace_todos(*args, **kwargs)
        finally:
            self.lagged_write_done.set()


@asynccontextmanager
async def connected(agent_address: str, editor_todos_client: TodoClient) -> AsyncIterator[Pair]:
    agent_socket, editor_socket = socket.socketpair()
    agent_reader, agent_writer = await asyncio.open_connection(sock=agent_socket)
    editor_reader, editor_writer = await asyncio.open_connection(sock=editor_socket)
    async with (
        TodoClient.connect(agent_address) as agent_todos,
        editor_todos_client as editor_todos,
        PlanSink(editor_todos, RetryPolicy(initial=0.05, maximum=0.5)) as sink,
    ):
        agent = PublishingAgent(agent_todos)
        agent_conn = AgentSideConnection(cast(acp.Agent, agent), agent_writer, agent_reader, use_unstable_protocol=True)
        editor = StoringEditor(sink)
        conn = acp.connect_to_agent(cast(acp.Client, editor), editor_writer, editor_reader)
        try:
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            yield Pair(agent, editor, conn, agent_todos, editor_todos)
        finally:
            assert agent.publisher is not None
            await agent.publisher.aclose()
            await conn.close()
            await agent_conn.close()


async def contents(client: TodoClient, session_id: str) -> list[str]:
    try:
        return [todo.content for todo in (await client.get_todos(session_id)).todos]
    except NotFound:
        return []
    except Unavailable:
        return ["<unavailable>"]


# Publisher (agent side)


async def test_the_publisher_sends_every_change_of_a_session_in_revision_order(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        session_id = await pair.new_session()
        for n in range(20):
            await pair.agent_todos.add_todo(session_id, Todo(content=f"step {n}"))

        await eventually(lambda: len(pair.editor.plans[session_id]) == 20)
        assert pair.editor.plans[session_id] == [[f"step {n}" for n in range(count)] for count in range(1, 21)]


async def test_the_publisher_sends_a_session_only_its_own_plan(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        first, second = await pair.new_session(), await pair.new_session()
        await asyncio.gather(
            *(pair.agent_todos.add_todo(sid, Todo(content=f"{sid} {n}")) for sid in (first, second) for n in range(5))
        )

        await eventually(lambda: len(pair.editor.plans[first]) == 5 and len(pair.editor.plans[second]) == 5)
        for session_id in (first, second):
            assert all(item.startswith(session_id + " ") for plan in pair.editor.plans[session_id] for item in plan)


async def test_loading_a_session_resends_its_current_plan_to_the_editor(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        await pair.agent_todos.create_session("earlier")
        await pair.agent_todos.replace_todos("earlier", [Todo(content="from before", status=TodoStatus.COMPLETED)])

        await pair.conn.load_session(cwd="/", session_id="earlier", mcp_servers=[])

        await eventually(lambda: pair.editor.plans["earlier"] == [["from before"]])


async def test_a_new_session_becomes_a_sessiontodo_session_closing_keeps_it_and_deleting_removes_it(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        session_id = await pair.new_session()
        assert session_id in {s.session_id for s in await pair.agent_todos.list_sessions()}

        await pair.conn.close_session(session_id=session_id)
        assert session_id in {s.session_id for s in await pair.agent_todos.list_sessions()}
        assert pair.agent.publisher is not None
        assert not pair.agent.publisher.watching(session_id)

        await pair.agent.publisher.session_delete(session_id)
        assert session_id not in {s.session_id for s in await pair.agent_todos.list_sessions()}


# Sink (client side)


async def test_the_sink_applies_a_burst_of_plans_in_the_order_received_and_ends_with_the_last(start) -> None:
    agent_side, editor_side = await start(), await start()
    lagging = FirstWriteLags(editor_side.address)
    async with connected(agent_side.address, lagging) as pair:
        session_id = await pair.new_session()
        await pair.editor.sink.flush(session_id)
        events = pair.editor_todos.watch(session_id)
        assert (await asyncio.wait_for(anext(events), 5)).kind is ChangeKind.SNAPSHOT

        for n in range(100):
            plan = [Todo(content=f"plan {n}"), Todo(content="shared")]
            await pair.agent.conn.session_update(session_id=session_id, update=plan_update_from_todos(plan))
        lagging.release.set()  # the whole burst was sent while the first plan's write was held

        applied: list[int] = []
        try:
            while not applied or applied[-1] != 99:
                event = await asyncio.wait_for(anext(events), 10)
                applied.append(int(event.todos[0].content.removeprefix("plan ")))
        finally:
            await events.aclose()
        await asyncio.wait_for(lagging.lagged_write_done.wait(), 10)
        await pair.editor.sink.flush(session_id)
        assert applied == sorted(set(applied))
        assert await contents(pair.editor_todos, session_id) == ["plan 99", "shared"]


async def test_the_sink_keeps_the_plans_of_different_sessions_apart(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        first, second = await pair.new_session(), await pair.new_session()
        for session_id in (first, second):
            update = plan_update_from_todos([Todo(content=f"only {session_id}")])
            await pair.agent.conn.session_update(session_id=session_id, update=update)

        await eventually(lambda: _contents_are(pair.editor_todos, first, [f"only {first}"]))
        await eventually(lambda: _contents_are(pair.editor_todos, second, [f"only {second}"]))


async def _contents_are(client: TodoClient, session_id: str, expected: list[str]) -> bool:
    return await contents(client, session_id) == expected


async def test_the_sink_stores_a_cancelled_entry_as_cancelled_with_its_id(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        session_id = await pair.new_session()
        todo = Todo(id="t-9", content="dropped", status=TodoStatus.CANCELLED)
        await pair.agent.conn.session_update(session_id=session_id, update=plan_update_from_todos([todo]))

        await pair.editor.sink.flush(session_id)
        assert (await pair.editor_todos.get_todos(session_id)).todos == [todo]


async def test_closing_a_session_in_the_sink_keeps_it_and_deleting_removes_it(start) -> None:
    agent_side, editor_side = await start(), await start()
    async with connected(agent_side.address, TodoClient.connect(editor_side.address)) as pair:
        session_id = await pair.new_session()
        await pair.editor.sink.flush(session_id)
        assert session_id in {s.session_id for s in await pair.editor_todos.list_sessions()}

        pair.editor.sink.session_close(session_id)
        await pair.editor.sink.flush(session_id)
        assert session_id in {s.session_id for s in await pair.editor_todos.list_sessions()}

        pair.editor.sink.session_delete(session_id)
        await pair.editor.sink.flush(session_id)
        assert session_id not in {s.session_id for s in await pair.editor_todos.list_sessions()}


async def test_the_sink_stores_the_latest_plan_once_sessiontodo_is_back(start, caplog) -> None:
    port = free_port()
    async with (
        TodoClient.connect(  # the sink retries: its writes wait briefly for a connection, as the proxy's do
            f"127.0.0.1:{port}", retry=RetryPolicy(initial=0.05, maximum=0.3), ready_timeout=0.5
        ) as unreachable,
        PlanSink(unreachable, RetryPolicy(initial=0.05, maximum=0.3)) as sink,
    ):
        for n in range(3):
            sink.apply("later", plan_update_from_todos([Todo(content=f"plan {n}")]))
        await eventually(lambda: "retrying" in caplog.text, timeout=20)

        running = await start(port=port)
        async with TodoClient.connect(running.address) as client:
            await eventually(lambda: _contents_are(client, "later", ["plan 2"]), timeout=20)

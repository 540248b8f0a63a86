"""The bridge library an OpenCode-compatible server embeds, against a real sessiontodo server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiontodo_client import InvalidArgument, NotFound, Todo, TodoClient
from sessiontodo_opencode import Subscription, TodoBridge, TodoUpdated
from sessiontodo_opencode import Todo as OpenCodeTodo
from sessiontodo_server.app import RunningServer
from support import ServerProcess, eventually, free_port


def todo(content: str, status: str = "pending") -> OpenCodeTodo:
    return OpenCodeTodo(content=content, status=status, priority="medium")  # type: ignore[arg-type]


async def next_event(subscription: Subscription[TodoUpdated]) -> TodoUpdated:
    event = await asyncio.wait_for(subscription.receive(), 5)
    assert event is not None
    return event


def listed(event: TodoUpdated) -> tuple[str, list[str]]:
    return event.session_id, [t.content for t in event.properties.todos]


@pytest.fixture
async def bridge(client: TodoClient) -> AsyncIterator[TodoBridge]:
    async with TodoBridge(client, catch_up_window=0) as bridge:
        yield bridge


async def test_a_write_becomes_one_event_with_the_full_list_for_only_that_session(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    await bridge.create_session("ses_b")
    async with bridge.subscribe() as subscription:
        written = await bridge.write_todos("ses_a", [todo("one"), todo("two", "in_progress")])

        event = await next_event(subscription)
        assert event.type == "todo.updated"
        assert event.properties.todos == written
        assert listed(event) == ("ses_a", ["one", "two"])
        assert subscription.buffered == 0


async def test_the_bridge_serialises_events_with_opencodes_field_names(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    async with bridge.subscribe("ses_a") as subscription:
        await bridge.write_todos("ses_a", [OpenCodeTodo(id="t1", content="x", status="completed", priority="high")])
        event = await next_event(subscription)

    assert event.model_dump(mode="json") == {
        "id": event.id,
        "type": "todo.updated",
        "properties": {
            "sessionID": "ses_a",
            "todos": [{"id": "t1", "content": "x", "status": "completed", "priority": "high"}],
        },
    }


async def test_reading_answers_opencode_todos(bridge: TodoBridge, client: TodoClient) -> None:
    await client.create_session("ses_a")
    await client.add_todo("ses_a", Todo(id="t1", content="from grpc"))

    assert await bridge.get_todos("ses_a") == [
        OpenCodeTodo(id="t1", content="from grpc", status="pending", priority="medium")
    ]


async def test_unknown_sessions_are_not_found_for_reads_writes_subscriptions_and_deletes(bridge: TodoBridge) -> None:
    with pytest.raises(NotFound):
        await bridge.get_todos("ses_nobody")
    with pytest.raises(NotFound):
        await bridge.write_todos("ses_nobody", [todo("x")])
    with pytest.raises(NotFound):
        async with bridge.subscribe("ses_nobody"):
            pass
    assert await bridge.delete_session("ses_nobody") is False
    assert bridge.watched_sessions == []


async def test_an_invalid_list_changes_nothing_and_sends_no_event(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    await bridge.write_todos("ses_a", [todo("keep")])
    async with bridge.subscribe("ses_a") as subscription:
        with pytest.raises(InvalidArgument):
            await bridge.write_todos("ses_a", [todo("")])

        assert subscription.buffered == 0
    assert [t.content for t in await bridge.get_todos("ses_a")] == ["keep"]


async def test_one_watch_serves_a_session_however_many_subscribe(bridge: TodoBridge, server: RunningServer) -> None:
    await bridge.create_session("ses_a")
    await bridge.create_session("ses_b")

    async with bridge.subscribe(), bridge.subscribe("ses_a"), bridge.subscribe("ses_a"), bridge.subscribe("ses_b"):
        await bridge.get_todos("ses_a")
        assert bridge.subscriber_count == 4
        assert server.book.watcher_count == 2

    assert bridge.subscriber_count == 0
    assert server.book.watcher_count == 2


async def test_deleting_a_session_ends_its_watch_and_its_childrens(bridge: TodoBridge, server: RunningServer) -> None:
    await bridge.create_session("ses_parent")
    await bridge.create_session("ses_child", "ses_parent")
    async with bridge.subscribe() as subscription:
        assert await bridge.delete_session("ses_parent") is True

        assert sorted([listed(await next_event(subscription)) for _ in range(2)]) == [
            ("ses_child", []),
            ("ses_parent", []),
        ]
        assert subscription.buffered == 0
    assert bridge.watched_sessions == []
    await eventually(lambda: server.book.watcher_count == 0)


async def test_deleting_a_session_the_bridge_never_watched_still_announces_its_empty_list(
    bridge: TodoBridge, client: TodoClient
) -> None:
    await client.create_session("ses_grpc")
    async with bridge.subscribe() as subscription:
        assert await bridge.delete_session("ses_grpc") is True

        assert listed(await next_event(subscription)) == ("ses_grpc", [])


async def test_a_new_subscription_gets_the_lists_changed_within_the_catch_up_window_and_nothing_older(
    client: TodoClient,
) -> None:
    async with TodoBridge(client, catch_up_window=60) as bridge:
        await bridge.create_session("ses_quiet")
        await bridge.create_session("ses_a")
        await bridge.write_todos("ses_a", [todo("one")])
        await bridge.write_todos("ses_a", [todo("one"), todo("two")])

        async with bridge.subscribe() as subscription:
            assert listed(await next_event(subscription)) == ("ses_a", ["one", "two"])
            assert subscription.buffered == 0  # only the latest list, nothing for the unchanged session


async def test_a_subscriber_that_stops_reading_collapses_to_the_latest_list_per_session(client: TodoClient) -> None:
    async with TodoBridge(client, subscriber_buffer=4, catch_up_window=0) as bridge:
        await bridge.create_session("ses_a")
        await bridge.create_session("ses_b")
        async with bridge.subscribe() as stuck:
            for n in range(20):
                await bridge.write_todos("ses_a", [todo(f"a{n}")])
                await bridge.write_todos("ses_b", [todo(f"b{n}")])

            assert stuck.collapse_count >= 1
            assert stuck.buffered <= 4 + 2
            received = [listed(event) async for event in _drain(stuck)]

    latest = {session_id: texts for session_id, texts in received}
    assert latest == {"ses_a": ["a19"], "ses_b": ["b19"]}


async def _drain(subscription: Subscription[TodoUpdated]) -> AsyncIterator[TodoUpdated]:
    while subscription.buffered:
        yield await next_event(subscription)


async def test_closing_the_bridge_ends_its_watches_and_subscriptions(client: TodoClient, server: RunningServer) -> None:
    bridge = TodoBridge(client)
    await bridge.create_session("ses_a")
    await bridge.create_session("ses_b")
    async with bridge.subscribe() as subscription:
        assert server.book.watcher_count == 2

        await bridge.aclose()

        assert await asyncio.wait_for(subscription.receive(), 5) is None
    await eventually(lambda: server.book.watcher_count == 0)


async def test_watches_resume_after_the_service_restarts(tmp_path: Path) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    with ServerProcess("--store", store, port=port) as service:
        async with TodoClient.connect(service.address) as client, TodoBridge(client) as bridge:
            await bridge.create_session("ses_a")
            async with bridge.subscribe("ses_a") as subscription:
                await bridge.write_todos("ses_a", [todo("before")])
                assert listed(await next_event(subscription)) == ("ses_a", ["before"])

                assert await asyncio.to_thread(service.stop) == 0
                await asyncio.to_thread(service.start)
                await client.add_todo("ses_a", Todo(content="after"))

                assert listed(await next_event(subscription)) == ("ses_a", ["before", "after"])

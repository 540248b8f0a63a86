"""The bridge library an OpenCode-compatible server embeds, against a real sessiontodo server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import InvalidArgument, NotFound, Todo, TodoClient
from sessiontodo_opencode import BusEvent, Subscription, TodoBridge, TodoUpdated
from sessiontodo_opencode import Todo as OpenCodeTodo
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.values import TodoDraft
from tests.support import ServerProcess, eventually, free_port

DIRECTORY = "/work/project"


def todo(content: str, status: str = "pending") -> OpenCodeTodo:
    return OpenCodeTodo(content=content, status=status, priority="medium")


async def next_event(subscription: Subscription[BusEvent]) -> BusEvent:
    event = await asyncio.wait_for(subscription.receive(), 5)
    assert event is not None
    return event


async def next_update(subscription: Subscription[BusEvent]) -> TodoUpdated:
    while not isinstance(event := await next_event(subscription), TodoUpdated):
        pass
    return event


def listed(event: TodoUpdated) -> tuple[str, list[str]]:
    return event.session_id, [t.content for t in event.properties.todos]


def bridge_for(client: TodoClient, **options: float) -> TodoBridge:
    return TodoBridge(client, directory=DIRECTORY, **{"catch_up_window": 0.0, **options})  # type: ignore[arg-type]


@pytest.fixture
async def bridge(client: TodoClient) -> AsyncIterator[TodoBridge]:
    async with bridge_for(client) as bridge:
        yield bridge


async def test_a_write_becomes_one_event_with_the_full_list_for_only_that_session(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    await bridge.create_session("ses_b")
    with bridge.subscribe() as subscription:
        written = await bridge.write_todos("ses_a", [todo("one"), todo("two", "in_progress")])

        event = await next_event(subscription)
        assert isinstance(event, TodoUpdated)
        assert event.properties.todos == written
        assert listed(event) == ("ses_a", ["one", "two"])
        assert subscription.buffered == 0


async def test_the_bridge_serialises_events_with_opencodes_field_names_and_no_scope(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    with bridge.subscribe(session_id="ses_a") as subscription:
        await bridge.write_todos("ses_a", [OpenCodeTodo(id="t1", content="x", status="completed", priority="high")])
        event = await next_event(subscription)

    assert event.directory == DIRECTORY
    assert event.model_dump(mode="json") == {
        "id": event.id,
        "type": "todo.updated",
        "properties": {
            "sessionID": "ses_a",
            "todos": [{"id": "t1", "content": "x", "status": "completed", "priority": "high"}],
        },
    }


async def test_sessions_are_opencode_sessions_built_from_labels_and_times(
    bridge: TodoBridge, client: TodoClient
) -> None:
    await client.create_session("ses_grpc", labels={"title": "from grpc", "directory": "/else", "project": "p1"})
    created = await bridge.create_session("ses_a", title="mine")

    grpc_session = await bridge.get_session("ses_grpc")

    assert (created.title, created.directory, created.project_id) == ("mine", DIRECTORY, "global")
    assert (grpc_session.title, grpc_session.directory, grpc_session.project_id) == ("from grpc", "/else", "p1")
    assert [s.id for s in await bridge.list_sessions(DIRECTORY)] == ["ses_a"]
    assert {s.id for s in await bridge.list_sessions()} == {"ses_a", "ses_grpc"}


async def test_unknown_sessions_are_not_found_for_reads_writes_and_renames(bridge: TodoBridge) -> None:
    for call in (
        bridge.get_todos("ses_nobody"),
        bridge.write_todos("ses_nobody", [todo("x")]),
        bridge.get_session("ses_nobody"),
        bridge.rename_session("ses_nobody", "x"),
        bridge.get_todos("sessiontodo:global"),  # the service's own list is no OpenCode session
    ):
        with pytest.raises(NotFound):
            await call
    assert await bridge.delete_session("ses_nobody") is False


async def test_an_invalid_list_changes_nothing_and_sends_no_event(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_a")
    await bridge.write_todos("ses_a", [todo("keep")])
    with bridge.subscribe(session_id="ses_a") as subscription:
        with pytest.raises(InvalidArgument):
            await bridge.write_todos("ses_a", [todo("")])

        assert subscription.buffered == 0
    assert [t.content for t in await bridge.get_todos("ses_a")] == ["keep"]


async def test_one_feed_serves_every_session_and_subscriber(bridge: TodoBridge, server: RunningServer) -> None:
    await bridge.create_session("ses_a")
    await bridge.create_session("ses_b")

    with bridge.subscribe(), bridge.subscribe(session_id="ses_a"), bridge.subscribe(DIRECTORY):
        await bridge.get_todos("ses_a")
        assert bridge.subscriber_count == 3
        assert server.book.watcher_count == 1

    assert bridge.subscriber_count == 0


async def test_deleting_a_session_announces_it_and_its_children_with_their_last_state(bridge: TodoBridge) -> None:
    await bridge.create_session("ses_parent", title="parent")
    await bridge.create_session("ses_child", "ses_parent")
    with bridge.subscribe() as subscription:
        assert await bridge.delete_session("ses_parent") is True

        deleted = [await next_event(subscription) for _ in range(2)]
        assert subscription.buffered == 0
    assert sorted((event.type, event.session_id) for event in deleted) == [
        ("session.deleted", "ses_child"),
        ("session.deleted", "ses_parent"),
    ]
    assert {event.properties.info.title for event in deleted if event.session_id == "ses_parent"} == {"parent"}  # type: ignore[union-attr]
    assert bridge.session_count == 0


async def test_a_subscriber_that_stops_reading_collapses_to_the_latest_list_per_session(client: TodoClient) -> None:
    async with bridge_for(client, subscriber_buffer=4) as bridge:
        await bridge.create_session("ses_a")
        await bridge.create_session("ses_b")
        with bridge.subscribe() as stuck:
            for n in range(20):
                await bridge.write_todos("ses_a", [todo(f"a{n}")])
                await bridge.write_todos("ses_b", [todo(f"b{n}")])

            assert stuck.collapse_count >= 1
            assert stuck.buffered <= 4 + 2
            received = [await next_event(stuck) for _ in range(stuck.buffered)]

    latest = {listed(event)[0]: listed(event)[1] for event in received if isinstance(event, TodoUpdated)}
    assert latest == {"ses_a": ["a19"], "ses_b": ["b19"]}


async def test_a_new_subscription_gets_the_lists_changed_within_the_catch_up_window_and_nothing_older(
    client: TodoClient,
) -> None:
    await client.create_session("ses_quiet")
    await client.add_todo("ses_quiet", Todo(content="before the bridge started"))
    async with bridge_for(client, catch_up_window=60.0) as bridge:
        await bridge.create_session("ses_a")
        await bridge.write_todos("ses_a", [todo("one")])
        await bridge.write_todos("ses_a", [todo("one"), todo("two")])

        with bridge.subscribe() as subscription:
            caught_up = [await next_event(subscription) for _ in range(subscription.buffered)]

    assert [(event.type, event.session_id) for event in caught_up] == [
        ("session.created", "ses_a"),
        ("todo.updated", "ses_a"),
    ]
    assert listed(caught_up[-1]) == ("ses_a", ["one", "two"])  # type: ignore[arg-type]


async def test_closing_the_bridge_ends_its_feed_and_subscriptions(client: TodoClient, server: RunningServer) -> None:
    bridge = bridge_for(client)
    await bridge.start()
    with bridge.subscribe() as subscription:
        assert server.book.watcher_count == 1

        await bridge.aclose()

        assert await asyncio.wait_for(subscription.receive(), 5) is None
    await eventually(lambda: server.book.watcher_count == 0)


@pytest.mark.process
async def test_the_feed_resumes_after_the_service_restarts(tmp_path: Path) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    with ServerProcess("--store", store, port=port) as service:
        async with TodoClient.connect(service.address) as client, bridge_for(client) as bridge:
            await bridge.create_session("ses_a")
            with bridge.subscribe(session_id="ses_a") as subscription:
                await bridge.write_todos("ses_a", [todo("before")])
                assert listed(await next_update(subscription)) == ("ses_a", ["before"])

                assert await asyncio.to_thread(service.stop) == 0
                await asyncio.to_thread(service.start)
                await client.add_todo("ses_a", Todo(content="after"))

                assert listed(await next_update(subscription)) == ("ses_a", ["before", "after"])


@pytest.mark.process
async def test_a_service_that_lost_everything_is_announced_as_deleted_sessions(tmp_path: Path) -> None:
    port = free_port()
    with ServerProcess("--store", "memory://", port=port) as service:
        async with TodoClient.connect(service.address) as client, bridge_for(client) as bridge:
            await bridge.create_session("ses_a")
            with bridge.subscribe() as subscription:
                service.kill()
                await asyncio.to_thread(service.start)  # a memory store: ses_a is gone

                event = await next_event(subscription)
                assert (event.type, event.session_id) == ("session.deleted", "ses_a")


async def test_after_a_feed_reset_the_bridge_publishes_every_list_that_changed(start: Any) -> None:
    """50 adds in one burst (committed before the feed runs again) overflow a one-change feed
    buffer: the feed resets, and the bridge's last todo.updated still carries all 50."""
    server: RunningServer = await start(watch_buffer=1)
    async with TodoClient.connect(server.address) as client, bridge_for(client) as bridge:
        await bridge.create_session("ses_a")
        with bridge.subscribe() as subscription:
            for n in range(50):  # the memory store commits without yielding: one burst
                await server.book.add("ses_a", TodoDraft(content=f"t{n}"))
            latest: list[str] = []

            async def all_fifty_published() -> bool:
                nonlocal latest
                latest = listed(await next_update(subscription))[1]
                return len(latest) == 50

            await eventually(all_fifty_published, timeout=20)
    assert sorted(latest) == sorted(f"t{n}" for n in range(50))


@pytest.mark.process
async def test_a_stream_open_across_a_crash_and_restart_repeats_nothing_for_sessions_that_did_not_change(
    tmp_path: Path,
) -> None:
    port = free_port()
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    with ServerProcess("--store", store, port=port) as service:
        async with TodoClient.connect(service.address) as client, bridge_for(client) as bridge:
            for session_id in ("ses_a", "ses_b"):
                await bridge.create_session(session_id)
                await bridge.write_todos(session_id, [todo(f"{session_id} before")])
            with bridge.subscribe() as subscription:
                await asyncio.to_thread(service.kill)
                await asyncio.to_thread(service.start)
                await client.add_todo("ses_a", Todo(content="after"))
                await asyncio.sleep(3)
                await client.add_todo("ses_a", Todo(content="last"))

                events = [await next_event(subscription)]
                while not (isinstance(events[-1], TodoUpdated) and listed(events[-1])[1][-1:] == ["last"]):
                    events.append(await next_event(subscription))
                assert [(event.type, event.session_id) for event in events] == [("todo.updated", "ses_a")] * 2

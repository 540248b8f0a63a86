"""Session metadata, labels, idle expiry, todo metadata, origins, batch reads and the error
details clients rely on, through the typed client against a real server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import (
    Aborted,
    ChangeKind,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RemovalReason,
    ResourceExhausted,
    Todo,
    TodoClient,
    TodoStatus,
    Unavailable,
)
from sessiontodo_client.errors import service_error
from sessiontodo_server.app import RunningServer


async def test_a_session_carries_labels_times_and_ttl(client: TodoClient) -> None:
    session, created = await client.create_session("s", labels={"title": "Fix it", "directory": "/src"}, idle_ttl=90)

    assert created
    assert session.revision == 0
    assert session.labels == {"title": "Fix it", "directory": "/src"}
    assert session.idle_ttl == 90
    assert session.created_at is not None
    assert session.created_at == session.updated_at
    assert await client.get_session("s") == session


async def test_update_session_changes_labels_once_and_bumps_the_revision(client: TodoClient) -> None:
    await client.create_session("s", labels={"title": "A", "draft": "1"})
    await client.add_todo("s", Todo(content="x"))

    updated, changed = await client.update_session("s", labels={"title": "B"}, remove_labels=["draft"], origin="me")
    again, changed_again = await client.update_session("s", labels={"title": "B"})

    assert changed
    assert not changed_again
    assert updated.labels == {"title": "B"}
    assert updated.revision == 2
    assert again.revision == 2
    assert updated.updated_at is not None
    assert updated.created_at is not None
    assert updated.updated_at > updated.created_at
    assert (await client.get_todos("s")).revision == 2


async def test_a_label_update_reaches_the_session_watchers_as_session_updated(client: TodoClient) -> None:
    await client.create_session("s")
    watch = client.watch("s")
    await anext(watch)  # the snapshot

    await client.update_session("s", labels={"title": "T"}, origin="editor")

    event = await asyncio.wait_for(anext(watch), 5)
    assert (event.kind, event.revision, event.origin) == (ChangeKind.SESSION_UPDATED, 1, "editor")
    assert event.session is not None
    assert event.session.labels == {"title": "T"}
    await watch.aclose()


async def test_every_write_echoes_its_origin_to_watchers(client: TodoClient) -> None:
    await client.create_session("s")
    watch = client.watch("s")
    await anext(watch)

    added = await client.add_todo("s", Todo(id="t", content="x"), origin="gateway-a")
    await client.update_todo("s", "t", status=TodoStatus.COMPLETED, origin="gateway-b")
    await client.replace_todos("s", [Todo(id="t", content="y")], origin="gateway-c")
    await client.remove_todo("s", "t", origin="gateway-d")

    events = [await asyncio.wait_for(anext(watch), 5) for _ in range(4)]
    assert [e.origin for e in events] == ["gateway-a", "gateway-b", "gateway-c", "gateway-d"]
    assert events[0].revision == added.revision
    await watch.aclose()


async def test_todo_metadata_round_trips_and_updates_by_key(client: TodoClient) -> None:
    await client.create_session("s")
    await client.replace_todos("s", [Todo(id="t", content="x", metadata={"acp/_meta": '{"a": 1}', "k": "v"})])

    updated = await client.update_todo("s", "t", metadata={"k": "w", "new": "n"}, remove_metadata=["acp/_meta"])
    unchanged = await client.update_todo("s", "t", metadata={"k": "w"})

    assert updated.changed
    assert not unchanged.changed
    assert (await client.get_todos("s")).todos[0].metadata == {"k": "w", "new": "n"}


async def test_invalid_labels_metadata_and_origins_are_refused_and_change_nothing(client: TodoClient) -> None:
    await client.create_session("s")
    calls = [
        client.create_session("t", labels={"bad key!": "v"}),
        client.create_session("t", idle_ttl=0.5),
        client.update_session("s", labels={"a": "b"}, remove_labels=["a"]),
        client.update_session("s", labels={"k": "x" * 5000}),
        client.replace_todos("s", [Todo(content="x", metadata={"k": "v" * 20_000})]),
        client.replace_todos("s", [Todo(content="x")], origin="o" * 200),
    ]
    for call in calls:
        with pytest.raises(InvalidArgument) as refused:
            await call
        assert refused.value.violations
    assert [s.session_id for s in await client.list_sessions()] == ["s"]
    assert (await client.get_todos("s")).revision == 0


async def test_an_idle_session_expires_with_reason_expired(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(expiry_interval=0.05)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("kept")
        # The feed is open before the session exists and the watch is the next call after its creation:
        # nothing but one call runs inside its 1 s, which a busy machine could otherwise outlast.
        feed = client.watch_changes(session_ids=["idle"], include_snapshot=True, include_progress=True)
        assert (await anext(feed)).kind is ChangeKind.PROGRESS  # the end of an empty snapshot
        await client.create_session("idle", idle_ttl=1)
        watch = client.watch("idle")
        await anext(watch)
        assert (await asyncio.wait_for(anext(feed), 10)).kind is ChangeKind.SESSION_CREATED

        removal = await asyncio.wait_for(anext(watch), 10)
        feed_removal = await asyncio.wait_for(anext(feed), 10)
        while feed_removal.kind is ChangeKind.PROGRESS:
            feed_removal = await asyncio.wait_for(anext(feed), 10)

        assert (removal.kind, removal.removal_reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)
        assert (feed_removal.kind, feed_removal.removal_reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)
        assert [s.session_id for s in await client.list_sessions()] == ["kept"]
        await feed.aclose()


async def test_the_servers_default_idle_ttl_applies_to_sessions_created_without_one(start: Callable[..., Any]) -> None:
    """How writes keep such a session alive, and when it expires, is driven by a manual clock in
    tests/unit/test_idle_expiry.py; the expiry's path through gRPC is checked just above."""
    server: RunningServer = await start(default_idle_ttl=1)
    async with TodoClient.connect(server.address) as client:
        session, _ = await client.create_session("busy")
        assert session.idle_ttl == 1
        assert (await client.get_session("busy")).idle_ttl == 1


async def test_batch_get_todos_answers_found_and_missing_sessions_in_one_call(client: TodoClient) -> None:
    for session_id in ("a", "b"):
        await client.create_session(session_id)
        await client.add_todo(session_id, Todo(content=f"{session_id}!"))

    found, missing = await client.batch_get_todos(["b", "nope", "a", "b"])

    assert [(entry.session.session_id, [t.content for t in entry.todos]) for entry in found] == [
        ("b", ["b!"]),
        ("a", ["a!"]),
    ]
    assert missing == ["nope"]
    with pytest.raises(InvalidArgument):
        await client.batch_get_todos([f"s{n}" for n in range(1001)])


async def test_list_sessions_filters_by_parent_and_labels(client: TodoClient) -> None:
    await client.create_session("p")
    await client.create_session("k1", parent_id="p", labels={"directory": "/a"})
    await client.create_session("k2", parent_id="p", labels={"directory": "/b"})
    await client.create_session("other", labels={"directory": "/a"})

    assert [s.session_id for s in await client.list_sessions(parent_id="p")] == ["k1", "k2"]
    assert [s.session_id for s in await client.list_sessions(labels={"directory": "/a"})] == ["k1", "other"]


async def test_page_tokens_are_opaque_and_bound_to_their_filter(client: TodoClient, server: RunningServer) -> None:
    for n in range(3):
        await client.create_session(f"s{n}", labels={"kind": "x"})
    first, token = await server.book.list_sessions(page_size=2, labels={"kind": "x"})
    assert token
    assert "s1" not in token

    second, end = await server.book.list_sessions(page_size=2, page_token=token, labels={"kind": "x"})
    assert [s.session_id for s in first + second] == ["s0", "s1", "s2"]
    assert end == ""
    for wrong in (token, "garbage"):
        with pytest.raises(Exception, match="page_token"):
            await server.book.list_sessions(
                page_size=2, page_token=wrong, labels={"kind": "y"} if wrong == token else {}
            )


async def test_a_fresh_id_starts_at_revision_zero_and_a_reused_one_above_its_past(client: TodoClient) -> None:
    await client.create_session("used")
    await client.add_todo("used", Todo(content="x"))
    await client.remove_session("used")

    fresh, _ = await client.create_session("fresh")
    reused, _ = await client.create_session("used")

    assert fresh.revision == 0
    assert reused.revision > 2  # above the removal's revision


async def test_a_client_without_an_id_creates_exactly_one_session(client: TodoClient) -> None:
    session, created = await client.create_session(labels={"title": "generated"})
    assert created
    assert session.session_id.startswith("ses_")
    assert [s.session_id for s in await client.list_sessions()] == [session.session_id]


async def test_errors_carry_their_aip_193_details(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(max_sessions=1)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("parent")
        await client.add_todo("parent", Todo(content="x"))

        with pytest.raises(ResourceExhausted) as exhausted:
            await client.create_session("second")
        with pytest.raises(Aborted) as aborted:
            await client.add_todo("parent", Todo(content="y"), expected_revision=0)
        with pytest.raises(FailedPrecondition) as moved:
            await client.create_session("parent", parent_id="elsewhere")
        with pytest.raises(NotFound) as missing:
            await client.get_todos("ghost")

        assert exhausted.value.quota_violations == [("sessions", "sessions limit of 1 reached")]
        assert aborted.value.metadata == {"sessionId": "parent", "expectedRevision": "0", "actualRevision": "1"}
        assert moved.value.metadata == {"sessionId": "parent", "parentId": ""}
        assert (missing.value.reason, missing.value.metadata) == ("SESSION_NOT_FOUND", {"sessionId": "ghost"})

    async with grpc.aio.insecure_channel(server.address) as channel:
        server.book.shut_down()  # watches are now refused with UNAVAILABLE (the typed watch would retry)
        call = pb_grpc.TodoServiceStub(channel).WatchTodos(pb.WatchTodosRequest(session_id="parent"))
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call.read()
    unavailable = service_error(refused.value)
    assert isinstance(unavailable, Unavailable)
    assert unavailable.retry_delay == 1.0


async def test_update_session_with_a_stale_expected_revision_is_aborted_and_changes_nothing(
    client: TodoClient,
) -> None:
    created, _ = await client.create_session("s", labels={"title": "first"})
    await client.replace_todos("s", [Todo(content="a write moves the revision on")])

    with pytest.raises(Aborted):
        await client.update_session("s", labels={"title": "stale"}, expected_revision=created.revision)
    current = await client.get_session("s")
    updated, changed = await client.update_session("s", labels={"title": "fresh"}, expected_revision=current.revision)

    assert current.labels == {"title": "first"}
    assert (changed, updated.labels, updated.revision) == (True, {"title": "fresh"}, current.revision + 1)

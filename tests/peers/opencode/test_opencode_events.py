"""The sidecar's ``GET /event`` stream: framing, heartbeats, per-session events and filters."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from unittest.mock import ANY

import httpx

from sessiontodo_client import Todo, TodoClient
from sessiontodo_opencode import RunningSidecar
from tests.peers.opencode.opencode_support import EventFeed, contents, create, put, todos

OpenFeed = Callable[..., Awaitable[EventFeed]]


async def test_the_stream_is_server_sent_events_in_lf_only_data_frames(http: httpx.AsyncClient) -> None:
    async with http.stream("GET", "/event") as response:
        feed = EventFeed(response)
        first = await feed.next_event()
        await feed.next_event()  # a heartbeat

    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache, no-transform"
    assert response.headers["x-accel-buffering"] == "no"
    assert first["type"] == "server.connected"
    assert first["properties"] == {}
    assert re.fullmatch(rb"(data: \{[^\r\n]*\}\n\n)+", feed.raw), feed.raw


async def test_every_envelope_carries_a_distinct_evt_id(http: httpx.AsyncClient, open_feed: OpenFeed) -> None:
    await create(http, "ses_a")
    feed = await open_feed()
    await put(http, "ses_a", "x")

    envelopes = [await feed.next_event() for _ in range(3)]

    ids = [envelope["id"] for envelope in envelopes]
    assert all(re.fullmatch(r"evt_[0-9a-z_]+", id_) for id_ in ids), ids
    assert len(set(ids)) == len(ids)


async def test_a_quiet_stream_sends_heartbeats(open_feed: OpenFeed) -> None:
    feed = await open_feed()

    envelopes = [await feed.next_event() for _ in range(2)]

    assert [e["type"] for e in envelopes] == ["server.heartbeat", "server.heartbeat"]
    assert all(e["properties"] == {} for e in envelopes)


async def test_a_stream_replays_nothing_that_happened_before_it_connected(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    await create(http, "ses_a")
    await put(http, "ses_a", "a1", "a2")

    feed = await open_feed()

    assert (await feed.next_event())["type"] == "server.heartbeat"  # like upstream: live events only


async def test_a_write_reaches_subscribers_as_the_full_list_in_opencodes_shape(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    await create(http, "ses_a")
    feed = await open_feed()
    body = [{"id": "t1", "content": "plan", "status": "in_progress", "priority": "high"}, *todos("ship")]

    await http.put("/session/ses_a/todo", json=body)

    update = await feed.next_update()
    assert update["sessionID"] == "ses_a"
    assert update["todos"][0] == {"id": "t1", "content": "plan", "status": "in_progress", "priority": "high"}
    assert update["todos"][1]["content"] == "ship"
    assert update["todos"][1]["id"]


async def test_a_session_filter_limits_the_stream_to_that_session(http: httpx.AsyncClient, open_feed: OpenFeed) -> None:
    await create(http, "ses_a")
    await create(http, "ses_b")
    feed = await open_feed(sessionID="ses_a")

    await put(http, "ses_b", "b1")
    await put(http, "ses_a", "a1")
    await put(http, "ses_b", "b2")
    await put(http, "ses_a", "a2")

    assert await feed.updates(2) == [("ses_a", ["a1"]), ("ses_a", ["a2"])]


async def test_a_filter_naming_an_unknown_session_is_not_found(http: httpx.AsyncClient) -> None:
    response = await http.get("/event", params={"sessionID": "ses_nobody"})

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_an_empty_session_filter_is_a_bad_request(http: httpx.AsyncClient) -> None:
    response = await http.get("/event", params={"sessionID": ""})

    assert response.status_code == 400
    assert response.json()["name"] == "BadRequest"


async def test_concurrent_writers_on_two_sessions_never_cross_events(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    await create(http, "ses_a")
    await create(http, "ses_b")
    feed = await open_feed()
    rounds = 15

    async def write(session_id: str) -> None:
        for n in range(rounds):
            await put(http, session_id, *(f"{session_id}-{k}" for k in range(n + 1)))

    await asyncio.gather(write("ses_a"), write("ses_b"))
    updates = await feed.updates(2 * rounds)

    for session_id in ("ses_a", "ses_b"):
        lists = [texts for sid, texts in updates if sid == session_id]
        assert lists == [[f"{session_id}-{k}" for k in range(n + 1)] for n in range(rounds)]


async def test_deleting_a_session_sends_session_deleted_for_it_and_its_children_and_nothing_else(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    await create(http, "ses_parent")
    await create(http, "ses_child", parent_id="ses_parent")
    await create(http, "ses_other")
    await put(http, "ses_child", "c")
    feed = await open_feed()

    await http.delete("/session/ses_parent")
    await put(http, "ses_other", "still here")

    envelopes = await feed.next_events(3)
    deleted = [e["properties"] for e in envelopes if e["type"] == "session.deleted"]
    assert sorted(p["sessionID"] for p in deleted) == ["ses_child", "ses_parent"]
    assert all(p["info"]["id"] == p["sessionID"] for p in deleted)
    # As upstream: no todo.updated [] for a deleted session, even one whose list was not empty.
    updates = [contents(e["properties"]) for e in envelopes if e["type"] == "todo.updated"]
    assert updates == [("ses_other", ["still here"])]


async def test_every_sessions_lifecycle_and_lists_reach_subscribers_whoever_writes_them(
    http: httpx.AsyncClient, client: TodoClient, open_feed: OpenFeed
) -> None:
    feed = await open_feed()

    await client.create_session("ses_grpc")
    await client.add_todo("ses_grpc", Todo(content="from grpc"))
    await client.update_session("ses_grpc", labels={"title": "named over grpc"})
    await client.remove_session("ses_grpc")

    assert await feed.next_events(4) == [
        {"id": ANY, "type": "session.created", "properties": {"sessionID": "ses_grpc", "info": ANY}},
        {"id": ANY, "type": "todo.updated", "properties": {"sessionID": "ses_grpc", "todos": [ANY]}},
        {"id": ANY, "type": "session.updated", "properties": {"sessionID": "ses_grpc", "info": ANY}},
        {"id": ANY, "type": "session.deleted", "properties": {"sessionID": "ses_grpc", "info": ANY}},
    ]


async def test_a_stream_carries_only_the_sessions_of_its_directory(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    here = await open_feed()
    there = await open_feed(directory="/there")

    await http.post("/session", json={"id": "ses_there"}, params={"directory": "/there"})
    await http.post("/session", json={"id": "ses_here"})
    await put(http, "ses_there", "t")
    await put(http, "ses_here", "h")

    assert (await here.next_of("session.created"))["sessionID"] == "ses_here"
    assert contents(await here.next_update()) == ("ses_here", ["h"])
    assert (await there.next_of("session.created"))["info"]["directory"] == "/there"
    assert contents(await there.next_update()) == ("ses_there", ["t"])


async def test_the_global_stream_wraps_every_directorys_events_in_upstreams_envelope(http: httpx.AsyncClient) -> None:
    async with http.stream("GET", "/global/event") as response:
        feed = EventFeed(response)
        connected = await feed.next_event()
        await http.post("/session", json={"id": "ses_there"}, params={"directory": "/there"})
        await put(http, "ses_there", "t")
        created, _sync, updated = await feed.next_events(3)  # its sync frame: test_opencode_upstream_routes.py

    assert connected == {"payload": {"id": ANY, "type": "server.connected", "properties": {}}}
    assert created["directory"] == "/there"
    assert created["project"] == "global"
    assert created["payload"]["type"] == "session.created"
    assert updated == {
        "directory": "/there",
        "project": "global",
        "payload": {"id": ANY, "type": "todo.updated", "properties": {"sessionID": "ses_there", "todos": [ANY]}},
    }


async def test_a_write_that_changes_nothing_is_still_published_like_upstream(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    await create(http, "ses_a")
    written = (await http.put("/session/ses_a/todo", json=todos("x"))).json()
    feed = await open_feed()

    await http.put("/session/ses_a/todo", json=written)

    assert contents(await feed.next_update()) == ("ses_a", ["x"])


async def test_a_client_that_reads_then_subscribes_misses_no_change_made_in_between(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]], client: TodoClient
) -> None:
    sidecar = await launch_sidecar(catch_up_window=60.0)
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10.0) as http:
        await create(http, "ses_a")
        await create(http, "ses_quiet")
        async with http.stream("GET", "/event") as observed:
            observer = EventFeed(observed)
            await observer.next_event()  # server.connected
            read = await http.get("/session/ses_a/todo")
            assert read.json() == []

            await client.add_todo("ses_a", Todo(content="made in between"))
            assert contents(await observer.next_update()) == ("ses_a", ["made in between"])  # before subscribing
            async with http.stream("GET", "/event") as response:
                feed = EventFeed(response)
                assert (await feed.next_event())["type"] == "server.connected"

                caught_up = [await feed.next_event() for _ in range(3)]

    # The recent changes, each session's latest event per kind: the list ses_a got in between.
    assert sorted((e["type"], e["properties"]["sessionID"]) for e in caught_up) == [
        ("session.created", "ses_a"),
        ("session.created", "ses_quiet"),
        ("todo.updated", "ses_a"),
    ]
    assert [e["properties"]["todos"][0]["content"] for e in caught_up if e["type"] == "todo.updated"] == [
        "made in between"
    ]

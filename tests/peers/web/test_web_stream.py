"""The board's event stream (``/api/events``) as a reconnecting page sees it: the whole board first,
then one frame per change whose id is its feed cursor; resuming with ``Last-Event-ID`` sends exactly
the frames after it (nothing missed, nothing twice) or the whole board again; a RESET from
sessiontodo replaces the board; pages are told when sessiontodo goes silent."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx

from sessiontodo_client import ChangeKind, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_web import RunningWeb
from tests.peers.web.web_support import WAIT, LaunchWeb, open_feed, signed_in_http
from tests.support import eventually


async def test_a_new_stream_starts_with_the_whole_board_at_its_cursor(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_before")
    await web.board.delivered("ses_before", 0)
    feed = await open_feed(http)

    reset = await feed.next_of("reset")

    await feed.aclose()
    assert reset.id == reset.data["cursor"]
    assert "ses_before" in {session["id"] for session in reset.data["sessions"]}


async def test_each_change_is_one_frame_whose_id_is_its_feed_cursor(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_cursor")
    await web.board.delivered("ses_cursor", 0)
    feed = await open_feed(http)
    await feed.next_of("reset")
    grpc_feed = client.watch_changes(include_snapshot=True, session_ids=["ses_cursor"])
    assert (await anext(grpc_feed)).kind is ChangeKind.SNAPSHOT

    await client.replace_todos("ses_cursor", [Todo(content="one")])

    change = await feed.next_of("change")
    grpc_change = await anext(grpc_feed)
    await grpc_feed.aclose()
    await feed.aclose()
    assert change.id == grpc_change.cursor
    assert [todo["content"] for todo in change.data["todos"]] == ["one"]


async def test_a_stream_resumed_after_a_cursor_gets_exactly_the_changes_after_it(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_resume")
    await web.board.delivered("ses_resume", 0)
    feed = await open_feed(http)
    await feed.next_of("reset")
    await client.replace_todos("ses_resume", [Todo(content="seen")])
    last_seen = (await feed.next_of("change")).id
    await feed.aclose()
    await client.replace_todos("ses_resume", [Todo(content="missed 1")])
    await client.replace_todos("ses_resume", [Todo(content="missed 2")])

    resumed = await open_feed(http, last_event_id=last_seen)
    frames = [await resumed.next_of("change", "reset") for _ in range(2)]

    await resumed.aclose()
    assert [(frame.event, frame.data["todos"][0]["content"]) for frame in frames] == [
        ("change", "missed 1"),
        ("change", "missed 2"),
    ]


async def test_a_stream_resumed_at_the_newest_cursor_gets_nothing_but_new_changes(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_current")
    await web.board.delivered("ses_current", 0)
    feed = await open_feed(http)
    cursor = (await feed.next_of("reset")).id
    await feed.aclose()

    resumed = await open_feed(http, last_event_id=cursor)
    await client.replace_todos("ses_current", [Todo(content="new")])
    frame = await resumed.next_of("change", "reset")

    await resumed.aclose()
    assert (frame.event, frame.data["todos"][0]["content"]) == ("change", "new")


async def test_a_stream_resumed_from_an_unknown_cursor_gets_the_whole_board(http: httpx.AsyncClient) -> None:
    feed = await open_feed(http, last_event_id="not-a-cursor.7")

    frame = await feed.next_of("change", "reset")

    await feed.aclose()
    assert frame.event == "reset"


async def test_a_stream_resumed_from_beyond_the_resume_window_gets_the_whole_board(
    launch_web: LaunchWeb, viewer_token: str, client: TodoClient
) -> None:
    web = await launch_web(resume_window=2)
    await client.create_session("ses_window")
    await web.board.delivered("ses_window", 0)
    async with signed_in_http(web.url, viewer_token) as http:
        feed = await open_feed(http)
        await feed.next_of("reset")
        await client.replace_todos("ses_window", [Todo(content="1")])
        old = (await feed.next_of("change")).id
        for content in ("2", "3", "4"):
            await client.replace_todos("ses_window", [Todo(content=content)])
            await feed.next_of("change")
        await feed.aclose()

        resumed = await open_feed(http, last_event_id=old)
        frame = await resumed.next_of("change", "reset")
        await resumed.aclose()

    assert frame.event == "reset"


async def test_a_removed_session_is_one_removed_frame(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_gone")
    await web.board.delivered("ses_gone", 0)
    feed = await open_feed(http)
    await feed.next_of("reset")

    await client.remove_session("ses_gone")

    frame = await feed.next_of("change", "removed")
    await feed.aclose()
    assert (frame.event, frame.data["session_id"], frame.data["change"]["summary"]) == (
        "removed",
        "ses_gone",
        "session removed",
    )


async def test_a_reset_from_sessiontodo_sends_every_stream_the_new_board(
    start: Callable[..., Awaitable[RunningServer]], launch_web: LaunchWeb, viewer_token: str
) -> None:
    first = await start(progress_interval=0.2)
    web = await launch_web(TodoClient.connect(first.address))
    async with TodoClient.connect(first.address) as client:
        await client.create_session("ses_old")
    await web.board.delivered("ses_old", 0)  # else it could come as a change after the first reset
    async with signed_in_http(web.url, viewer_token) as http:
        feed = await open_feed(http)
        await feed.next_of("reset")
        # Another memory server on the same address: the board's cursor means nothing there.
        port = int(first.address.rsplit(":", 1)[1])
        await first.stop()
        second = await start(port=port, progress_interval=0.2)
        async with TodoClient.connect(second.address) as client:
            await client.create_session("ses_new")

        reset = await feed.next_of("reset", timeout=WAIT * 2)
        # The board may reconnect before ses_new is made: then ses_new follows the reset as a change.
        shown = {session["id"] for session in reset.data["sessions"]}
        while "ses_new" not in shown:
            shown.add((await feed.next_of("change")).data["session"]["id"])
        await feed.aclose()

    assert "ses_old" not in shown


async def test_streams_are_told_when_sessiontodo_goes_silent_and_when_it_is_back(
    start: Callable[..., Awaitable[RunningServer]], launch_web: LaunchWeb, viewer_token: str
) -> None:
    server = await start(progress_interval=0.2, store="memory://")
    web = await launch_web(TodoClient.connect(server.address))
    async with signed_in_http(web.url, viewer_token) as http:
        feed = await open_feed(http)
        await feed.next_of("reset")
        assert (await feed.next_frame()).data == {"state": "live"}
        port = int(server.address.rsplit(":", 1)[1])

        await server.stop()
        silent = await feed.next_of("feed", timeout=WAIT)
        await start(port=port, progress_interval=0.2)
        back = await feed.next_of("feed", timeout=WAIT * 2)
        await feed.aclose()

    assert (silent.data, back.data) == ({"state": "unreachable"}, {"state": "live"})


async def test_stopping_the_board_ends_every_stream(web: RunningWeb, viewer_token: str) -> None:
    async with signed_in_http(web.url, viewer_token) as http:
        feed = await open_feed(http)
        await feed.next_of("reset")
        await eventually(lambda: web.board.page_count == 1)

        await web.stop()

        await feed.remaining()

    assert feed.response.is_stream_consumed

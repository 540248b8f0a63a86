"""Many ``/event`` subscribers at once, and what a disconnected one leaves behind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx

from sessiontodo_opencode import RunningSidecar
from sessiontodo_opencode.fanout import FanOut
from sessiontodo_server.app import RunningServer
from tests.peers.opencode.opencode_support import EventFeed, create, todos
from tests.support import eventually

SUBSCRIBERS = 100
CHANGES = 10
SESSIONS = ("ses_a", "ses_b")


async def test_a_hundred_subscribers_each_receive_every_change_of_the_sessions_they_follow(
    http: httpx.AsyncClient, open_feed: Callable[..., Awaitable[EventFeed]], server: RunningServer
) -> None:
    for session_id in SESSIONS:
        await create(http, session_id)
    # A third follow everything, the others one session each.
    follows: list[str | None] = [(None, *SESSIONS)[n % 3] for n in range(SUBSCRIBERS)]
    feeds = await asyncio.gather(*(open_feed(**({"sessionID": f} if f else {})) for f in follows))

    async def write(session_id: str) -> None:
        for n in range(CHANGES):
            response = await http.put(f"/session/{session_id}/todo", json=todos(f"{session_id}-{n}"))
            assert response.status_code == 200

    await asyncio.gather(*(write(session_id) for session_id in SESSIONS))
    received = await asyncio.gather(
        *(feed.updates(CHANGES * (len(SESSIONS) if f is None else 1)) for feed, f in zip(feeds, follows, strict=True))
    )

    for updates, followed in zip(received, follows, strict=True):
        for session_id in SESSIONS:
            expected = [[f"{session_id}-{n}"] for n in range(CHANGES)] if followed in (None, session_id) else []
            assert [texts for sid, texts in updates if sid == session_id] == expected
    assert server.book.watcher_count == 1  # the sidecar's one feed, however many sessions and subscribers


async def test_a_disconnected_subscriber_leaves_nothing_behind_on_the_gateway_or_the_service(
    http: httpx.AsyncClient,
    open_feed: Callable[..., Awaitable[EventFeed]],
    sidecar: RunningSidecar,
    server: RunningServer,
) -> None:
    await create(http, "ses_a")
    watchers_before = server.book.watcher_count
    feeds = [await open_feed(sessionID="ses_a"), await open_feed()]
    assert sidecar.bridge.subscriber_count == 2

    for feed in feeds:
        await feed.aclose()

    await eventually(lambda: sidecar.bridge.subscriber_count == 0)
    assert server.book.watcher_count == watchers_before == 1
    assert sidecar.bridge.session_count == 1
    response = await http.put("/session/ses_a/todo", json=todos("after the disconnect"))
    assert response.status_code == 200


@dataclass(frozen=True)
class _Event:
    session_id: str
    type: str
    n: int


async def test_the_catch_up_window_keeps_each_sessions_latest_event_per_kind_for_its_length_only() -> None:
    now = [100.0]
    fan_out = FanOut[_Event](subscriber_buffer=10, catch_up_window=5.0, clock=lambda: now[0])
    fan_out.publish(_Event("ses_old", "todo.updated", 1))
    now[0] += 4.0
    fan_out.publish(_Event("ses_a", "todo.updated", 2))
    fan_out.publish(_Event("ses_a", "session.updated", 3))
    fan_out.publish(_Event("ses_a", "todo.updated", 4))
    now[0] += 2.0  # ses_old's change is now 6 s old

    with fan_out.subscribe(lambda event: True) as subscription:
        received = [await subscription.receive() for _ in range(subscription.buffered)]

    assert [event.n for event in received if event] == [3, 4]

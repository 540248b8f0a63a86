"""The mirror's handling of what it cannot apply, against an in-memory OpenCode (httpx.MockTransport).

The real OpenCode drives it in tests/peers/opencode_real/test_opencode_mirror.py; here the frames are
chosen: a session sessiontodo refuses and a malformed event are skipped, the next ones applied.
"""

from __future__ import annotations

import asyncio
import json

import httpx

from sessiontodo_client import NotFound, TodoClient
from sessiontodo_opencode.mirror import OpenCodeImporter
from tests.support import eventually


def session(session_id: str, title: str) -> dict[str, object]:
    return {
        "id": session_id,
        "slug": "calm-river",
        "projectID": "global",
        "directory": "/proj",
        "title": title,
        "version": "1.18.33",
        "time": {"created": 1, "updated": 2},
    }


def frame(kind: str, **properties: object) -> bytes:
    body = {
        "directory": "/proj",
        "project": "global",
        "payload": {"id": "evt_1", "type": kind, "properties": properties},
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


LONG_TITLE = "long " * 1000

FRAMES = [
    b'data: {"payload":{"id":"evt_0","type":"server.connected","properties":{}}}\n\n',
    frame("session.created", sessionID="ses bad", info=session("ses bad", "refused")),  # not a valid id
    frame("todo.updated", sessionID="ses_good"),  # no todos: malformed
    frame(
        "session.created",
        sessionID="ses_good",
        info=session("ses_good", LONG_TITLE)  # kept, shortened; what it runs and came to kept too
        | {
            "agent": "build",
            "model": {"id": "stub-model", "providerID": "stub"},
            "summary": {"additions": 3, "deletions": 1, "files": 2, "diffs": []},
        },
    ),
    frame("todo.updated", sessionID="ses_good", todos=[{"content": "a", "status": "blocked", "priority": "low"}]),
]


def opencode(request: httpx.Request) -> httpx.Response:
    if request.url.path == "/global/event":
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=b"".join(FRAMES))
    if request.url.path == "/session":
        return httpx.Response(200, json=[])
    return httpx.Response(404, json={"name": "NotFoundError", "data": {"message": "no"}})


async def test_the_mirror_skips_what_it_cannot_apply_and_applies_the_rest(client: TodoClient) -> None:
    async with httpx.AsyncClient(base_url="http://opencode.test", transport=httpx.MockTransport(opencode)) as http:
        mirror = OpenCodeImporter(client, http)
        running = asyncio.create_task(mirror.run())

        async def mirrored() -> bool:
            try:
                return [t.content for t in (await client.get_todos("ses_good")).todos] == ["a"]
            except NotFound:
                return False

        try:
            await eventually(mirrored, timeout=30)
        finally:
            running.cancel()

    assert mirror.skipped >= 2
    assert mirror.resyncs >= 1
    stored = await client.get_session("ses_good")
    assert stored.labels == {
        "title": LONG_TITLE[:1024],
        "directory": "/proj",
        "project": "global",
        "slug": "calm-river",
        "opencode.server": "http://opencode.test",
        "agent": "build",
        "model": '{"id":"stub-model","providerID":"stub"}',
        "summary": '{"additions":3,"deletions":1,"files":2}',
    }
    assert (await client.get_todos("ses_good")).todos[0].metadata == {"opencode.status": "blocked"}
    assert [s.session_id for s in await client.list_sessions()] == ["ses_good"]

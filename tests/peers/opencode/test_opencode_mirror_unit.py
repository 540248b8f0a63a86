"""The mirror's handling of what it cannot apply, against an in-memory OpenCode (httpx.MockTransport).

The real OpenCode drives it in tests/peers/opencode_real/test_opencode_mirror.py; here the frames are
chosen: a session sessiontodo refuses and a malformed event are skipped, the next ones applied.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

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


async def test_a_mirrored_todowrite_keeps_the_owners_and_dependencies_set_in_sessiontodo(client: TodoClient) -> None:
    graph_set = asyncio.Event()
    plan = [
        {"content": "Parse", "status": "pending", "priority": "high"},
        {"content": "Test", "status": "pending", "priority": "low"},
    ]
    done = [{**plan[0], "status": "completed"}, plan[1]]

    async def frames() -> AsyncIterator[bytes]:
        yield frame("session.created", sessionID="ses_graph", info=session("ses_graph", "Graph"))
        yield frame("todo.updated", sessionID="ses_graph", todos=plan)
        await graph_set.wait()  # OpenCode's next todowrite comes after an agent claimed and linked over gRPC
        yield frame("todo.updated", sessionID="ses_graph", todos=done)
        await asyncio.Event().wait()

    def upstream(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/global/event":
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=frames())
        if request.url.path == "/session":
            return httpx.Response(200, json=[session("ses_graph", "Graph")])
        if request.url.path == "/session/ses_graph":
            return httpx.Response(200, json=session("ses_graph", "Graph"))
        if request.url.path == "/session/ses_graph/todo":
            return httpx.Response(200, json=plan if not graph_set.is_set() else done)
        return httpx.Response(404, json={"name": "NotFoundError", "data": {"message": "no"}})

    async def listed(statuses: list[str]) -> bool:
        try:
            return [t.status for t in (await client.get_todos("ses_graph")).todos] == statuses
        except NotFound:
            return False

    async with httpx.AsyncClient(base_url="http://opencode.test", transport=httpx.MockTransport(upstream)) as http:
        running = asyncio.create_task(OpenCodeImporter(client, http).run())
        try:
            await eventually(lambda: listed(["pending", "pending"]), timeout=30)
            parse, test = (await client.get_todos("ses_graph")).todos
            await client.update_todo("ses_graph", test.id, add_blocked_by=[parse.id])
            await client.claim_todo("ses_graph", "agent-1", parse.id)
            graph_set.set()
            await eventually(lambda: listed(["completed", "pending"]), timeout=30)
        finally:
            running.cancel()

    stored = (await client.get_todos("ses_graph")).todos
    assert [(t.id, t.owner, t.blocked_by) for t in stored] == [(parse.id, "agent-1", []), (test.id, "", [parse.id])]

"""An in-memory OpenCode for the mirror's tests (``httpx.MockTransport``): the routes the importer reads,
with an event stream the test feeds frame by frame; ``importing`` runs an importer against it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx

from sessiontodo_client import NotFound, RetryPolicy, TodoClient
from sessiontodo_opencode.mirror import OpenCodeImporter
from tests.peers.opencode.opencode_support import todos

SILENT = 3600.0
"""A silence timeout no test reaches: only the connected deadline may end a stream."""
FAST = RetryPolicy(initial=0.01, maximum=0.05)
LISTED_BY_DEFAULT = 100
"""Sessions OpenCode's ``GET /session`` lists without a ``limit``."""
CONNECTED = b'data: {"payload":{"id":"evt_0","type":"server.connected","properties":{}}}\n\n'


def session(session_id: str, parent_id: str | None = None) -> dict[str, Any]:
    return {
        "id": session_id,
        "slug": "calm-river",
        "projectID": "global",
        "directory": "/proj",
        "title": "work",
        "version": "1.18.33",
        "time": {"created": 1, "updated": 2},
    } | ({"parentID": parent_id} if parent_id else {})


def frame(kind: str, **properties: Any) -> bytes:
    body = {"directory": "/proj", "project": "global", "payload": {"id": "evt", "type": kind, "properties": properties}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


class FakeOpenCode:
    """OpenCode's routes the importer reads, with each ``/global/event`` connection scripted.

    ``connections`` says, per connection in order, what it does: ``"hang"`` never answers, ``"stream"``
    answers with the frames put in ``frames`` (``None`` ends the stream). Later connections stream.
    ``lists`` holds each session's list (the sessions listed), ``parents`` their parents.
    """

    def __init__(self, *connections: str) -> None:
        self.connections = list(connections)
        self.frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.lists: dict[str, list[dict[str, str]]] = {}
        self.parents: dict[str, str] = {}
        self.connects = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/global/event":
            self.connects += 1
            if (self.connections.pop(0) if self.connections else "stream") == "hang":
                await asyncio.Event().wait()
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self._stream())
        if path == "/path":
            return httpx.Response(200, json={"directory": "/proj"})
        if path == "/session":  # as OpenCode: 100 sessions unless a limit is given
            listed = list(self.lists)[: int(request.url.params.get("limit", LISTED_BY_DEFAULT))]
            return httpx.Response(200, json=[self.session(session_id) for session_id in listed])
        session_id = path.split("/")[2] if path.startswith("/session/") else ""
        if path == f"/session/{session_id}/todo" and session_id in self.lists:
            return httpx.Response(200, json=self.lists[session_id])
        if path == f"/session/{session_id}" and session_id in self.lists:
            return httpx.Response(200, json=self.session(session_id))
        return httpx.Response(404, json={"name": "NotFoundError", "data": {"message": "no"}})

    def session(self, session_id: str) -> dict[str, Any]:
        return session(session_id, self.parents.get(session_id))

    async def _stream(self) -> AsyncIterator[bytes]:
        while (chunk := await self.frames.get()) is not None:
            yield chunk

    def write(self, session_id: str, *contents: str) -> None:
        """A list the model wrote: kept for reads, and sent as ``todo.updated``."""
        self.lists[session_id] = todos(*contents)
        self.frames.put_nowait(frame("todo.updated", sessionID=session_id, todos=self.lists[session_id]))

    def reconnect(self) -> None:
        """OpenCode restarts: the stream ends and the next connection says ``server.connected`` (a resync)."""
        self.frames.put_nowait(None)
        self.frames.put_nowait(CONNECTED)


@asynccontextmanager
async def importing(client: TodoClient, opencode: FakeOpenCode, **options: Any) -> AsyncIterator[OpenCodeImporter]:
    """An importer running against ``opencode`` until the block ends."""
    async with httpx.AsyncClient(base_url="http://opencode.test", transport=httpx.MockTransport(opencode)) as http:
        importer = OpenCodeImporter(client, http, retry=FAST, silence_timeout=SILENT, **options)
        running = asyncio.create_task(importer.run())
        try:
            yield importer
        finally:
            running.cancel()
            await asyncio.gather(running, return_exceptions=True)


def holds(client: TodoClient, session_id: str, *contents: str) -> Callable[[], Any]:
    """A check that sessiontodo holds ``contents`` as the session's list."""

    async def check() -> bool:
        try:
            return [todo.content for todo in (await client.get_todos(session_id)).todos] == list(contents)
        except NotFound:
            return False

    return check

"""The importer (``sessiontodo-opencode-mirror``) stays in step: after a reconnection OpenCode never
answers, and after another client changed an imported session in sessiontodo.

OpenCode is in memory (``httpx.MockTransport``), with an event stream the test feeds frame by frame;
sessiontodo is a real server. The real OpenCode drives the importer in tests/peers/opencode_real/.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from sessiontodo_client import NotFound, RetryPolicy, Todo, TodoClient
from sessiontodo_opencode.mirror import OpenCodeImporter
from tests.support import eventually

SILENT = 3600.0
"""A silence timeout no test reaches: only the connected deadline may end a stream."""
FAST = RetryPolicy(initial=0.01, maximum=0.05)
BOUND = 30.0
"""Seconds a check may take on a loaded machine; far below the silence timeout, which a hang would need."""


def session(session_id: str) -> dict[str, Any]:
    return {
        "id": session_id,
        "slug": "calm-river",
        "projectID": "global",
        "directory": "/proj",
        "title": "work",
        "version": "1.18.33",
        "time": {"created": 1, "updated": 2},
    }


def frame(kind: str, **properties: Any) -> bytes:
    body = {"directory": "/proj", "project": "global", "payload": {"id": "evt", "type": kind, "properties": properties}}
    return b"data: " + json.dumps(body).encode() + b"\n\n"


CONNECTED = b'data: {"payload":{"id":"evt_0","type":"server.connected","properties":{}}}\n\n'


def todos(*contents: str) -> list[dict[str, str]]:
    return [{"content": content, "status": "pending", "priority": "high"} for content in contents]


class FakeOpenCode:
    """OpenCode's routes the importer reads, with each ``/global/event`` connection scripted.

    ``connections`` says, per connection in order, what it does: ``"hang"`` never answers, ``"stream"``
    answers with the frames put in ``frames`` (``None`` ends the stream). Later connections stream.
    """

    def __init__(self, *connections: str) -> None:
        self.connections = list(connections)
        self.frames: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.lists: dict[str, list[dict[str, str]]] = {}
        self.connects = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/global/event":
            self.connects += 1
            if (self.connections.pop(0) if self.connections else "stream") == "hang":
                await asyncio.Event().wait()
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=self._stream())
        if path == "/session":
            return httpx.Response(200, json=[session(session_id) for session_id in self.lists])
        session_id = path.split("/")[2] if path.startswith("/session/") else ""
        if path == f"/session/{session_id}/todo" and session_id in self.lists:
            return httpx.Response(200, json=self.lists[session_id])
        if path == f"/session/{session_id}" and session_id in self.lists:
            return httpx.Response(200, json=session(session_id))
        return httpx.Response(404, json={"name": "NotFoundError", "data": {"message": "no"}})

    async def _stream(self) -> AsyncIterator[bytes]:
        while (chunk := await self.frames.get()) is not None:
            yield chunk

    def write(self, session_id: str, *contents: str) -> None:
        """A list the model wrote: kept for reads, and sent as ``todo.updated``."""
        self.lists[session_id] = todos(*contents)
        self.frames.put_nowait(frame("todo.updated", sessionID=session_id, todos=self.lists[session_id]))


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
    async def check() -> bool:
        try:
            return [todo.content for todo in (await client.get_todos(session_id)).todos] == list(contents)
        except NotFound:
            return False

    return check


async def test_a_reconnection_opencode_never_answers_is_made_again_and_the_lists_are_read_again(
    client: TodoClient, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = FakeOpenCode("stream", "hang")
    async with importing(client, opencode, connected_deadline=0.3):
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "before the restart")
        await eventually(holds(client, "ses_a", "before the restart"), timeout=BOUND)

        opencode.frames.put_nowait(None)  # OpenCode restarts: its stream ends, the next connection hangs
        opencode.lists["ses_a"] = todos("written while restarting")  # todo.updated is not replayed
        opencode.frames.put_nowait(CONNECTED)  # for the connection after the hung one

        await eventually(holds(client, "ses_a", "written while restarting"), timeout=BOUND)

    assert opencode.connects >= 3
    assert "interrupted: no server.connected within 0.3s; reconnecting" in caplog.text


async def test_a_list_equal_to_the_one_imported_is_written_again_after_another_client_changed_it(
    client: TodoClient,
) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "the model's plan")
        await eventually(holds(client, "ses_a", "the model's plan"), timeout=BOUND)
        elsewhere = await client.replace_todos("ses_a", [Todo(content="changed elsewhere")], origin="board")
        await eventually(lambda: importer.held_revision("ses_a") == elsewhere.revision, timeout=BOUND)

        opencode.write("ses_a", "the model's plan")  # the model writes its list again, unchanged

        await eventually(holds(client, "ses_a", "the model's plan"), timeout=BOUND)


async def test_an_unchanged_list_sessiontodo_holds_is_not_written_again(client: TodoClient) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "plan")
        await eventually(holds(client, "ses_a", "plan"), timeout=BOUND)
        first = (await client.get_todos("ses_a")).revision
        opencode.write("ses_a", "plan")
        opencode.write("ses_b", "marker")  # applied after the repeat, in order
        await eventually(holds(client, "ses_b", "marker"), timeout=BOUND)

    assert (await client.get_todos("ses_a")).revision == first


async def test_a_session_whose_server_label_another_client_removed_is_no_longer_held(client: TodoClient) -> None:
    opencode = FakeOpenCode()
    async with importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        opencode.frames.put_nowait(frame("session.created", sessionID="ses_a", info=session("ses_a")))
        opencode.write("ses_a", "plan")
        await eventually(holds(client, "ses_a", "plan"), timeout=BOUND)

        await client.update_session("ses_a", remove_labels=["opencode.server"], origin="board")

        await eventually(lambda: importer.held_revision("ses_a") is None, timeout=BOUND)

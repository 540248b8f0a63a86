"""Helpers of the OpenCode gateway tests: a strict SSE reader and request bodies."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from tests.support import eventually

SKIPPED = {"server.heartbeat", "session.created", "session.updated", "session.deleted", "todo.updated"}


class EventFeed:
    """One ``GET /event`` stream, parsed strictly: every frame must be exactly ``data: <json>\\n\\n``."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_raw()
        self._buffer = b""
        self.raw = b""
        """Every byte received so far, to check the framing."""

    async def next_event(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next envelope, heartbeats included."""
        async with asyncio.timeout(timeout):
            return await self._next_envelope()

    async def next_events(self, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The next ``count`` envelopes (of ``/event`` or ``/global/event``), heartbeats left out: a test
        sidecar sends one every 0.3 s whatever else it sends, so on a busy machine one falls between any two."""
        events: list[dict[str, Any]] = []
        async with asyncio.timeout(timeout):
            while len(events) < count:
                envelope = await self._next_envelope()
                if envelope.get("payload", envelope)["type"] != "server.heartbeat":
                    events.append(envelope)
        return events

    async def next_update(self, timeout: float = 10.0) -> dict[str, Any]:
        """The next ``todo.updated``'s properties, skipping heartbeats and session events."""
        return await self.next_of("todo.updated", timeout)

    async def next_of(self, kind: str, timeout: float = 10.0) -> dict[str, Any]:
        """The properties of the next event of type ``kind``, skipping heartbeats and other session events."""
        async with asyncio.timeout(timeout):
            while True:
                envelope = await self._next_envelope()
                if envelope["type"] == kind:
                    properties: dict[str, Any] = envelope["properties"]
                    return properties
                assert envelope["type"] in SKIPPED, envelope

    async def _next_envelope(self) -> dict[str, Any]:
        while b"\n\n" not in self._buffer:
            chunk = await anext(self._chunks)
            self.raw += chunk
            self._buffer += chunk
        frame, self._buffer = self._buffer.split(b"\n\n", 1)
        assert b"\r" not in frame, frame
        assert frame.startswith(b"data: "), frame
        assert b"\n" not in frame, frame
        envelope: dict[str, Any] = json.loads(frame.removeprefix(b"data: "))
        return envelope

    async def updates(self, count: int, timeout: float = 10.0) -> list[tuple[str, list[str]]]:
        """The next ``count`` updates as ``(sessionID, [content…])``."""
        return [contents(await self.next_update(timeout)) for _ in range(count)]

    async def aclose(self) -> None:
        await self.response.aclose()


def contents(properties: dict[str, Any]) -> tuple[str, list[str]]:
    return properties["sessionID"], [todo["content"] for todo in properties["todos"]]


def todos(*texts: str, status: str = "pending", priority: str = "medium") -> list[dict[str, str]]:
    """A request body for ``PUT /session/{id}/todo``."""
    return [{"content": text, "status": status, "priority": priority} for text in texts]


async def create(http: httpx.AsyncClient, session_id: str, parent_id: str | None = None) -> None:
    """``POST /session`` through the sidecar, which must succeed."""
    body: dict[str, str] = {"id": session_id} | ({"parentID": parent_id} if parent_id else {})
    response = await http.post("/session", json=body)
    assert response.status_code == 200, response.text


async def create_once_serving(http: httpx.AsyncClient, session_id: str, timeout: float) -> None:
    """``POST /session`` through a sidecar process that may still be starting, retried until it succeeds."""

    async def created() -> bool:
        try:
            return (await http.post("/session", json={"id": session_id})).status_code == 200
        except httpx.TransportError:
            return False

    await eventually(created, timeout=timeout)


async def put(http: httpx.AsyncClient, session_id: str, *texts: str) -> None:
    """``PUT /session/{id}/todo`` with pending todos named ``texts``, which must succeed."""
    response = await http.put(f"/session/{session_id}/todo", json=todos(*texts))
    assert response.status_code == 200, response.text

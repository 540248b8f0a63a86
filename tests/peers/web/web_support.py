"""Helpers of the web board's tests: the board as a process, signing in, and a strict reader of its event stream."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sessiontodo_web import RunningWeb
from tests.peers.web.browser_remote import Page
from tests.support import ROOT, free_port

WAIT = 10.0
"""Seconds anything the tests wait for may take."""

LaunchWeb = Callable[..., Awaitable[RunningWeb]]
"""The ``launch_web`` fixture: start a board with setting overrides (and optionally its own client)."""


@dataclass(frozen=True)
class Frame:
    """One frame of ``/api/events``: its id (a feed cursor, or None), its event name and its data."""

    id: str | None
    event: str
    data: dict[str, Any]


class BoardFeed:
    """One ``/api/events`` stream, parsed strictly: ``retry:``, comments and ``[id:] event: data:`` frames."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_raw()
        self._buffer = b""

    async def next_frame(self, timeout: float = WAIT) -> Frame:
        """The next event frame (comments and the ``retry:`` line skipped)."""
        async with asyncio.timeout(timeout):
            while True:
                while b"\n\n" not in self._buffer:
                    self._buffer += await anext(self._chunks)
                raw, self._buffer = self._buffer.split(b"\n\n", 1)
                assert b"\r" not in raw, raw
                fields = dict(line.split(": ", 1) for line in raw.decode().split("\n") if not line.startswith(":"))
                if set(fields) <= {"retry"}:
                    continue
                assert set(fields) in ({"event", "data"}, {"id", "event", "data"}), raw
                return Frame(fields.get("id"), fields["event"], json.loads(fields["data"]))

    async def next_of(self, *events: str, timeout: float = WAIT) -> Frame:
        """The next frame of one of ``events``, skipping ``feed`` status frames."""
        while True:
            found = await self.next_frame(timeout)
            if found.event in events:
                return found
            assert found.event == "feed", found

    async def remaining(self, timeout: float = WAIT) -> bytes:
        """Everything up to the end of the stream."""
        async with asyncio.timeout(timeout):
            return self._buffer + b"".join([chunk async for chunk in self._chunks])

    async def aclose(self) -> None:
        await self.response.aclose()


@asynccontextmanager
async def signed_in_http(base_url: str, token: str) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client holding a sign-in cookie, sending the CSRF token the board gave it."""
    async with httpx.AsyncClient(base_url=base_url, timeout=WAIT) as http:
        signed_in = await http.post("/login", data={"token": token})
        assert signed_in.status_code == 303, signed_in.text
        me = await http.get("/api/me")
        assert me.status_code == 200, me.text
        http.headers["x-csrf-token"] = me.json()["csrf_token"]
        yield http


async def open_feed(http: httpx.AsyncClient, last_event_id: str | None = None) -> BoardFeed:
    headers = {"last-event-id": last_event_id} if last_event_id else {}
    response = await http.send(http.build_request("GET", "/api/events", headers=headers), stream=True)
    assert response.status_code == 200, (response.status_code, await response.aread())
    return BoardFeed(response)


async def sign_in(page: Page, base_url: str, token: str) -> None:
    """Sign in through the sign-in form, as a viewer does, and wait for the whole board."""
    assert await page.goto(f"{base_url}/") == 200
    await page.fill("#token", token)
    await page.click("#token-form button[type=submit]")
    await page.wait_for("body[data-board=ready]")


def session_row(session_id: str) -> str:
    """The selector of a session's row in the tree."""
    return f'[role=treeitem][data-session-id="{session_id}"]'


def todo_row(todo_id: str) -> str:
    return f'#todos li[data-todo-id="{todo_id}"]'


async def select_session(page: Page, session_id: str) -> None:
    """Click a session's row and wait for its list."""
    await page.click(f"{session_row(session_id)} > .row")
    await page.wait_for(f'#detail-meta:text-matches("^{session_id} ")')


class WebProcess:
    """``python -m sessiontodo_web`` on a fixed free port, for the tests that kill and restart it."""

    def __init__(self, sessiontodo_address: str, token_file: Path, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._argv = [
            sys.executable,
            "-m",
            "sessiontodo_web",
            "--sessiontodo-address",
            sessiontodo_address,
            "--port",
            str(self.port),
            "--viewer-token-file",
            str(token_file),
            *flags,
        ]
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> WebProcess:
        self.process = await asyncio.create_subprocess_exec(*self._argv, cwd=ROOT, env=dict(os.environ))
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient(base_url=self.url) as http:
            while True:
                try:
                    if (await http.get("/login")).status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                assert self.process.returncode is None, "the board exited while starting"
                assert time.monotonic() < deadline, "the board did not start"
                await asyncio.sleep(0.05)

    async def kill(self) -> None:
        """SIGKILL: what a crash looks like to the pages."""
        assert self.process is not None
        self.process.kill()
        await self.process.wait()

    async def stop(self) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.process.wait(), 15.0)

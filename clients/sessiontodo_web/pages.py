"""What each open page is sent: Server-Sent Events frames through a bounded buffer.

A page that stops reading never holds the board up, and never makes it hold memory without
bound: once more than ``capacity`` frames wait, they are dropped and the page is sent the whole
board instead (a ``reset``), the way a lagging feed gets a RESET from sessiontodo.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from pydantic import BaseModel


def frame(event: str, data: BaseModel, event_id: str | None = None) -> bytes:
    """One SSE frame; with ``event_id`` (a feed cursor) it is where a reconnecting page resumes."""
    if event_id is not None and any(character in event_id for character in "\r\n\0"):
        raise ValueError(f"an event id cannot hold line breaks: {event_id!r}")
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: ".encode() + data.model_dump_json().encode() + b"\n\n"


class PageStream:
    """The frames one page has not been sent yet, in order, or "the whole board" once it fell behind."""

    def __init__(self, capacity: int, whole_board: Callable[[], bytes], backlog: list[bytes]) -> None:
        self._capacity = capacity
        self._whole_board = whole_board
        self._frames = deque(backlog)
        self._behind = False
        self._wakeup = asyncio.Event()
        self._closed = False
        self.resets = 0
        """How many times this page fell behind and was sent the whole board."""

    def push(self, data: bytes) -> None:
        if self._behind:
            return  # the whole board, built when the page reads next, will hold this change
        if len(self._frames) >= self._capacity:
            self.fall_behind()
            return
        self._frames.append(data)
        self._wakeup.set()

    def fall_behind(self) -> None:
        """Drop what waits: the page is sent the whole board as it is when it reads next."""
        self._frames.clear()
        self._behind = True
        self.resets += 1
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def receive(self) -> bytes | None:
        """The next frame to send, or None once the board has closed."""
        while True:
            if self._closed:
                return None
            if self._behind:
                self._behind = False
                return self._whole_board()
            if self._frames:
                return self._frames.popleft()
            self._wakeup.clear()
            await self._wakeup.wait()

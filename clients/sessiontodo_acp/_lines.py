"""Newline-delimited JSON-RPC in both directions: one line reader and one line writer.

ACP frames each message as one line. The proxy reads both directions with ``read_line``, so
both treat an over-long line the same way: it is consumed whole and reported as
``Oversized`` (never split into pieces that could be mistaken for messages), and the proxy
refuses it with a JSON-RPC error instead of forwarding it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class Oversized:
    """A line longer than the reader's limit, already consumed and discarded."""

    size: int


async def read_line(reader: asyncio.StreamReader) -> bytes | Oversized:
    """The next line with its newline (the last one may lack it), ``b""`` at the end of the stream,
    or ``Oversized`` for a line longer than ``reader``'s limit, consumed up to and including its newline."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as end:
        return end.partial
    except asyncio.LimitOverrunError as overrun:
        skipped = 0
        while True:
            # ``consumed`` bytes hold no newline (or end just before it): drop them, look again.
            try:
                skipped += len(await reader.readexactly(overrun.consumed))
                skipped += len(await reader.readuntil(b"\n"))
                return Oversized(skipped)
            except asyncio.LimitOverrunError as again:
                overrun = again
            except asyncio.IncompleteReadError as end:
                return Oversized(skipped + len(end.partial))


def refusal(size: int, limit: int) -> dict[str, Any]:
    """The JSON-RPC error that answers a message the proxy would not forward (its id cannot be read)."""
    return {
        "jsonrpc": "2.0",
        "id": None,
        "error": {
            "code": -32600,
            "message": f"Invalid Request: a message of {size} bytes exceeds the {limit}-byte limit of "
            "sessiontodo-acp-proxy (max_line_bytes); it was not forwarded",
        },
    }


def parse(line: bytes) -> dict[str, Any] | None:
    """The JSON object on ``line``, or None for anything else (which is still forwarded)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


class ByteWriter(Protocol):
    """Where bytes go: an ``asyncio.StreamWriter`` or anything with its ``write`` and ``drain``."""

    def write(self, data: bytes) -> object: ...

    async def drain(self) -> None: ...


class LineOutput:
    """A peer's input (the editor's stdout, the agent's stdin): whole lines from several writers, never mixed."""

    def __init__(self, writer: ByteWriter) -> None:
        self._writer = writer
        self._lock = asyncio.Lock()

    def exclusive(self) -> asyncio.Lock:
        """Hold this while writing one whole line."""
        return self._lock

    async def write(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def write_message(self, message: dict[str, Any]) -> None:
        await self.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")

"""The mirror's resync writes in ``BatchWrite`` calls instead of one call per write.

What a resync writes for one session (a create with its list, a label change, a list, a removal)
is one ``Unit``: its writes always travel in the same batch, so nobody sees a created session
empty. ``BatchWriter`` packs units, in order, into batches under the server's limits (at most
``MAX_BATCH_WRITES`` writes, and at most ``MAX_BATCH_BYTES`` bytes so a batch stays under gRPC's
4 MiB receive limit). A batch is atomic: a write the server refuses fails it whole and names
itself (``writeIndex``), so the units before it are sent again as a batch, the refused unit is
handed to the unary fallback (which skips what cannot be written, as every unary write of the
mirror does), and the units after it go on in the next batch: every write is applied once or
refused once, never lost and never applied twice. A batch refused as a whole (an error naming no
write: too large, a deadline passed) has its units written by unary calls, which write whole
lists and find existing sessions, so a repeat of what it may have applied duplicates nothing. A
server that does not take batches (UNIMPLEMENTED: a server older than 0.3) gets every unit by
unary calls, for as long as the ``BatchWriter`` lives (one resync). UNAVAILABLE goes up: the
mirror reconnects and resyncs.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

from sessiontodo_client import MAX_BATCH_WRITES, ServiceError, Unavailable, Unimplemented, Write, WriteResult
from sessiontodo_client.conversions import write_to_pb

log = logging.getLogger(__name__)

MAX_BATCH_BYTES = 3 * 1024 * 1024
"""Bytes of writes in one batch: under gRPC's default 4 MiB receive limit, as the server keeps its pages."""


class Unit(Protocol):
    """Writes that go in one batch together."""

    @property
    def writes(self) -> Sequence[Write]: ...


U = TypeVar("U", bound=Unit)


class BatchSender(Protocol):
    """``TodoClient.batch_write``, the one call a ``BatchWriter`` makes."""

    async def __call__(self, writes: Sequence[Write], *, origin: str) -> list[WriteResult]: ...


class BatchWriter(Generic[U]):
    """Sends the writes of the units it is given in as few batches as the limits allow, in order.

    ``written(unit, results)`` is told each unit's results once its batch is applied;
    ``fallback(unit)`` writes a unit by unary calls (a refused unit, or every unit when the
    server takes no batches). Errors that are not one write's (UNAVAILABLE above all) go up.
    """

    def __init__(
        self,
        send: BatchSender,
        *,
        origin: str,
        written: Callable[[U, Sequence[WriteResult]], Awaitable[None]],
        fallback: Callable[[U], Awaitable[None]],
        max_writes: int = MAX_BATCH_WRITES,
        max_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        self._send = send
        self._origin = origin
        self._written = written
        self._fallback = fallback
        self._max_writes = max_writes
        self._max_bytes = max_bytes
        self._queued: list[U] = []
        self._queued_writes = 0
        self._queued_bytes = 0
        self.batching = True
        """False once the server answered that it takes no batches."""
        self.batches = 0
        """Batches applied."""
        self.batched_writes = 0
        """Writes applied in them."""
        self.unbatched = 0
        """Units handed to the fallback."""

    async def add(self, unit: U) -> None:
        """Queue ``unit``, sending the queued units first if it does not fit beside them."""
        count = len(unit.writes)
        if count == 0:
            return
        if count > self._max_writes:
            raise ValueError(f"a unit of {count} writes never fits a batch of {self._max_writes}")
        size = sum(write_to_pb(write).ByteSize() for write in unit.writes)
        if self._queued and (
            self._queued_writes + count > self._max_writes or self._queued_bytes + size > self._max_bytes
        ):
            await self.flush()
        self._queued.append(unit)
        self._queued_writes += count
        self._queued_bytes += size

    async def flush(self) -> None:
        """Send every queued unit."""
        units = self._queued
        self._queued, self._queued_writes, self._queued_bytes = [], 0, 0
        await self._write(units)

    async def _write(self, units: Sequence[U]) -> None:
        while units:
            if not self.batching:
                await self._one_by_one(units)
                return
            try:
                results = await self._send([write for unit in units for write in unit.writes], origin=self._origin)
            except Unimplemented as error:
                log.info("sessiontodo takes no batches (%s): writing one call at a time", error)
                self.batching = False
                continue
            except Unavailable:
                raise
            except ServiceError as error:
                refused = _unit_of_write(units, error.write_index)
                if refused is None:  # refused as a whole (too large, say): each unit on its own
                    log.warning("a batch of %d sessions was refused (%s): writing them one by one", len(units), error)
                    await self._one_by_one(units)
                    return
                log.info("a batch write was refused (%s): that session is written on its own", error)
                await self._write(units[:refused])
                await self._one_by_one(units[refused : refused + 1])
                units = units[refused + 1 :]
                continue
            self.batches += 1
            self.batched_writes += len(results)
            start = 0
            for unit in units:
                await self._written(unit, results[start : start + len(unit.writes)])
                start += len(unit.writes)
            return

    async def _one_by_one(self, units: Sequence[U]) -> None:
        for unit in units:
            self.unbatched += 1
            await self._fallback(unit)


def _unit_of_write(units: Sequence[Unit], index: int | None) -> int | None:
    """Which unit holds the batch's write number ``index`` (None: none does, or no index)."""
    if index is None:
        return None
    for position, unit in enumerate(units):
        if index < len(unit.writes):
            return position
        index -= len(unit.writes)
    return None

"""This replica's reading of the shared feed: every change, in cursor order, exactly once.

Two paths deliver changes to the book's listener. The follower task reads the feed stream
(XREAD, blocking) and delivers what other replicas wrote. A write through this replica gets
back, from its own script, the entries it had not delivered yet, and delivers them before its
own change is published — so this replica's watchers and feeds see every replica's changes in
commit order, whichever path is faster. A change both paths carry is delivered once.

When the follower cannot bridge what it missed (the feed was trimmed past it, or Redis came
back without its data), it reports a RESET with an empty session id: every watcher re-reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessiontodo_server.stores.redis.entries import decode_entry, entry_cursor
from sessiontodo_server.todos import Change, ChangeKind

log = logging.getLogger(__name__)

READ_BATCH = 256
"""Feed entries read per call."""

_BLOCK_MS = 2000
"""How long one XREAD waits for new entries (below the connection's socket timeout)."""

_OWN_WRITE_WAIT = 1.0
"""Seconds the follower leaves an entry this replica wrote to the write itself, which publishes it."""

_RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)

Resolve = Callable[[Change], Awaitable[Change | None]]
"""Completes a feed entry whose list was left out (None: no longer kept anywhere)."""


class Follower:
    def __init__(
        self,
        read_feed: Callable[[int], Awaitable[Any]],
        read_after: Callable[[int], Awaitable[tuple[int, list[bytes]]]],
        reopen: Callable[[], Awaitable[tuple[bool, int]]],
        resolve: Resolve,
        writer: bytes,
    ) -> None:
        self._read_feed = read_feed
        self._read_after = read_after
        self._reopen = reopen
        self._resolve = resolve
        self._writer = writer
        self._listener: Callable[[Change], None] = lambda change: None
        self._availability: Callable[[bool], Awaitable[None]] | None = None
        self._lock = asyncio.Lock()
        self._advanced = asyncio.Event()
        self.delivered = 0
        """Every change up to this cursor has been delivered (or is being published by its writer)."""

    def on_change(self, listener: Callable[[Change], None]) -> None:
        self._listener = listener

    def on_availability(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        self._availability = listener

    def advance(self, cursor: int) -> None:
        """This replica's own change at ``cursor`` is being published by the write that made it."""
        if cursor > self.delivered:
            self.delivered = cursor
            self._advanced.set()

    async def bridge(self, missed: Sequence[Any], before: int) -> None:
        """Deliver every change before cursor ``before`` (a write's own), given what its script returned."""
        if self.delivered >= before - 1:
            return
        behind, *entries = missed
        if not behind and not self._lock.locked() and self._deliver_complete(entries):
            return
        async with self._lock:
            if not behind:
                await self._deliver(entries)
            while self.delivered < before - 1:
                _, page = await self._read_after(self.delivered)
                if not page or entry_cursor(page[0]) != self.delivered + 1:
                    break
                await self._deliver(page)
            if self.delivered < before - 1:
                _, cursor = await self._reopen()
                self._reset("a write found the feed trimmed past this replica", cursor)

    def _deliver_complete(self, entries: Sequence[bytes]) -> bool:
        """The fast path: entries that carry their lists, delivered now; False if any does not."""
        decoded = [decode_entry(data) for data in entries if entry_cursor(data) > self.delivered]
        if not all(complete for _, complete in decoded) or not _follows(self.delivered, decoded):
            return False
        for change, _ in decoded:
            self._hand_over(change)
        return True

    async def _deliver(self, entries: Sequence[bytes]) -> None:
        """Deliver entries in order, up to the first gap (the caller reads on or resets)."""
        for data in entries:
            cursor = entry_cursor(data)
            if cursor <= self.delivered:
                continue
            if cursor != self.delivered + 1:
                return
            change, complete = decode_entry(data)
            if not complete:
                change = await self._resolve(change) or change
            if change.cursor > self.delivered:  # the other path may have delivered it meanwhile
                self._hand_over(change)

    def _hand_over(self, change: Change) -> None:
        self.delivered = change.cursor
        self._advanced.set()
        self._listener(change)

    def _reset(self, why: str, cursor: int) -> None:
        log.warning("%s: every watcher re-reads (cursor %d -> %d)", why, self.delivered, cursor)
        self.delivered = cursor
        self._advanced.set()
        self._listener(Change("", ChangeKind.RESET, 0, cursor=cursor))

    async def run(self) -> None:
        """The store's own task: read the feed as it grows; after a disconnect, check and go on."""
        failures = 0
        while True:
            try:
                if failures:
                    await self._recover()
                    failures = 0
                    log.info("following the redis store again")
                    await self._announce(True)
                entries = await self._read_feed(self.delivered)
                async with self._lock:
                    await self._follow(entries)
            except Exception as error:  # a lost connection, or a bug: either way never stop following
                if not failures:
                    lost = isinstance(error, RedisConnectionError | RedisTimeoutError)
                    log.warning("lost the redis store (%r); reconnecting", error, exc_info=not lost)
                    await self._announce(False)
                await asyncio.sleep(_RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)])
                failures += 1

    async def _follow(self, entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
        if not entries:
            return
        first = int(entries[0][0].partition(b"-")[0])
        if first > self.delivered + 1:
            _, cursor = await self._reopen()
            self._reset("the feed was trimmed past this replica", cursor)
            return
        for entry_id, fields in entries:
            cursor = int(entry_id.partition(b"-")[0])
            if cursor == self.delivered + 1 and fields.get(b"w") == self._writer:
                await self._await_own_write(cursor)
            if cursor > self.delivered:
                await self._deliver([fields[b"c"]])

    async def _await_own_write(self, cursor: int) -> None:
        """Leave this replica's own change to its write (whose reply is usually just behind)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _OWN_WRITE_WAIT
        while self.delivered < cursor and (remaining := deadline - loop.time()) > 0:
            self._advanced.clear()
            try:
                await asyncio.wait_for(self._advanced.wait(), remaining)
            except TimeoutError:
                break

    async def _recover(self) -> None:
        """Back after a disconnect: Redis may have restarted, or lost data."""
        recreated, cursor = await self._reopen()
        if recreated:
            self._reset("the redis store's feed was re-created", cursor)
        elif cursor < self.delivered:
            self._reset("the redis store lost changes this replica had seen", cursor)

    async def _announce(self, available: bool) -> None:
        if self._availability is not None:
            await self._availability(available)


def _follows(delivered: int, decoded: Sequence[tuple[Change, bool]]) -> bool:
    """Whether the changes continue the feed right after ``delivered``, without a gap."""
    return all(change.cursor == delivered + n for n, (change, _) in enumerate(decoded, 1))

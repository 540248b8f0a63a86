"""This replica's reading of the shared feed: every change, in cursor order, exactly once.

Two paths deliver changes to the book's listener. The follower task reads the feed stream
whenever another replica's write wakes it (each write publishes a wake-up to every *other*
registered replica, so a replica on its own is never woken) and every ``POLL_SECONDS`` in case
a wake-up was lost. A write through this replica gets back, from its own script, the entries it
had not delivered yet, and delivers them before its own change is published — so this
replica's watchers and feeds see every replica's changes in commit order, whichever path is
faster. A change both paths carry is delivered once.

When the follower cannot bridge what it missed (the feed was trimmed past it, or Redis came
back without its data), it reports a RESET with an empty session id: every watcher re-reads.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessiontodo_server.domain.values import Change, ChangeKind
from sessiontodo_server.stores.redis.entries import decode_entry, entry_cursor

log = logging.getLogger(__name__)

READ_BATCH = 256
"""Feed entries read per call."""

POLL_SECONDS = 1.0
"""The longest a change from another replica waits when its wake-up was lost."""

HEARTBEAT_SECONDS = 10.0
"""How often a replica renews its registration (``lua/heartbeat.lua`` forgets it after 30 s)."""

_RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)

Woken = Callable[[float], Awaitable[list[bytes]]]
"""Waits up to a timeout for wake-ups; the entries they carried (``b""`` for none), [] if none came."""

WakeUps = Callable[[], AbstractAsyncContextManager[Woken]]
"""Subscribes to this replica's wake-ups."""


class Follower:
    def __init__(
        self,
        read_after: Callable[[int], Awaitable[tuple[int, list[bytes]]]],
        reopen: Callable[[], Awaitable[tuple[bool, int]]],
        resolve: Callable[[Change], Awaitable[Change]],
        wake_ups: WakeUps,
        heartbeat: Callable[[bool], Awaitable[object]],
    ) -> None:
        self._read_after = read_after
        self._reopen = reopen
        self._resolve = resolve
        self._wake_ups = wake_ups
        self._heartbeat = heartbeat
        self._listener: Callable[[Change], None] = lambda change: None
        self._availability: Callable[[bool], Awaitable[None]] | None = None
        self._lock = asyncio.Lock()
        self.delivered = 0
        """Every change up to this cursor has been delivered (or is being published by its writer)."""

    def on_change(self, listener: Callable[[Change], None]) -> None:
        self._listener = listener

    def on_availability(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        self._availability = listener

    def advance(self, cursor: int) -> None:
        """This replica's own change at ``cursor`` is being published by the write that made it."""
        self.delivered = max(self.delivered, cursor)

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
            await self._catch_up(before - 1)
            if self.delivered < before - 1:
                _, cursor = await self._reopen()
                self._reset("a write found the feed trimmed past this replica", cursor)

    async def _catch_up(self, until: int | None = None) -> None:
        """Read the feed on from what was delivered (up to ``until``, or its end); stops at a gap."""
        while until is None or self.delivered < until:
            _, entries = await self._read_after(self.delivered)
            if not entries or entry_cursor(entries[0]) != self.delivered + 1:
                return
            await self._deliver(entries)
            if len(entries) < READ_BATCH:
                return

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
                change = await self._resolve(change)
            if change.cursor > self.delivered:  # the other path may have delivered it meanwhile
                self._hand_over(change)

    def _hand_over(self, change: Change) -> None:
        self.delivered = change.cursor
        self._listener(change)

    def _reset(self, why: str, cursor: int) -> None:
        log.warning("%s: every watcher re-reads (cursor %d -> %d)", why, self.delivered, cursor)
        self.delivered = cursor
        self._listener(Change("", ChangeKind.RESET, 0, cursor=cursor))

    async def run(self) -> None:
        """The store's own task: follow the feed; after a disconnect, check what happened and go on."""
        failures = 0
        while True:
            try:
                async with self._wake_ups() as woken:
                    if failures:
                        await self._recover()
                        log.info("following the redis store again")
                        await self._announce(True)
                    failures = 0
                    await self._follow(woken)
            except Exception as error:  # a lost connection, or a bug: either way never stop following
                if not failures:
                    lost = isinstance(error, RedisConnectionError | RedisTimeoutError | TimeoutError)
                    log.warning("lost the redis store (%r); reconnecting", error, exc_info=not lost)
                    await self._announce(False)
                await asyncio.sleep(_RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)])
                failures += 1

    async def _follow(self, woken: Woken) -> None:
        """Read the feed when woken without the change, or after a gap, or every POLL_SECONDS."""
        loop = asyncio.get_running_loop()
        next_heartbeat = loop.time()
        read = True
        while True:
            if loop.time() >= next_heartbeat:
                await self._heartbeat(True)
                next_heartbeat = loop.time() + HEARTBEAT_SECONDS
            if read:
                async with self._lock:
                    _, entries = await self._read_after(self.delivered)
                    if entries and entry_cursor(entries[0]) > self.delivered + 1:
                        _, cursor = await self._reopen()
                        self._reset("the feed was trimmed past this replica", cursor)
                    elif entries:
                        await self._deliver(entries)
                        if len(entries) == READ_BATCH:
                            continue  # more to read
            carried = await woken(min(POLL_SECONDS, max(0.0, next_heartbeat - loop.time())))
            read = not carried or self._lock.locked() or not self._deliver_complete([e for e in carried if e])
            read = read or not all(carried)

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

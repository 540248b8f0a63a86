"""Group commit: journal writes made while a batch is being written share the next one.

Every write submitted while a batch is in its transaction (and, with ``fsync``, its fsync)
joins the next batch: one transaction and one sync for all of them, so durability costs one
sync per batch instead of one per write. Batches are written strictly in submission order,
and each write's ``done`` hook runs in that order, in the event loop, the moment its batch is
durable, before anything else can observe the store; when a batch fails, it and every write
queued behind it (which may build on it) fail, their hooks called newest first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Record = TypeVar("Record")
T = TypeVar("T")

Done = Callable[[BaseException | None], None]
"""Called once per write with None (durable) or the error that kept it from being written."""


@dataclass(frozen=True, slots=True)
class _Pending(Generic[Record]):
    record: Record
    done: Done
    durable: asyncio.Future[None]


class GroupCommit(Generic[Record]):
    """Writes records in batches with ``write_batch``: in a worker thread when ``threaded``
    (a sync then blocks no one: the loop keeps accepting the next batch), else in the loop.

    ``write_batch`` must write all of its records atomically (one transaction) or raise;
    ``refused`` turns what it raised into the error every waiter gets (called in the loop).
    """

    def __init__(
        self,
        write_batch: Callable[[Sequence[Record]], None],
        *,
        threaded: bool,
        refused: Callable[[Exception], Exception] = lambda error: error,
    ) -> None:
        self._write_batch = write_batch
        self._refused = refused
        self._queue: list[_Pending[Record]] = []
        self._scheduled = False
        self._writer: asyncio.Task[None] | None = None
        """The task writing batches in the thread, while there are any."""
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="journal") if threaded else None

    def submit(self, record: Record, done: Done) -> asyncio.Future[None]:
        """Queue ``record``; the future completes once it is durable (or fails with the batch's error)."""
        loop = asyncio.get_running_loop()
        pending = _Pending(record, done, loop.create_future())
        self._queue.append(pending)
        if not self._scheduled:
            # Written on the next loop iteration: every write made in this one joins the batch.
            self._scheduled = True
            if self._thread is None:
                loop.call_soon(self._write_here)
            else:
                self._writer = loop.create_task(self._write_in_thread(self._thread))
        return pending.durable

    async def run_alone(self, work: Callable[[], T]) -> T:
        """Run ``work`` (e.g. a probe write) where batches run, never during one."""
        if self._thread is None:
            return work()
        return await asyncio.get_running_loop().run_in_executor(self._thread, work)

    def _write_here(self) -> None:
        self._scheduled = False
        batch, self._queue = self._queue, []
        try:
            self._write_batch([pending.record for pending in batch])
        except Exception as error:  # every waiter gets the error instead
            self._failed(batch, error)
        else:
            self._written(batch)

    async def _write_in_thread(self, thread: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                try:
                    await loop.run_in_executor(thread, self._write_batch, [pending.record for pending in batch])
                except Exception as error:  # every waiter gets the error instead
                    self._failed(batch, error)
                else:
                    self._written(batch)
        finally:
            self._scheduled = False
            self._writer = None

    def _written(self, batch: list[_Pending[Record]]) -> None:
        for pending in batch:
            _finish(pending, None)

    def _failed(self, batch: list[_Pending[Record]], error: Exception) -> None:
        refused = self._refused(error)
        # Queued writes may build on the failed ones: they fail too, undone newest first.
        failed, self._queue = [*batch, *self._queue], []
        for pending in reversed(failed):
            _finish(pending, refused)

    async def drain(self) -> None:
        """Wait until everything submitted so far is written (or failed)."""
        while self._scheduled:
            if self._writer is not None:
                await asyncio.shield(self._writer)
            else:
                await asyncio.sleep(0)

    def close(self) -> None:
        if self._thread is not None:
            self._thread.shutdown(wait=True)


def _finish(pending: _Pending[Record], error: BaseException | None) -> None:
    pending.done(error)
    if pending.durable.done():  # its waiter gave up; the write itself is unaffected
        return
    if error is None:
        pending.durable.set_result(None)
    else:
        pending.durable.set_exception(error)

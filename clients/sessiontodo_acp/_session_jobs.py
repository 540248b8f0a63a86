"""Per-session job queues: each session's sessiontodo writes run one at a time, in order.

The ACP SDKs dispatch notifications concurrently, and sessiontodo may be unreachable for a
while, so writes are never awaited by whoever observes them: they are submitted (without
awaiting, so submission order is arrival order) and one task per busy session runs them.
A plan replacement still waiting for its turn is replaced by a newer one (the latest plan
wins, which also bounds the queue); a transient failure is retried with capped backoff for
as long as the queue lives, and any other failure is logged and the job dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import grpc

from sessiontodo_client import RetryPolicy, ServiceError

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]

TRANSIENT_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
)


def is_transient(error: Exception) -> bool:
    """Whether retrying the same call later can succeed (the service was unreachable or failing)."""
    if isinstance(error, ServiceError):
        return error.code in TRANSIENT_CODES
    return isinstance(error, ConnectionError | TimeoutError)


@dataclass
class _Queued:
    job: Job
    description: str
    replaceable: bool


@dataclass
class _SessionQueue:
    jobs: deque[_Queued] = field(default_factory=deque)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class SessionJobs:
    """One ordered job queue per session, each drained by a task this object owns."""

    def __init__(self, backoff: RetryPolicy = RetryPolicy()) -> None:
        self._backoff = backoff
        self._queues: dict[str, _SessionQueue] = {}
        self._closed = False

    def submit(self, session_id: str, job: Job, description: str, *, replaceable: bool = False) -> None:
        """Queue ``job`` after the session's earlier jobs; never waits.

        A ``replaceable`` job replaces a replaceable job that is waiting at the end of the queue.
        """
        if self._closed:
            raise RuntimeError("the session job queues are closed")
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _SessionQueue()
        queued = _Queued(job, description, replaceable)
        waiting = len(queue.jobs) - (1 if queue.task is not None else 0)
        if replaceable and waiting > 0 and queue.jobs[-1].replaceable:
            log.debug("session %s: %s replaces %s", session_id, description, queue.jobs[-1].description)
            queue.jobs[-1] = queued
        else:
            queue.jobs.append(queued)
        queue.idle.clear()
        if queue.task is None:
            queue.task = asyncio.get_running_loop().create_task(self._drain(session_id, queue))

    def pending(self, session_id: str) -> int:
        """How many of the session's jobs have not finished, the running one included."""
        queue = self._queues.get(session_id)
        return len(queue.jobs) if queue else 0

    async def wait_idle(self, session_id: str) -> None:
        """Return once the session has no unfinished job (immediately if it has none now)."""
        queue = self._queues.get(session_id)
        if queue is not None:
            await queue.idle.wait()

    async def wait_all_idle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every queue to empty; whether they did."""
        queues = [queue.idle.wait() for queue in list(self._queues.values())]
        if not queues:
            return True
        try:
            await asyncio.wait_for(asyncio.gather(*queues), timeout)
        except TimeoutError:
            return False
        return True

    async def aclose(self) -> None:
        """Cancel every queue's task; unfinished jobs are dropped."""
        self._closed = True
        tasks = [queue.task for queue in self._queues.values() if queue.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._queues.clear()

    async def _drain(self, session_id: str, queue: _SessionQueue) -> None:
        try:
            while queue.jobs:
                await self._run(session_id, queue, queue.jobs[0])
                queue.jobs.popleft()
        finally:
            queue.task = None
            queue.idle.set()
            if self._queues.get(session_id) is queue and not queue.jobs:
                del self._queues[session_id]

    async def _run(self, session_id: str, queue: _SessionQueue, queued: _Queued) -> None:
        attempt = 0
        while True:
            try:
                await queued.job()
            except Exception as error:
                if not is_transient(error):
                    log.error("session %s: %s failed and is dropped: %s", session_id, queued.description, error)
                    return
                if queued.replaceable and len(queue.jobs) > 1 and queue.jobs[1].replaceable:
                    log.warning(
                        "session %s: %s failed (%s); a newer plan replaces it", session_id, queued.description, error
                    )
                    return
                delay = self._backoff.delay(attempt)
                log.warning(
                    "session %s: %s failed (%s); retrying in %.1fs", session_id, queued.description, error, delay
                )
                await asyncio.sleep(delay)
                attempt += 1
            else:
                if attempt:
                    log.info("session %s: %s succeeded after %d retries", session_id, queued.description, attempt)
                return

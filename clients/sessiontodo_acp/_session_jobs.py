"""Per-session job queues: each session's sessiontodo writes run one at a time, in order.

The ACP SDKs dispatch notifications concurrently, and sessiontodo may be unreachable for a
while, so writes are never awaited by whoever observes them: they are submitted (without
awaiting, so submission order is arrival order) and one task per busy session runs them.

- Every plan (``replaceable``) is run, in order: an agent's plans are all stored, none coalesced
  under load. Only past ``MAX_WAITING_PLANS`` waiting plans (sessiontodo gone for long) does a
  newer plan replace the last waiting one, which bounds the queue.
- Each job is retried by the ``RetryPolicy`` (full jitter, bounded attempts, a per-job
  deadline), and only while sessiontodo is UNAVAILABLE; any other error ends it at once.
- A plan stops retrying as soon as a job queued behind it makes it moot (a newer plan, or a
  ``supersedes`` job such as removing the session), so a lifecycle job never waits behind a
  failing plan for longer than one backoff delay.
- A job that finally fails is logged and reported to its ``on_failure``; the queue moves on.
  Except a plan that ran out of retries while sessiontodo was unavailable: it is reported the
  same way, then kept at the head of its queue and tried again with the same backoff, without
  a bound, until sessiontodo takes it or a later job makes it moot. Otherwise sessiontodo would
  keep an older plan after it came back; and the session's jobs behind it (releasing it, say)
  must not overtake it. Memory stays bounded: at most ``MAX_WAITING_PLANS`` waiting plans per session.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from sessiontodo_client import RetryPolicy, is_transient
from sessiontodo_client.retry import DEFAULT_RETRY

log = logging.getLogger(__name__)

MAX_WAITING_PLANS = 1000
"""Plans of one session waiting behind the running job before a newer one replaces the last of them."""

Job = Callable[[], Awaitable[None]]
OnFailure = Callable[[Exception], None]


@dataclass
class _Queued:
    job: Job
    description: str
    replaceable: bool
    supersedes: bool
    on_failure: OnFailure | None


@dataclass
class _SessionQueue:
    jobs: deque[_Queued] = field(default_factory=deque)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None

    def moot(self, queued: _Queued) -> bool:
        """Whether a job queued behind the running plan ``queued`` makes it pointless."""
        if not queued.replaceable or len(self.jobs) < 2:
            return False
        return self.jobs[1].replaceable or any(later.supersedes for later in self.jobs)


class SessionJobs:
    """One ordered job queue per session, each drained by a task this object owns."""

    def __init__(self, policy: RetryPolicy = DEFAULT_RETRY) -> None:
        self._policy = policy
        self._until_taken = dataclasses.replace(policy, attempts=sys.maxsize, deadline=None)
        """The same backoff without a bound: for a plan kept until sessiontodo is back."""
        self._queues: dict[str, _SessionQueue] = {}
        self._closed = False

    def submit(
        self,
        session_id: str,
        job: Job,
        description: str,
        *,
        replaceable: bool = False,
        supersedes: bool = False,
        on_failure: OnFailure | None = None,
    ) -> None:
        """Queue ``job`` after the session's earlier jobs; never waits.

        A ``replaceable`` job (a plan) replaces a replaceable job waiting at the end of the queue only
        when ``MAX_WAITING_PLANS`` jobs wait already; a ``supersedes`` job drops every waiting
        replaceable job. ``on_failure(error)`` is called if the job finally fails (not when it was
        made moot).
        """
        if self._closed:
            raise RuntimeError("the session job queues are closed")
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _SessionQueue()
        queued = _Queued(job, description, replaceable, supersedes, on_failure)
        running = 1 if queue.task is not None else 0
        if supersedes:
            waiting = [job for job in list(queue.jobs)[running:] if not job.replaceable]
            queue.jobs = deque([*list(queue.jobs)[:running], *waiting])
        full = len(queue.jobs) - running >= MAX_WAITING_PLANS
        if replaceable and full and queue.jobs[-1].replaceable:
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
        retries = 0
        kept = False

        def retry_if(error: BaseException) -> bool:
            return is_transient(error) and not queue.moot(queued)

        def on_retry(error: BaseException, delay: float) -> None:
            nonlocal retries
            retries += 1
            log.log(
                logging.DEBUG if kept else logging.WARNING,
                "session %s: %s failed (%s); retrying in %.2fs",
                session_id,
                queued.description,
                error,
                delay,
            )

        policy = self._policy
        while True:
            try:
                await policy.run(queued.job, retry_if=retry_if, on_retry=on_retry)
            except Exception as error:
                if queue.moot(queued):
                    log.info(
                        "session %s: %s failed (%s); a later job replaces it", session_id, queued.description, error
                    )
                    return
                keep = not kept and queued.replaceable and is_transient(error)
                log.error(
                    "session %s: %s failed after %d retries%s: %s",
                    session_id,
                    queued.description,
                    retries,
                    "; kept, and sent once sessiontodo answers again (unless a newer plan or a removal comes first)"
                    if keep
                    else " and is dropped",
                    error,
                )
                if queued.on_failure is not None:
                    queued.on_failure(error)
                if not keep:
                    return
                kept, policy = True, self._until_taken
            else:
                if retries:
                    log.info("session %s: %s succeeded after %d retries", session_id, queued.description, retries)
                return

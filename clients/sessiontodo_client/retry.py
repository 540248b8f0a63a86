"""The one retry policy of the codebase: which errors are transient, and how long to keep trying.

Exponential backoff with full jitter (each delay drawn uniformly from zero to its cap, so many
clients that failed together do not retry together), bounded by a number of attempts and by an
overall deadline. Only ``UNAVAILABLE`` is transient: the call never reached a server that could
act on it. ``UNKNOWN``, ``INTERNAL`` and ``DEADLINE_EXCEEDED`` are not — the server may have
applied the write, or will fail the same way again — so they are raised at once.

    policy = RetryPolicy(attempts=5, initial=0.1, maximum=2.0, deadline=30.0)
    result = await policy.run(lambda: stub.GetTodos(request, timeout=10))
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

import grpc

T = TypeVar("T")

TRANSIENT_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})
"""Status codes worth repeating the same call for."""


def is_transient(error: BaseException) -> bool:
    """Whether repeating the same call later can succeed: the service was unreachable, nothing was done.

    Understands raw ``grpc.aio.AioRpcError``, the typed client's ``ServiceError`` (anything with a
    ``grpc.StatusCode`` ``code`` attribute) and a refused connection.
    """
    if isinstance(error, grpc.aio.AioRpcError):
        return error.code() in TRANSIENT_CODES
    code = getattr(error, "code", None)
    if isinstance(code, grpc.StatusCode):
        return code in TRANSIENT_CODES
    return isinstance(error, ConnectionError)


@dataclass(frozen=True)
class RetryPolicy:
    """Up to ``attempts`` tries, full-jitter delays capped at ``initial * 2**n`` and ``maximum``,
    and no new try once ``deadline`` seconds have passed since the first (``None``: no deadline).

    Frozen and cheap: make one per use (``RetryPolicy(attempts=1)`` never retries).
    """

    attempts: int = 5
    initial: float = 0.1
    maximum: float = 2.0
    deadline: float | None = 30.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.initial <= 0 or self.maximum < self.initial:
            raise ValueError(f"invalid retry policy {self!r}")
        if self.deadline is not None and self.deadline < 0:
            raise ValueError(f"invalid retry deadline {self.deadline!r}")

    def cap(self, attempt: int) -> float:
        """The longest delay after failed try number ``attempt`` (0-based): doubling, at most ``maximum``."""
        return min(self.initial * 2.0 ** min(attempt, 30), self.maximum)

    def delay(self, attempt: int) -> float:
        """A delay after failed try number ``attempt``: uniform between 0 and ``cap(attempt)`` (full jitter)."""
        return random.uniform(0, self.cap(attempt))

    async def run(
        self,
        call: Callable[[], Awaitable[T]],
        *,
        retry_if: Callable[[BaseException], bool] = is_transient,
        on_retry: Callable[[BaseException, float], None] | None = None,
    ) -> T:
        """Await ``call()`` until it succeeds; re-raise its error when not ``retry_if(error)``, when the
        attempts are used up, or when the next try would start after the deadline.

        ``on_retry(error, delay)`` is told before each wait (for logging). A try in flight is never
        cancelled: each call carries its own timeout.
        """
        loop = asyncio.get_running_loop()
        give_up_at = None if self.deadline is None else loop.time() + self.deadline
        attempt = 0
        while True:
            try:
                return await call()
            except Exception as error:
                delay = self.delay(attempt)
                attempt += 1
                if (
                    attempt >= self.attempts
                    or not retry_if(error)
                    or (give_up_at is not None and loop.time() + delay > give_up_at)
                ):
                    raise
                if on_retry is not None:
                    on_retry(error, delay)
                await asyncio.sleep(delay)


DEFAULT_RETRY = RetryPolicy()
"""The policy a client uses unless given one."""

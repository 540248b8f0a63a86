"""Background work done every few seconds for as long as the server runs (expiry, gauges).

A failed round is reported and the next one runs; cancelling the task always ends it, even when
a store's client library turns the cancellation into an error of its own (a Redis command cut
off mid-flight surfaces as "unreachable"): otherwise the loop would outlive the server, and the
process would never exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


async def repeat(step: Callable[[], Awaitable[object]], *, every: float, on_error: Callable[[Exception], None]) -> None:
    """Run ``step`` now and then every ``every`` seconds, until the task is cancelled."""
    while True:
        try:
            await step()
        except Exception as error:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise asyncio.CancelledError from error
            on_error(error)
        await asyncio.sleep(every)

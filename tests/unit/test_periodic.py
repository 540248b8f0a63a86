"""Background loops (expiry, the session gauge) end when cancelled, whatever their step raises."""

from __future__ import annotations

import asyncio

from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.domain.periodic import repeat


async def test_a_failed_round_is_reported_and_the_next_one_runs() -> None:
    rounds: list[int] = []
    errors: list[Exception] = []
    third = asyncio.Event()

    async def step() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 3:
            third.set()
        if len(rounds) == 1:
            raise Unavailable("the store is unreachable; retry")

    task = asyncio.create_task(repeat(step, every=0, on_error=errors.append))
    await asyncio.wait_for(third.wait(), timeout=5)
    task.cancel()
    assert [str(error) for error in errors] == ["the store is unreachable; retry"]


async def test_a_cancellation_a_client_turned_into_its_own_error_still_ends_the_loop() -> None:
    started = asyncio.Event()

    async def step() -> None:  # as redis-py does when a command is cut off: the cancellation becomes its error
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise Unavailable("the store is unreachable; retry") from None

    task = asyncio.create_task(repeat(step, every=0.001, on_error=lambda error: None))
    await asyncio.wait_for(started.wait(), timeout=5)
    task.cancel()
    await asyncio.wait({task}, timeout=5)
    assert task.cancelled()

"""A client started before its server, or calling while it restarts, waits for it within each call's
timeout, and says so once (``sessiontodo_client.readiness``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest

from sessiontodo_client import TodoClient, Unavailable
from tests.support import eventually, free_port

WAITING = "does not accept connections yet"


def waiting_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if WAITING in record.getMessage()]


async def test_calls_made_before_the_server_starts_wait_for_it_and_say_so_once(
    start: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="sessiontodo_client")
    port = free_port()
    async with TodoClient.connect(f"127.0.0.1:{port}", timeout=60) as client:
        calls = [asyncio.create_task(client.create_session(f"s{n}")) for n in range(3)]
        await eventually(lambda: bool(waiting_lines(caplog)), timeout=30)
        await start(port=port)
        created = await asyncio.wait_for(asyncio.gather(*calls), timeout=60)

    assert [created_now for _, created_now in created] == [True, True, True]
    assert waiting_lines(caplog) == [
        f"sessiontodo at 127.0.0.1:{port} does not accept connections yet: calls wait up to 60s each for it"
    ]


async def test_a_server_that_never_comes_is_unavailable_when_the_call_times_out() -> None:
    from sessiontodo_client import RetryPolicy

    port = free_port()
    async with TodoClient.connect(f"127.0.0.1:{port}", RetryPolicy(attempts=1), timeout=0.5) as client:
        with pytest.raises(Unavailable) as failed:
            await client.get_todos("s")

    assert failed.value.message == f"sessiontodo at 127.0.0.1:{port} did not accept a connection within 0.5s"


async def test_a_ready_timeout_caps_the_wait_below_the_calls_timeout() -> None:
    from sessiontodo_client import RetryPolicy

    port = free_port()
    async with TodoClient.connect(
        f"127.0.0.1:{port}", RetryPolicy(attempts=1), timeout=60, ready_timeout=0.2
    ) as client:
        with pytest.raises(Unavailable) as failed:
            await client.get_todos("s")

    assert failed.value.message == f"sessiontodo at 127.0.0.1:{port} did not accept a connection within 0.2s"

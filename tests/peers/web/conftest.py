"""Fixtures of the web board's tests: a board in front of a real server, a real browser, a signed-in page."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiontodo_client import TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_web import RunningWeb, Settings, start_web
from tests.peers.web.browser_remote import Browser, Page
from tests.peers.web.web_support import LaunchWeb, sign_in, signed_in_http
from tests.support.markers import mark_folder

FEED_TIMEOUT = 1.0
"""The test boards' silence before "sessiontodo is unreachable"; their servers send PROGRESS every 0.2 s."""
PROGRESS_INTERVAL = 0.2


@pytest.fixture
def viewer_token() -> str:
    return secrets.token_urlsafe(24)


@pytest.fixture
async def server(start: Callable[..., Awaitable[RunningServer]]) -> RunningServer:
    """A real server that says PROGRESS often, so that a silent one is noticed within a test."""
    return await start(progress_interval=PROGRESS_INTERVAL)


@pytest.fixture
async def launch_web(server: RunningServer, viewer_token: str) -> AsyncIterator[LaunchWeb]:
    """Start boards (in this process, on free ports) with setting overrides; all are stopped after the test."""
    started: list[tuple[RunningWeb, TodoClient]] = []

    async def _launch(client: TodoClient | None = None, **overrides: Any) -> RunningWeb:
        values: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": 0,
            "viewer_token": viewer_token,
            "feed_timeout": FEED_TIMEOUT,
            "heartbeat_interval": 0.5,
            "ready_timeout": 30.0,  # a bound only: past it the board answers from what it holds, and tests fail
            "shutdown_grace": 1.0,
        }
        values.update(overrides)
        client = client or TodoClient.connect(server.address)
        running = await start_web(Settings(**values), client)
        started.append((running, client))
        return running

    yield _launch
    for running, client in started:
        await running.stop()
        await client.close()


@pytest.fixture
async def web(launch_web: LaunchWeb) -> RunningWeb:
    return await launch_web()


@pytest.fixture
async def http(web: RunningWeb, viewer_token: str) -> AsyncIterator[httpx.AsyncClient]:
    """A signed-in HTTP client of ``web`` (cookie and CSRF token)."""
    async with signed_in_http(web.url, viewer_token) as http:
        yield http


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One chromium for the whole run: every page has a context (cookies, connections) of its own."""
    browser = Browser.launch()
    yield browser
    browser.close()


@pytest.fixture
async def new_page(browser: Browser) -> AsyncIterator[Callable[..., Awaitable[Page]]]:
    """Open pages (``color_scheme``, ``width``, ``height``); all are closed after the test."""
    opened: list[Page] = []

    async def _open(**options: Any) -> Page:
        page = await browser.new_page(**options)
        opened.append(page)
        return page

    yield _open
    for page in opened:
        await page.close()


@pytest.fixture
async def page(new_page: Callable[..., Awaitable[Page]], web: RunningWeb, viewer_token: str) -> Page:
    """A page of ``web``, signed in through the sign-in form, showing the whole board."""
    page = await new_page()
    await sign_in(page, web.url, viewer_token)
    return page


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The board's tests drive chromium through Node, or start the board as a process."""
    mark_folder(items, Path(__file__).parent, pytest.mark.process)

"""A page stays live across restarts: it says so while it reconnects, then shows everything it missed,
once. The board and sessiontodo run as real processes here, killed with SIGKILL."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from sessiontodo_client import Todo, TodoClient
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import WAIT, WebProcess, select_session, session_row, sign_in, todo_row
from tests.support import ServerProcess

NewPage = Callable[..., Awaitable[Page]]
QUICK_FEED = ("--feed-timeout", "1", "--heartbeat-interval", "0.5")
"""The board tells pages sessiontodo is silent after 1 s (the servers here send PROGRESS every 0.2 s)."""


@pytest.fixture
def token_file(tmp_path: Path, viewer_token: str) -> Path:
    path = tmp_path / "viewer-token"
    path.write_text(viewer_token)
    return path


@pytest.fixture
def sqlite_server(tmp_path: Path) -> ServerProcess:
    """A sessiontodo process with its data on disk, so that a restart keeps its sessions and cursors."""
    return ServerProcess("--store", f"sqlite:///{tmp_path}/todos.db", "--progress-interval", "0.2")


@pytest.fixture
async def web_process(sqlite_server: ServerProcess, token_file: Path) -> AsyncIterator[WebProcess]:
    with sqlite_server:
        web = WebProcess(sqlite_server.address, token_file, *QUICK_FEED)
        await web.start()
        try:
            yield web
        finally:
            await web.stop()


async def shown_todos(page: Page) -> list[str]:
    return await page.evaluate(
        "return [...document.querySelectorAll('#todos .content')].map((node) => node.textContent)"
    )


async def shown_revisions(page: Page) -> list[str]:
    return await page.evaluate("return [...document.querySelectorAll('#changes .rev')].map((node) => node.textContent)")


async def test_a_page_says_it_is_reconnecting_while_the_board_is_down_and_shows_what_it_missed_once(
    new_page: NewPage, web_process: WebProcess, sqlite_server: ServerProcess, viewer_token: str
) -> None:
    page = await new_page()
    await sign_in(page, web_process.url, viewer_token)
    async with TodoClient.connect(sqlite_server.address) as client:
        await client.create_session("ses_kept")
        await client.replace_todos("ses_kept", [Todo(id="t1", content="before")], origin="agent")
        await select_session(page, "ses_kept")
        await page.wait_for(todo_row("t1"))

        await web_process.kill()
        await page.wait_for("#connection[data-state=reconnecting]")
        await client.add_todo("ses_kept", Todo(id="t2", content="while the board was down"), origin="agent")
        await web_process.start()

        await page.wait_for(todo_row("t2"), timeout=int(WAIT * 3000))
    await page.wait_for("#connection[data-state=live]")
    assert await shown_todos(page) == ["before", "while the board was down"]


async def test_a_page_resumes_without_a_reload_after_a_restart_of_the_board_that_missed_nothing(
    new_page: NewPage, web_process: WebProcess, sqlite_server: ServerProcess, viewer_token: str
) -> None:
    page = await new_page()
    await sign_in(page, web_process.url, viewer_token)
    async with TodoClient.connect(sqlite_server.address) as client:
        await client.create_session("ses_same")
        await client.replace_todos("ses_same", [Todo(id="t1", content="one")], origin="agent")
        await select_session(page, "ses_same")
        await page.wait_for(todo_row("t1"))

        await web_process.kill()
        await page.wait_for("#connection[data-state=reconnecting]")
        await web_process.start()
        await page.wait_for("#connection[data-state=live]", timeout=int(WAIT * 3000))
        await client.update_todo("ses_same", "t1", content="two", origin="agent")

        await page.wait_for(f"{todo_row('t1')} .content:text-is('two')")
    assert await shown_revisions(page) == ["r2", "r1", "r0"]


async def test_a_page_says_sessiontodo_is_unreachable_while_it_is_down_and_catches_up_after_its_restart(
    new_page: NewPage, web_process: WebProcess, sqlite_server: ServerProcess, viewer_token: str
) -> None:
    page = await new_page()
    await sign_in(page, web_process.url, viewer_token)
    async with TodoClient.connect(sqlite_server.address) as client:
        await client.create_session("ses_durable")
        await client.replace_todos("ses_durable", [Todo(id="t1", content="stored")], origin="agent")
    await select_session(page, "ses_durable")

    sqlite_server.kill()
    await page.wait_for("#connection[data-state=unreachable]")
    sqlite_server.start()
    async with TodoClient.connect(sqlite_server.address) as client:
        await client.add_todo("ses_durable", Todo(id="t2", content="after the restart"), origin="agent")

    await page.wait_for(todo_row("t2"), timeout=int(WAIT * 3000))
    await page.wait_for("#connection[data-state=live]")
    assert await shown_todos(page) == ["stored", "after the restart"]


async def test_a_reset_from_sessiontodo_replaces_the_view(
    new_page: NewPage, token_file: Path, viewer_token: str
) -> None:
    with ServerProcess("--store", "memory://", "--progress-interval", "0.2") as server:
        web = WebProcess(server.address, token_file, *QUICK_FEED)
        await web.start()
        try:
            page = await new_page()
            await sign_in(page, web.url, viewer_token)
            async with TodoClient.connect(server.address) as client:
                await client.create_session("ses_forgotten")
            await page.wait_for(session_row("ses_forgotten"))

            server.kill()  # a memory store forgets everything: the board's cursor means nothing to the new one
            server.start()
            async with TodoClient.connect(server.address) as client:
                await client.create_session("ses_fresh")

            await page.wait_for(session_row("ses_fresh"), timeout=int(WAIT * 3000))
            await page.wait_for(session_row("ses_forgotten"), state="detached")
        finally:
            await web.stop()


async def test_a_page_says_sessiontodo_is_unreachable_as_soon_as_the_feed_ends_not_after_the_silence_limit(
    new_page: NewPage, sqlite_server: ServerProcess, token_file: Path, viewer_token: str
) -> None:
    with sqlite_server:
        web = WebProcess(sqlite_server.address, token_file)  # the default --feed-timeout: 30 s of silence
        await web.start()
        try:
            page = await new_page()
            await sign_in(page, web.url, viewer_token)
            await page.wait_for("#connection[data-state=live]")

            sqlite_server.stop()  # its feed ends

            # Half the silence limit: a bound that only a board waiting for the silence would miss.
            await page.wait_for("#connection[data-state=unreachable]", timeout=15_000)
            sqlite_server.start()
            await page.wait_for("#connection[data-state=live]", timeout=int(WAIT * 3000))
        finally:
            await web.stop()

"""The pictures of the board that the README shows, taken by the test run in the light and dark schemes.

They are written to docs/images/ (committed). Everything in them is fixed (ids, texts, origins,
revisions; times read "just now"), so a run that changes nothing visible rewrites the same bytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sessiontodo_client import Todo, TodoClient, TodoPriority, TodoStatus
from sessiontodo_web import RunningWeb
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import session_row, sign_in, todo_row
from tests.support import ROOT

IMAGES = ROOT / "docs" / "images"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


async def agents_at_work(client: TodoClient) -> None:
    """A few agents' sessions, one with a sub-agent, written as the agents would."""
    await client.create_session(
        "ses_docs", labels={"title": "Release notes for 0.3", "directory": "/src/docs"}, origin="codex"
    )
    await client.replace_todos(
        "ses_docs",
        [
            Todo(content="Collect the merged changes", status=TodoStatus.COMPLETED),
            Todo(content="Draft the upgrade notes", status=TodoStatus.IN_PROGRESS),
        ],
        origin="codex",
    )
    await client.create_session(
        "ses_parser",
        labels={"title": "Refactor the parser", "directory": "/src/app", "project": "app"},
        origin="opencode",
    )
    await client.replace_todos(
        "ses_parser",
        [
            Todo(id="grammar", content="Read the grammar and list the ambiguities", status=TodoStatus.COMPLETED),
            Todo(id="lexer", content="Split the lexer out of parser.py", status=TodoStatus.COMPLETED),
            Todo(
                id="errors",
                content="Report errors with line and column",
                status=TodoStatus.IN_PROGRESS,
                priority=TodoPriority.HIGH,
            ),
            Todo(id="bench", content="Benchmark against the old parser", metadata={"ticket": "APP-142"}),
            Todo(
                id="compat", content="Keep the 0.2 entry points", status=TodoStatus.CANCELLED, priority=TodoPriority.LOW
            ),
        ],
        origin="opencode",
    )
    await client.create_session(
        "ses_tests",
        "ses_parser",
        labels={"title": "Write the parser tests", "directory": "/src/app"},
        origin="opencode",
    )
    await client.replace_todos(
        "ses_tests",
        [Todo(content="Golden files for every grammar rule", status=TodoStatus.IN_PROGRESS), Todo(content="Fuzz")],
        origin="claude-code",
    )
    await client.update_todo("ses_parser", "bench", priority=TodoPriority.HIGH, origin="web")
    await client.create_session(
        "ses_ci", labels={"title": "Fix the flaky CI job", "directory": "/src/infra"}, origin="qwen"
    )
    await client.replace_todos(
        "ses_ci", [Todo(content="Reproduce the timeout", status=TodoStatus.IN_PROGRESS)], origin="qwen"
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_the_board_is_pictured_for_the_readme(
    scheme: str,
    new_page: Callable[..., Awaitable[Page]],
    web: RunningWeb,
    viewer_token: str,
    client: TodoClient,
) -> None:
    await agents_at_work(client)
    await web.board.delivered("ses_ci", 1)
    page = await new_page(color_scheme=scheme, width=1280, height=720)
    await sign_in(page, web.url, viewer_token)
    await page.goto("about:blank")
    await page.goto(f"{web.url}/#session=ses_parser")  # a fresh load that selects the session, focusing nothing
    await page.call("mouse.move", 0, 0)
    await page.wait_for(f"{todo_row('compat')}")
    await page.wait_for(f"{session_row('ses_tests')}")
    path = IMAGES / f"web-board-{scheme}.png"
    IMAGES.mkdir(exist_ok=True)

    await page.screenshot(path)

    assert path.read_bytes().startswith(PNG_SIGNATURE)

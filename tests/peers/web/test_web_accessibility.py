"""The board works from the keyboard alone, and axe-core finds no serious or critical violation."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from sessiontodo_client import Todo, TodoClient, TodoPriority, TodoStatus
from sessiontodo_web import RunningWeb
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import select_session, session_row, sign_in, todo_row

NewPage = Callable[..., Awaitable[Page]]
SERIOUS = {"serious", "critical"}


async def a_small_tree(client: TodoClient) -> None:
    """Two top-level sessions, the first with a child (top-level rows show newest first)."""
    await client.create_session("ses_first", labels={"title": "First", "directory": "/src"})
    await client.create_session("ses_child", "ses_first", labels={"title": "Child"})
    await client.create_session("ses_second", labels={"title": "Second"})
    await client.replace_todos(
        "ses_first",
        [
            Todo(id="t1", content="Done", status=TodoStatus.COMPLETED),
            Todo(id="t2", content="Doing", status=TodoStatus.IN_PROGRESS, priority=TodoPriority.HIGH),
            Todo(id="t3", content="Later", priority=TodoPriority.LOW, metadata={"source": "acp"}),
            Todo(id="t4", content="Dropped", status=TodoStatus.CANCELLED),
        ],
    )


async def tree_shown(page: Page) -> None:
    """Wait for every row of ``a_small_tree``: the last session made (ses_second) as well as the child, since
    the page may show one before the next reaches it."""
    for session_id in ("ses_child", "ses_second"):
        await page.wait_for(session_row(session_id))


async def focus_the_tree(page: Page) -> None:
    """Tab from the label filter, the control before the tree."""
    await page.locator("#filter-label", "focus")
    await page.press("Tab")


async def test_the_tree_is_one_tab_stop(page: Page, client: TodoClient) -> None:
    await a_small_tree(client)
    await tree_shown(page)

    await focus_the_tree(page)
    await page.press("Tab")

    assert await page.focused("role") != "treeitem"


async def test_arrow_keys_move_through_the_shown_rows_in_order(page: Page, client: TodoClient) -> None:
    await a_small_tree(client)
    await tree_shown(page)
    await focus_the_tree(page)
    visited = [await page.focused("data-session-id")]

    for _ in range(2):
        await page.press("ArrowDown")
        visited.append(await page.focused("data-session-id"))

    assert visited == ["ses_second", "ses_first", "ses_child"]


async def test_left_collapses_a_parent_and_right_expands_it(page: Page, client: TodoClient) -> None:
    await a_small_tree(client)
    await tree_shown(page)
    await page.locator(session_row("ses_first"), "focus")

    await page.press("ArrowLeft")
    collapsed = await page.locator(session_row("ses_child"), "isVisible")
    await page.press("ArrowRight")

    assert (collapsed, await page.locator(session_row("ses_child"), "isVisible")) == (False, True)


async def test_enter_selects_the_focused_session(page: Page, client: TodoClient) -> None:
    await a_small_tree(client)
    await tree_shown(page)
    await page.locator(session_row("ses_first"), "focus")

    await page.press("Enter")

    await page.wait_for("#detail-heading:text-is('First')")
    assert await page.locator(session_row("ses_first"), "getAttribute", "aria-selected") == "true"


async def test_a_todo_is_edited_and_saved_with_the_keyboard_alone(page: Page, client: TodoClient) -> None:
    await a_small_tree(client)
    await tree_shown(page)
    await page.locator(session_row("ses_first"), "focus")
    await page.press("Enter")
    await page.wait_for(todo_row("t1"))

    for _ in range(20):  # Tab forward to the first todo's Edit button
        await page.press("Tab")
        if await page.focused("aria-label") == "Edit “Done”":
            break
    await page.press("Enter")
    await page.press("Control+a")
    await page.call("keyboard.type", "Done, by keyboard")
    await page.press("Enter")

    await page.wait_for(f"{todo_row('t1')} .content:text-is('Done, by keyboard')")
    assert (await client.get_todos("ses_first")).todos[0].content == "Done, by keyboard"


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_axe_finds_no_serious_violation_on_the_board(
    scheme: str, new_page: NewPage, web: RunningWeb, viewer_token: str, client: TodoClient
) -> None:
    await a_small_tree(client)
    page = await new_page(color_scheme=scheme)
    await sign_in(page, web.url, viewer_token)
    await select_session(page, "ses_first")
    await page.click(f"{todo_row('t3')} .metadata summary")
    await page.click("#session-details summary")

    violations = await page.axe()

    assert [violation for violation in violations if violation["impact"] in SERIOUS] == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_axe_finds_no_serious_violation_on_the_sign_in_page(
    scheme: str, new_page: NewPage, web: RunningWeb
) -> None:
    page = await new_page(color_scheme=scheme)
    await page.goto(f"{web.url}/login")

    violations = await page.axe()

    assert [violation for violation in violations if violation["impact"] in SERIOUS] == []


async def test_axe_finds_no_serious_violation_in_a_conflict_or_while_reconnecting(
    page: Page, client: TodoClient
) -> None:
    await a_small_tree(client)
    await select_session(page, "ses_first")
    await page.click(f"{todo_row('t1')} button:text-is('Edit')")
    await client.update_todo("ses_first", "t1", content="theirs")
    await page.wait_for("#detail-meta:text-matches('revision 2 ')")
    await page.fill(f"{todo_row('t1')} textarea.edit", "mine")
    await page.press("Enter")
    await page.wait_for("#notice[data-kind=conflict]")
    await page.evaluate("document.getElementById('connection').dataset.state = 'reconnecting'")

    violations = await page.axe()

    assert [violation for violation in violations if violation["impact"] in SERIOUS] == []

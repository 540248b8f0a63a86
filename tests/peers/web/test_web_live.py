"""The board in a real browser (Debian's chromium, driven by playwright-core) against a real server:
what gRPC clients write shows up live, and what the page edits reaches every gRPC client."""

from __future__ import annotations

import asyncio

from sessiontodo_client import ChangeKind, Todo, TodoClient, TodoPriority, TodoStatus
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import WAIT, select_session, session_row, todo_row


async def test_a_grpc_write_appears_in_the_page_without_a_reload(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_live", labels={"title": "Parser work"})
    await page.wait_for(session_row("ses_live"))
    await select_session(page, "ses_live")

    await client.replace_todos("ses_live", [Todo(id="t1", content="Split the lexer")], origin="agent")

    await page.wait_for(f"{todo_row('t1')} .content:text-is('Split the lexer')")


async def test_sessions_appear_update_and_disappear_live(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_a", labels={"title": "First title"})
    await page.wait_for(f"{session_row('ses_a')} .title:text-is('First title')")

    await client.update_session("ses_a", labels={"title": "Second title"})
    await page.wait_for(f"{session_row('ses_a')} .title:text-is('Second title')")

    await client.remove_session("ses_a")
    await page.wait_for(session_row("ses_a"), state="detached")


async def test_children_are_shown_under_their_parent(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_parent")
    await client.create_session("ses_child", "ses_parent")

    await page.wait_for(f"{session_row('ses_parent')} > [role=group] > {session_row('ses_child')}")


async def test_a_row_shows_progress_what_is_in_progress_the_last_change_and_its_origin(
    page: Page, client: TodoClient
) -> None:
    await client.create_session("ses_row", labels={"title": "Row", "directory": "/src"})
    todos = [
        Todo(content="done", status=TodoStatus.COMPLETED),
        Todo(content="doing it", status=TodoStatus.IN_PROGRESS),
        Todo(content="later"),
        Todo(content="dropped", status=TodoStatus.CANCELLED),
    ]
    await client.replace_todos("ses_row", todos, origin="opencode")
    row = session_row("ses_row")
    await page.wait_for(f"{row} .origin:text-is('by opencode')")

    assert await page.text(f"{row} .progress-count") == "1/3"
    assert await page.locator(f"{row} progress", "getAttribute", "aria-label") == "1 of 3 done"
    assert await page.text(f"{row} .current") == "◐ doing it"
    assert await page.text(f"{row} .chip") == "directory: /src"
    assert await page.text(f"{row} time") == "just now"


async def test_status_and_priority_show_as_colour_and_words(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_colours")
    await client.replace_todos(
        "ses_colours", [Todo(id="t1", content="urgent", status=TodoStatus.IN_PROGRESS, priority=TodoPriority.HIGH)]
    )
    await select_session(page, "ses_colours")
    await page.wait_for(todo_row("t1"))  # the list can reach the page after the session it is in
    colours = "const style = getComputedStyle(document.querySelector(arg)); return [style.color, style.backgroundColor]"

    status_words = await page.evaluate(
        "const select = document.querySelector(arg); return select.options[select.selectedIndex].text",
        f"{todo_row('t1')} select.status",
    )
    priority_words = await page.evaluate(
        "const select = document.querySelector(arg); return select.options[select.selectedIndex].text",
        f"{todo_row('t1')} select.priority",
    )
    pending_colours = await page.evaluate(colours, f"{todo_row('t1')} select.status")
    await client.update_todo("ses_colours", "t1", status=TodoStatus.COMPLETED)
    await page.wait_for(f"{todo_row('t1')}[data-status=completed]")

    assert status_words == "◐ In progress"
    assert priority_words == "▲ High"
    assert await page.evaluate(colours, f"{todo_row('t1')} select.status") != pending_colours


async def test_metadata_is_shown_on_demand(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_meta", labels={"title": "Meta", "project": "app"})
    await client.replace_todos("ses_meta", [Todo(id="t1", content="with metadata", metadata={"source": "acp"})])
    await select_session(page, "ses_meta")
    assert not await page.locator(f"{todo_row('t1')} .metadata dd", "isVisible")

    await page.click(f"{todo_row('t1')} .metadata summary")
    await page.click("#session-details summary")

    assert await page.text(f"{todo_row('t1')} .metadata dd") == "acp"
    assert await page.locator("#session-fields dt:text-is('Label project') + dd", "textContent") == "app"


async def test_recent_changes_say_revision_origin_time_and_what_changed(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_history", origin="agent")
    await client.replace_todos("ses_history", [Todo(id="t1", content="Write docs")], origin="agent")
    await select_session(page, "ses_history")

    await client.update_todo("ses_history", "t1", status=TodoStatus.COMPLETED, origin="reviewer")

    newest = "#changes li:first-child"
    await page.wait_for(f"{newest} .rev:text-is('r2')")
    assert await page.text(f"{newest} .origin") == "reviewer"
    assert await page.text(f"{newest} time") == "just now"
    assert await page.text(f"{newest} .summary") == 'status of "Write docs": pending → completed'


async def test_a_status_change_in_the_page_reaches_a_watch_todos_client_and_the_feed_with_origin_web(
    page: Page, client: TodoClient
) -> None:
    await client.create_session("ses_edit")
    await client.replace_todos("ses_edit", [Todo(id="t1", content="Review")])
    await select_session(page, "ses_edit")
    watch = client.watch("ses_edit")
    feed = client.watch_changes(include_snapshot=True, session_ids=["ses_edit"])
    assert (await anext(watch)).kind is ChangeKind.SNAPSHOT  # both streams are open before the edit
    assert (await anext(feed)).kind is ChangeKind.SNAPSHOT

    await page.locator(f"{todo_row('t1')} select.status", "selectOption", "completed")

    watched = await asyncio.wait_for(anext(watch), WAIT)
    fed = await asyncio.wait_for(anext(feed), WAIT)
    await watch.aclose()
    await feed.aclose()
    assert (watched.kind, watched.origin, watched.todos[0].status) == (
        ChangeKind.TODO_UPDATED,
        "web",
        TodoStatus.COMPLETED,
    )
    assert (fed.kind, fed.origin, fed.revision) == (ChangeKind.TODO_UPDATED, "web", 2)


async def test_content_is_edited_with_the_keyboard(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_content")
    await client.replace_todos("ses_content", [Todo(id="t1", content="Draft")])
    await select_session(page, "ses_content")

    await page.click(f"{todo_row('t1')} button:text-is('Edit')")
    await page.fill(f"{todo_row('t1')} textarea.edit", "Final text")
    await page.press("Enter")

    await page.wait_for(f"{todo_row('t1')} .content:text-is('Final text')")
    assert (await client.get_todos("ses_content")).todos[0].content == "Final text"


async def test_a_todo_added_in_the_page_is_stored_at_the_end_with_its_priority(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_add")
    await client.replace_todos("ses_add", [Todo(content="first")])
    await select_session(page, "ses_add")

    await page.fill("#add-content", "second")
    await page.locator("#add-priority", "selectOption", "high")
    await page.click("#add-form button[type=submit]")

    await page.wait_for("#todos li:nth-child(2) .content:text-is('second')")
    stored = (await client.get_todos("ses_add")).todos
    assert [(todo.content, todo.priority) for todo in stored] == [
        ("first", TodoPriority.MEDIUM),
        ("second", TodoPriority.HIGH),
    ]


async def test_a_todo_removed_in_the_page_is_gone_from_the_server(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_remove")
    await client.replace_todos("ses_remove", [Todo(id="t1", content="keep"), Todo(id="t2", content="drop")])
    await select_session(page, "ses_remove")

    await page.click(f"{todo_row('t2')} button:text-is('Remove')")

    await page.wait_for(todo_row("t2"), state="detached")
    assert [todo.id for todo in (await client.get_todos("ses_remove")).todos] == ["t1"]


async def test_a_todo_moved_down_in_the_page_is_reordered_on_the_server(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_order")
    await client.replace_todos("ses_order", [Todo(id=f"t{n}", content=f"todo {n}") for n in (1, 2, 3)])
    await select_session(page, "ses_order")

    await page.click(f"{todo_row('t1')} button[aria-label$='down']")

    await page.wait_for("#todos li:first-child[data-todo-id=t2]")
    assert [todo.id for todo in (await client.get_todos("ses_order")).todos] == ["t2", "t1", "t3"]


async def test_a_conflicting_edit_says_someone_else_changed_the_list_and_keeps_what_was_typed(
    page: Page, client: TodoClient
) -> None:
    await client.create_session("ses_race")
    await client.replace_todos("ses_race", [Todo(id="t1", content="as first seen")])
    await select_session(page, "ses_race")
    await page.click(f"{todo_row('t1')} button:text-is('Edit')")
    await page.fill(f"{todo_row('t1')} textarea.edit", "my version")
    # Someone else changes the list while the text is being edited; the page shows it arrive.
    await client.update_todo("ses_race", "t1", content="their version", origin="someone")
    await page.wait_for("#detail-meta:text-matches('revision 2 ')")

    await page.press("Enter")

    await page.wait_for("#notice[data-kind=conflict]")
    notice = await page.text("#notice-text")
    assert notice.startswith("Someone else changed this list (now revision 2 by someone)")
    assert notice.endswith("What you typed is kept: save it again to apply it.")
    assert await page.locator(f"{todo_row('t1')} textarea.edit", "inputValue") == "my version"
    assert (await client.get_todos("ses_race")).todos[0].content == "their version"


async def test_text_kept_after_a_conflict_is_saved_over_the_list_as_it_is_now(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_again")
    await client.replace_todos("ses_again", [Todo(id="t1", content="as first seen")])
    await select_session(page, "ses_again")
    await page.click(f"{todo_row('t1')} button:text-is('Edit')")
    await page.fill(f"{todo_row('t1')} textarea.edit", "my version")
    await client.update_todo("ses_again", "t1", content="their version", origin="someone")
    await page.wait_for("#detail-meta:text-matches('revision 2 ')")
    await page.press("Enter")
    await page.wait_for("#notice[data-kind=conflict]")

    await page.press("Enter")  # the box still has the focus, and the text

    await page.wait_for(f"{todo_row('t1')} .content:text-is('my version')")
    assert (await client.get_todos("ses_again")).todos[0].content == "my version"


async def test_a_long_text_is_edited_in_a_box_that_shows_all_of_it(page: Page, client: TodoClient) -> None:
    long_text = "A todo whose text runs on " * 12 + "\nand has a second line"
    await client.create_session("ses_long")
    await client.replace_todos("ses_long", [Todo(id="t1", content=long_text)])
    await select_session(page, "ses_long")

    await page.click(f"{todo_row('t1')} button:text-is('Edit')")

    box = f"{todo_row('t1')} textarea.edit"
    assert await page.locator(box, "inputValue") == long_text  # an <input> dropped the line break
    assert await page.evaluate(
        "return (() => { const box = document.querySelector('#todos textarea.edit');"
        " return box.scrollHeight <= box.clientHeight && box.scrollWidth <= box.clientWidth; })()"
    )


async def test_a_live_change_lights_up_its_todo_and_its_session(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_lit")
    await client.replace_todos("ses_lit", [Todo(id="t1", content="one"), Todo(id="t2", content="two")])
    await select_session(page, "ses_lit")
    await page.wait_for(todo_row("t2"))

    await client.update_todo("ses_lit", "t2", status=TodoStatus.COMPLETED, origin="agent")

    await page.wait_for(f"{todo_row('t2')}.flash", state="attached")
    await page.wait_for(f"{session_row('ses_lit')} > .row.flash", state="attached")
    assert await page.count(f"{todo_row('t1')}.flash") == 0

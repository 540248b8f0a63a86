"""The board on a task graph: owners, blockers and ready work shown; claims, releases and links made by a
person, through the API and in a real browser."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import httpx
import pytest

from sessiontodo_client import Todo, TodoClient, TodoStatus
from sessiontodo_web import RunningWeb
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import select_session, sign_in, todo_row

GRAPH = [
    Todo(id="t1", content="Write the parser"),
    Todo(id="t2", content="Write the tests", blocked_by=["t1"]),
    Todo(id="t3", content="Write the docs"),
]


async def a_graph(client: TodoClient, session_id: str) -> None:
    await client.create_session(session_id, labels={"title": "Team"})
    await client.replace_todos(session_id, GRAPH)


async def test_the_api_shows_owners_blockers_and_which_todos_are_ready(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await a_graph(client, "ses_graph")
    await client.claim_todo("ses_graph", "agent-1", "t3")

    detail = (await http.get("/api/sessions/ses_graph")).json()

    assert [(t["id"], t["owner"], t["blocked_by"], t["ready"]) for t in detail["todos"]] == [
        ("t1", "", [], True),
        ("t2", "", ["t1"], False),
        ("t3", "agent-1", [], False),
    ]
    assert detail["session"]["ready"] == 1


async def test_a_claim_through_the_api_gives_the_todo_to_the_person_and_a_second_is_refused_saying_why(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await a_graph(client, "ses_claim")

    claimed = await http.post("/api/sessions/ses_claim/todos/t1/claim", json={"owner": "ada"})
    refused = await http.post("/api/sessions/ses_claim/todos/t1/claim", json={"owner": "bob"})

    assert claimed.status_code == 200
    assert claimed.json()["todos"][0]["owner"] == "ada"
    assert refused.status_code == 409
    assert refused.json()["name"] == "ClaimRefusedError"
    assert refused.json()["data"]["message"] == "Not claimed: ada took it first."
    assert (await client.get_todos("ses_claim")).todos[0].owner == "ada"


async def test_release_frees_the_todo_and_links_are_made_and_undone_with_the_revision_seen(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await a_graph(client, "ses_links")
    await client.claim_todo("ses_links", "agent-1", "t1")

    released = await http.post("/api/sessions/ses_links/todos/t1/release", json={"owner": "agent-1"})
    linked = await http.patch(
        "/api/sessions/ses_links/todos/t3", json={"add_blocked_by": ["t2"], "expected_revision": 3}
    )
    unlinked = await http.patch(
        "/api/sessions/ses_links/todos/t2", json={"remove_blocked_by": ["t1"], "expected_revision": 4}
    )

    assert [answer.status_code for answer in (released, linked, unlinked)] == [200, 200, 200]
    stored = (await client.get_todos("ses_links")).todos
    assert [(t.owner, t.status, t.blocked_by) for t in stored] == [
        ("", TodoStatus.PENDING, []),
        ("", TodoStatus.PENDING, []),
        ("", TodoStatus.PENDING, ["t2"]),
    ]


async def test_a_claim_body_with_an_unknown_field_is_refused(http: httpx.AsyncClient, client: TodoClient) -> None:
    await a_graph(client, "ses_bad")

    answer = await http.post("/api/sessions/ses_bad/todos/t1/claim", json={"owner": "ada", "lease": 5})

    assert answer.status_code == 400
    assert (await client.get_todos("ses_bad")).todos[0].owner == ""


async def test_the_page_shows_blocked_by_and_ready_and_a_person_claims_links_and_releases(
    page: Page, client: TodoClient
) -> None:
    await a_graph(client, "ses_page")
    await select_session(page, "ses_page")
    await page.wait_for(f"{todo_row('t2')} .blockers")

    assert await page.text(f"{todo_row('t2')} .blockers .ref") == "#1"
    assert (await page.text(f"{todo_row('t2')} .blockers")).startswith("blocked by #1")
    assert await page.text("#ready-count") == "· 2 ready"

    await page.fill("#owner-name", "ada")
    await page.click(f"{todo_row('t1')} button.claim")
    await page.wait_for(f"{todo_row('t1')} .owner:text-is('● ada')")
    assert (await client.get_todos("ses_page")).todos[0].owner == "ada"

    await page.locator(f"{todo_row('t3')} select.link", "selectOption", "t1")
    await page.wait_for(f"{todo_row('t3')} .blockers .ref:text-is('#1')")
    await page.click(f"{todo_row('t2')} button.unlink")
    await page.wait_for(f"{todo_row('t2')} .blockers", state="hidden")
    await page.click(f"{todo_row('t1')} button.release")
    await page.wait_for(f"{todo_row('t1')} .owner", state="hidden")

    stored = (await client.get_todos("ses_page")).todos
    assert [(t.owner, t.blocked_by) for t in stored] == [("", []), ("", []), ("", ["t1"])]
    assert await page.problems() == []


async def test_an_agents_claim_appears_on_the_page_live(page: Page, client: TodoClient) -> None:
    await a_graph(client, "ses_agent")
    await select_session(page, "ses_agent")
    await page.wait_for(f"{todo_row('t1')} .ready-badge")

    await client.claim_todo("ses_agent", "agent-7", origin="agent")

    await page.wait_for(f"{todo_row('t1')} .owner:text-is('● agent-7')")
    await page.wait_for(f"{todo_row('t1')} .ready-badge", state="hidden")


@pytest.mark.parametrize("scheme", ["light", "dark"])
async def test_axe_finds_no_serious_violation_on_a_graph_with_owners_and_blockers(
    scheme: str, new_page: Callable[..., Awaitable[Page]], web: RunningWeb, viewer_token: str, client: TodoClient
) -> None:
    await a_graph(client, "ses_axe")
    await client.claim_todo("ses_axe", "agent-1", "t3", lease=600)
    page = await new_page(color_scheme=scheme)
    await sign_in(page, web.url, viewer_token)
    await select_session(page, "ses_axe")
    await page.wait_for(f"{todo_row('t3')} .owner:text-is('● agent-1')")

    violations = await page.axe()

    assert [violation for violation in violations if violation["impact"] in {"serious", "critical"}] == []

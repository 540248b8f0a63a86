"""The routes and frames upstream ``opencode serve`` 1.18.33 has beside sessions and todos, on the sidecar.

What upstream answers was captured from the real server (``tests/peers/opencode_real`` drives the same
requests through the SDK against both); these tests pin the sidecar's side of each.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiontodo_client import TodoClient
from sessiontodo_opencode import RunningSidecar
from tests.peers.opencode.opencode_support import EventFeed, create, put
from tests.support import ServerProcess


async def titles(http: httpx.AsyncClient, **params: str) -> list[str]:
    response = await http.get("/session", params=params)
    assert response.status_code == 200, response.text
    return [session["title"] for session in response.json()]


async def named(http: httpx.AsyncClient, title: str, parent_id: str | None = None) -> str:
    body = {"title": title} | ({"parentID": parent_id} if parent_id else {})
    response = await http.post("/session", json=body)
    assert response.status_code == 200, response.text
    session_id: str = response.json()["id"]
    return session_id


@pytest.mark.process
async def test_listing_sessions_while_sessiontodo_is_down_answers_503_not_500(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]],
) -> None:
    with ServerProcess("--store", "memory://") as service:
        sidecar = await launch_sidecar(service.address)
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=30.0) as http:
            service.kill()

            response = await http.get("/session")

    assert (response.status_code, response.json()["name"]) == (503, "ServiceUnavailableError")


async def test_roots_true_lists_only_sessions_without_a_parent(http: httpx.AsyncClient) -> None:
    parent = await named(http, "parent")
    await named(http, "child", parent)

    assert await titles(http, roots="true") == ["parent"]


async def test_roots_false_lists_children_too(http: httpx.AsyncClient) -> None:
    parent = await named(http, "parent")
    await named(http, "child", parent)

    assert sorted(await titles(http, roots="false")) == ["child", "parent"]


async def test_limit_keeps_the_most_recently_updated_sessions(http: httpx.AsyncClient) -> None:
    for title in ("first", "second", "third"):
        await named(http, title)

    assert await titles(http, limit="2") == ["third", "second"]


async def test_a_negative_limit_lists_every_session_as_upstream(http: httpx.AsyncClient) -> None:
    for title in ("first", "second"):
        await named(http, title)

    assert await titles(http, limit="-1") == ["second", "first"]


async def test_search_matches_titles_whatever_their_case(http: httpx.AsyncClient) -> None:
    await named(http, "Parser work")
    await named(http, "Docs")

    assert await titles(http, search="PARSER") == ["Parser work"]


async def test_start_lists_the_sessions_updated_since_then(http: httpx.AsyncClient) -> None:
    await named(http, "old")
    since = (await http.get("/session")).json()[0]["time"]["updated"] + 1
    renamed = await named(http, "new")
    await http.patch(f"/session/{renamed}", json={"title": "renamed later"})

    assert await titles(http, start=str(since)) == ["renamed later"]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"roots": "maybe"}, 'roots: expected "true" or "false", got \'maybe\''),
        ({"scope": "world"}, "scope: expected \"project\", got 'world'"),
        ({"limit": "1.5"}, "limit: expected an integer, got '1.5'"),
        ({"start": "yesterday"}, "start: expected an integer, got 'yesterday'"),
    ],
    ids=["roots", "scope", "limit", "start"],
)
async def test_a_bad_listing_parameter_is_a_query_bad_request(
    http: httpx.AsyncClient, params: dict[str, str], message: str
) -> None:
    response = await http.get("/session", params=params)

    assert (response.status_code, response.json()) == (
        400,
        {"name": "BadRequest", "data": {"message": message, "kind": "Query"}},
    )


async def test_scope_project_lists_the_projects_sessions_of_every_directory(http: httpx.AsyncClient) -> None:
    await http.post("/session", json={"title": "here"})
    await http.post("/session", json={"title": "there"}, params={"directory": "/elsewhere"})

    assert sorted(await titles(http, scope="project")) == ["here", "there"]


async def test_children_lists_a_sessions_children(http: httpx.AsyncClient) -> None:
    parent = await named(http, "parent")
    await named(http, "child", parent)
    await named(http, "unrelated")

    response = await http.get(f"/session/{parent}/children")

    assert [session["title"] for session in response.json()] == ["child"]


async def test_children_of_an_unknown_session_is_not_found(http: httpx.AsyncClient) -> None:
    response = await http.get("/session/ses_nobody/children")

    assert (response.status_code, response.json()) == (
        404,
        {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}},
    )


async def test_session_status_lists_no_busy_session(http: httpx.AsyncClient) -> None:
    await create(http, "ses_a")

    response = await http.get("/session/status")

    assert (response.status_code, response.json()) == (200, {})


async def test_global_health_says_healthy_with_the_version(http: httpx.AsyncClient) -> None:
    response = await http.get("/global/health")

    assert response.json() == {"healthy": True, "version": f"sessiontodo-{version('sessiontodo')}"}


async def test_path_names_the_requests_directory_as_directory_and_worktree(http: httpx.AsyncClient) -> None:
    response = await http.get("/path", params={"directory": "/home/me/app"})

    assert response.json() == {
        "home": str(Path.home()),
        "state": "",
        "config": "",
        "worktree": "/home/me/app",
        "directory": "/home/me/app",
    }


async def test_project_lists_this_instances_project_and_those_sessions_name(
    http: httpx.AsyncClient, client: TodoClient, sidecar: RunningSidecar
) -> None:
    await client.create_session("ses_b", labels={"project": "prj_b", "directory": "/srv/b"})

    response = await http.get("/project")

    assert [(project["id"], project["worktree"], project["sandboxes"]) for project in response.json()] == [
        ("global", sidecar.bridge.directory, []),
        ("prj_b", "/srv/b", []),
    ]


async def test_current_project_is_the_project_of_the_directorys_sessions(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_b", labels={"project": "prj_b", "directory": "/srv/b"})

    response = await http.get("/project/current", params={"directory": "/srv/b"})

    assert (response.json()["id"], response.json()["worktree"]) == ("prj_b", "/srv/b")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"parentID": 5}, "body.parentID: Input should be a valid string"),
        ({"id": 7}, "body.id: Input should be a valid string"),
        ({"id": "has space"}, "session_id: may only contain"),
    ],
    ids=["parent-not-a-string", "id-not-a-string", "malformed-id"],
)
async def test_creating_a_session_with_a_bad_body_answers_upstreams_tagged_bad_request(
    http: httpx.AsyncClient, client: TodoClient, body: dict[str, Any], message: str
) -> None:
    response = await http.post("/session", json=body)

    assert (response.status_code, response.json()["_tag"]) == (400, "BadRequest")
    assert message in response.json()["message"]
    assert await client.list_sessions() == []


async def global_frames(http: httpx.AsyncClient, count: int, act: Callable[[], Awaitable[None]]) -> list[Any]:
    """The first ``count`` payloads of ``/global/event`` after ``server.connected``, while ``act`` runs
    (heartbeats left out: the test sidecars send one every 0.3 s, which a slow ``act`` outlasts)."""
    async with http.stream("GET", "/global/event") as response:
        feed = EventFeed(response)
        await feed.next_event()
        await act()
        payloads: list[Any] = []
        while len(payloads) < count:
            payload = (await feed.next_event())["payload"]
            if payload["type"] != "server.heartbeat":
                payloads.append(payload)
        return payloads


async def test_each_session_event_on_the_global_stream_is_followed_by_its_sync_frame(
    http: httpx.AsyncClient,
) -> None:
    async def act() -> None:
        await create(http, "ses_a")

    event, sync = await global_frames(http, 2, act)

    assert sync == {
        "type": "sync",
        "id": event["id"],
        "syncEvent": {
            "id": event["id"],
            "type": "session.created.1",
            "seq": 0,
            "aggregateID": "ses_a",
            "data": event["properties"],
        },
    }


async def test_sync_frames_number_a_sessions_events_in_order_and_lists_get_none(http: httpx.AsyncClient) -> None:
    async def act() -> None:
        await create(http, "ses_a")
        await put(http, "ses_a", "x")
        await http.patch("/session/ses_a", json={"title": "renamed"})
        await http.delete("/session/ses_a")

    payloads = await global_frames(http, 7, act)

    kinds = [payload["syncEvent"]["type"] if payload["type"] == "sync" else payload["type"] for payload in payloads]
    assert kinds == [
        "session.created",
        "session.created.1",
        "todo.updated",
        "session.updated",
        "session.updated.1",
        "session.deleted",
        "session.deleted.1",
    ]
    seqs = [payload["syncEvent"]["seq"] for payload in payloads if payload["type"] == "sync"]
    assert seqs == sorted(set(seqs)), json.dumps(payloads)

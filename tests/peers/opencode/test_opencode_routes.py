"""OpenCode's session-todo routes on the sidecar, against a real sessiontodo server."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from sessiontodo_client import Todo, TodoClient, TodoPriority, TodoStatus
from sessiontodo_opencode import RunningSidecar
from sessiontodo_opencode.translate import todo_from_service, todo_to_service
from tests.peers.opencode.opencode_support import EventFeed, create, todos
from tests.support import ROOT, ServerProcess


async def test_reading_a_sessions_todos_answers_the_list_in_order_with_ids(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_a")
    await client.replace_todos(
        "ses_a",
        [
            Todo(id="t1", content="plan", status=TodoStatus.COMPLETED, priority=TodoPriority.HIGH),
            Todo(id="t2", content="build", status=TodoStatus.IN_PROGRESS),
            Todo(id="t3", content="ship", status=TodoStatus.CANCELLED, priority=TodoPriority.LOW),
        ],
    )

    response = await http.get("/session/ses_a/todo")

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == [
        {"id": "t1", "content": "plan", "status": "completed", "priority": "high"},
        {"id": "t2", "content": "build", "status": "in_progress", "priority": "medium"},
        {"id": "t3", "content": "ship", "status": "cancelled", "priority": "low"},
    ]


async def test_reading_an_unknown_session_answers_opencodes_not_found_body(http: httpx.AsyncClient) -> None:
    response = await http.get("/session/ses_nobody/todo")

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_writing_a_list_replaces_it_and_answers_it_as_stored(http: httpx.AsyncClient, client: TodoClient) -> None:
    await create(http, "ses_a")
    await http.put("/session/ses_a/todo", json=todos("old"))

    response = await http.put(
        "/session/ses_a/todo",
        json=[{"id": "kept", "content": "first", "status": "in_progress", "priority": "high"}, *todos("second")],
    )

    assert response.status_code == 200
    written = response.json()
    assert written[0] == {"id": "kept", "content": "first", "status": "in_progress", "priority": "high"}
    assert written[1]["id"]
    assert written[1]["content"] == "second"
    stored = await client.get_todos("ses_a")
    assert [(t.id, t.content) for t in stored.todos] == [(t["id"], t["content"]) for t in written]


@pytest.mark.parametrize(
    ("body", "expected_message"),
    [
        (todos("x", status=""), "todos[0].status: String should have at least 1 character"),
        ([{"status": "pending", "priority": "low"}], "todos[0].content: Field required"),
        (
            [{"content": "x", "status": "pending", "priority": "low", "priorty": "high"}],
            "todos[0].priorty: Extra inputs",
        ),
        ({"todos": todos("x")}, "todos: Input should be a valid array"),
    ],
    ids=["empty-status", "no-content", "misspelt-field", "object-not-array"],
)
async def test_a_write_with_an_invalid_todo_is_a_bad_request_and_changes_nothing(
    http: httpx.AsyncClient, client: TodoClient, body: Any, expected_message: str
) -> None:
    await create(http, "ses_a")
    await http.put("/session/ses_a/todo", json=todos("keep me"))

    response = await http.put("/session/ses_a/todo", json=body)

    assert response.status_code == 400
    error = response.json()
    assert error["name"] == "BadRequest"
    assert expected_message in error["data"]["message"]
    assert [t.content for t in (await client.get_todos("ses_a")).todos] == ["keep me"]


async def test_a_write_whose_body_is_not_json_is_a_bad_request(http: httpx.AsyncClient) -> None:
    await create(http, "ses_a")

    response = await http.put("/session/ses_a/todo", content=b"[{not json")

    assert response.status_code == 400
    assert response.json()["name"] == "BadRequest"
    assert "Invalid JSON" in response.json()["data"]["message"]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_body_over_the_limit_is_refused_413_and_changes_nothing(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]], client: TodoClient, declared: bool
) -> None:
    sidecar = await launch_sidecar(max_body_bytes=4096)
    body = json.dumps(todos(*(f"todo {n}" for n in range(200)))).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 1000):
            yield body[start : start + 1000]

    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10.0) as http:
        await create(http, "ses_a")
        response = await http.put("/session/ses_a/todo", content=body if declared else chunks())

    assert response.status_code == 413
    assert response.json() == {"name": "PayloadTooLargeError", "data": {"message": "request body over 4096 bytes"}}
    assert (await client.get_todos("ses_a")).todos == []


async def test_every_answer_says_nosniff(http: httpx.AsyncClient) -> None:
    await create(http, "ses_a")

    answers = [await http.get("/session/ses_a/todo"), await http.get("/nowhere")]
    async with http.stream("GET", "/event") as events:
        answers.append(events)

    assert [answer.headers["x-content-type-options"] for answer in answers] == ["nosniff"] * 3


async def test_a_write_the_service_rejects_names_every_violation_and_changes_nothing(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_a")
    await http.put("/session/ses_a/todo", json=todos("keep me"))
    duplicate = {"id": "same", "content": "a", "status": "pending", "priority": "low"}

    response = await http.put("/session/ses_a/todo", json=[duplicate, duplicate, *todos("   ")])

    assert response.status_code == 400
    message = response.json()["data"]["message"]
    assert "todos[1].id" in message, message
    assert "todos[2].content" in message, message
    assert [t.content for t in (await client.get_todos("ses_a")).todos] == ["keep me"]


async def test_writing_to_an_unknown_session_is_not_found(http: httpx.AsyncClient) -> None:
    response = await http.put("/session/ses_nobody/todo", json=todos("x"))

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_creating_a_session_answers_opencodes_full_session_with_its_parent_and_title(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_parent")

    response = await http.post(
        "/session", json={"id": "ses_child", "parentID": "ses_parent", "title": "sub task"}, params={"directory": "/p"}
    )

    assert response.status_code == 200
    session = response.json()
    assert {key: session[key] for key in ("id", "parentID", "title", "directory", "projectID", "path")} == {
        "id": "ses_child",
        "parentID": "ses_parent",
        "title": "sub task",
        "directory": "/p",
        "projectID": "global",
        "path": "",
    }
    assert session["time"]["created"] == session["time"]["updated"] > 0
    assert session["cost"] == 0
    assert session["tokens"]["cache"] == {"read": 0, "write": 0}
    assert re.fullmatch(r"[a-z]+-[a-z]+", session["slug"])
    assert session["version"].startswith("sessiontodo-")
    stored = await client.get_session("ses_child")
    assert (stored.parent_id, stored.labels) == (
        "ses_parent",
        {"title": "sub task", "directory": "/p", "project": "global"},
    )


async def test_sessions_are_read_listed_by_directory_and_renamed_like_upstreams(http: httpx.AsyncClient) -> None:
    here = (await http.post("/session", json={"id": "ses_here"})).json()
    there = (await http.post("/session", json={"id": "ses_there"}, params={"directory": "/there"})).json()

    assert (await http.get("/session/ses_here")).json() == here
    assert [s["id"] for s in (await http.get("/session")).json()] == ["ses_here"]
    assert (await http.get("/session", params={"directory": "/there"})).json() == [there]
    renamed = await http.patch("/session/ses_there", json={"title": "renamed"})
    assert renamed.status_code == 200
    assert renamed.json()["title"] == "renamed"
    assert renamed.json()["time"]["updated"] >= there["time"]["updated"]
    assert (await http.get("/session/ses_there")).json()["title"] == "renamed"


async def test_a_rename_with_a_bad_body_is_upstreams_payload_bad_request(http: httpx.AsyncClient) -> None:
    await create(http, "ses_a")

    response = await http.patch("/session/ses_a", json={"title": 5})

    assert response.status_code == 400
    assert response.json() == {
        "name": "BadRequest",
        "data": {"message": "body.title: Input should be a valid string", "kind": "Payload"},
    }


@pytest.mark.parametrize("method", ["GET", "PATCH"])
async def test_reading_or_renaming_an_unknown_session_is_not_found(http: httpx.AsyncClient, method: str) -> None:
    response = await http.request(method, "/session/ses_nobody", json={"title": "x"} if method == "PATCH" else None)

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_any_status_or_priority_string_is_stored_and_returned_as_given(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_a")
    body = [{"content": "x", "status": "blocked", "priority": "urgent"}, *todos("y", status="completed")]

    written = (await http.put("/session/ses_a/todo", json=body)).json()

    assert [(t["status"], t["priority"]) for t in written] == [("blocked", "urgent"), ("completed", "medium")]
    assert (await http.get("/session/ses_a/todo")).json() == written
    stored = (await client.get_todos("ses_a")).todos[0]
    assert (stored.status, stored.priority) == (TodoStatus.PENDING, TodoPriority.MEDIUM)
    assert stored.metadata == {"opencode.status": "blocked", "opencode.priority": "urgent"}


async def test_a_grpc_writer_that_changes_the_status_overrides_the_kept_unknown_one(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_a")
    (written,) = (await http.put("/session/ses_a/todo", json=todos("x", status="blocked"))).json()

    await client.update_todo("ses_a", written["id"], status=TodoStatus.COMPLETED)

    assert (await http.get("/session/ses_a/todo")).json()[0]["status"] == "completed"


def test_a_status_and_priority_a_newer_sessiontodo_added_are_shown_to_opencode_as_pending_and_medium() -> None:
    shown = todo_from_service(Todo(id="t", content="x", status=7, priority=9))
    assert (shown.status, shown.priority) == ("pending", "medium")


def test_a_newer_status_and_priority_survive_a_list_written_back_with_their_stand_ins() -> None:
    stored = Todo(id="t", content="x", status=7, priority=9)
    kept = todo_to_service(todo_from_service(stored).model_copy(update={"content": "edited"}), stored)
    assert (kept.content, kept.status, kept.priority) == ("edited", 7, 9)
    decided = todo_to_service(todo_from_service(stored).model_copy(update={"status": "completed"}), stored)
    assert (decided.status, decided.priority) == (TodoStatus.COMPLETED, 9)


async def test_creating_a_session_without_a_body_generates_its_id(http: httpx.AsyncClient, client: TodoClient) -> None:
    response = await http.post("/session")

    assert response.status_code == 200
    session_id = response.json()["id"]
    assert "parentID" not in response.json()
    assert [s.session_id for s in await client.list_sessions()] == [session_id]


OpenFeed = Callable[..., Awaitable[EventFeed]]


async def test_a_sessions_agent_and_model_are_kept_and_shown_in_its_answers_and_events(
    http: httpx.AsyncClient, open_feed: OpenFeed
) -> None:
    feed = await open_feed()
    model = {"id": "claude-sonnet-4", "providerID": "anthropic"}

    created = await http.post("/session", json={"id": "ses_runs", "agent": "build", "model": model})

    assert (created.json()["agent"], created.json()["model"]) == ("build", model)
    read = (await http.get("/session/ses_runs")).json()
    assert (read["agent"], read["model"]) == ("build", model)
    event = await feed.next_of("session.created")
    assert (event["info"]["agent"], event["info"]["model"]) == ("build", model)
    assert "summary" not in read, "no summary is made up"


async def test_creating_a_child_of_an_unknown_parent_is_not_found(http: httpx.AsyncClient) -> None:
    response = await http.post("/session", json={"id": "ses_child", "parentID": "ses_nobody"})

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_deleting_a_session_answers_true_and_removes_it_with_its_children(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_parent")
    await create(http, "ses_child", parent_id="ses_parent")
    await http.put("/session/ses_parent/todo", json=todos("x"))

    response = await http.delete("/session/ses_parent")

    assert response.status_code == 200
    assert response.content == b"true"
    assert await client.list_sessions() == []
    assert (await http.get("/session/ses_parent/todo")).status_code == 404


async def test_deleting_an_unknown_session_is_not_found(http: httpx.AsyncClient) -> None:
    response = await http.delete("/session/ses_nobody")

    assert response.status_code == 404
    assert response.json() == {"name": "NotFoundError", "data": {"message": "Session not found: ses_nobody"}}


async def test_opencodes_directory_and_workspace_parameters_and_headers_are_ignored(http: httpx.AsyncClient) -> None:
    await create(http, "ses_a")
    params = {"directory": "/home/me/project", "workspace": "wrk_1"}
    headers = {"x-opencode-directory": "%2Fhome%2Fme%2Fproject", "x-opencode-workspace": "wrk_1"}

    written = await http.put("/session/ses_a/todo", json=todos("x"), params=params, headers=headers)
    read = await http.get("/session/ses_a/todo", params=params, headers=headers)

    assert written.status_code == read.status_code == 200
    assert [t["content"] for t in read.json()] == ["x"]


@pytest.mark.parametrize(
    ("method", "path", "status", "name"),
    [
        ("GET", "/nowhere", 404, "NotFoundError"),
        ("GET", "/session/ses_a/todo/extra", 404, "NotFoundError"),
        ("POST", "/session/ses_a/todo", 405, "MethodNotAllowed"),
        ("PUT", "/session/ses_a", 405, "MethodNotAllowed"),
    ],
)
async def test_unknown_routes_and_methods_answer_json_never_html(
    http: httpx.AsyncClient, method: str, path: str, status: int, name: str
) -> None:
    response = await http.request(method, path)

    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    assert response.json()["name"] == name


async def test_a_session_created_through_grpc_is_readable_through_the_gateway(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_grpc")
    await client.add_todo("ses_grpc", Todo(content="from grpc"))

    response = await http.get("/session/ses_grpc/todo")

    assert [t["content"] for t in response.json()] == ["from grpc"]


@pytest.mark.process
async def test_the_gateway_answers_503_while_the_service_is_down(
    launch_sidecar: Callable[..., Awaitable[RunningSidecar]],
) -> None:
    with ServerProcess("--store", "memory://") as service:
        sidecar = await launch_sidecar(service.address)
        async with httpx.AsyncClient(base_url=sidecar.url, timeout=30.0) as http:
            await create(http, "ses_a")
            service.kill()

            response = await http.get("/session/ses_a/todo")

    assert response.status_code == 503
    assert response.json()["name"] == "ServiceUnavailableError"


async def test_a_session_reports_the_version_pyproject_declares(http: httpx.AsyncClient) -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    response = await http.post("/session", json={"id": "ses_version"})

    assert response.json()["version"] == f"sessiontodo-{declared}"


async def test_a_todowrite_keeps_the_owners_and_dependencies_of_the_todos_it_continues(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await create(http, "ses_graph")
    await client.replace_todos(
        "ses_graph",
        [
            Todo(id="parse", content="Parse", description="LL(1)", active_form="Parsing"),
            Todo(id="test", content="Test", blocked_by=["parse"]),
            Todo(id="drop", content="Drop"),
        ],
    )
    await client.claim_todo("ses_graph", "agent-1", "parse")
    # As OpenCode's todowrite sends it: no ids, the list as the model wrote it (one todo left out).
    body = [{"content": "Parse", "status": "completed", "priority": "high"}, *todos("Test")]

    response = await http.put("/session/ses_graph/todo", json=body)

    assert response.status_code == 200
    stored = (await client.get_todos("ses_graph")).todos
    assert [(t.id, t.status, t.owner, t.description, t.active_form, t.blocked_by) for t in stored] == [
        ("parse", TodoStatus.COMPLETED, "agent-1", "LL(1)", "Parsing", []),
        ("test", TodoStatus.PENDING, "", "", "", ["parse"]),
    ]

"""The board's JSON API as the page uses it: reads from the board's state, edits with origin ``web``
and the revision the viewer saw, and a clear answer (that changes nothing) for every bad request."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import httpx
import pytest

from sessiontodo_client import ChangeKind, ChannelSecurity, FeedEvent, Todo, TodoClient, TodoStatus
from sessiontodo_server.app import RunningServer
from sessiontodo_web import RunningWeb
from tests.peers.web.web_support import LaunchWeb, signed_in_http
from tests.support.certificates import auth_toml


async def test_an_edit_answers_with_the_list_after_it_as_the_board_holds_it(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_answer")
    await client.replace_todos("ses_answer", [Todo(id="t1", content="a")])

    answer = await http.patch("/api/sessions/ses_answer/todos/t1", json={"status": "completed", "expected_revision": 1})
    read_back = await http.get("/api/sessions/ses_answer")

    assert answer.status_code == 200
    assert answer.json()["session"]["revision"] == 2
    assert read_back.json()["todos"][0]["status"] == "completed"


async def test_an_edit_is_written_with_origin_web(http: httpx.AsyncClient, client: TodoClient) -> None:
    await client.create_session("ses_origin")

    await http.post("/api/sessions/ses_origin/todos", json={"content": "from the page", "expected_revision": 0})

    assert (await http.get("/api/sessions/ses_origin")).json()["changes"][-1]["origin"] == "web"


async def test_an_edit_of_a_list_that_changed_meanwhile_is_a_conflict_with_the_list_as_it_is_now(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_conflict")
    await client.replace_todos("ses_conflict", [Todo(id="t1", content="mine")])
    await client.replace_todos("ses_conflict", [Todo(id="t1", content="theirs")], origin="someone")

    answer = await http.patch("/api/sessions/ses_conflict/todos/t1", json={"content": "late", "expected_revision": 1})

    assert answer.status_code == 409
    assert answer.json()["current"]["todos"][0]["content"] == "theirs"
    assert set(answer.json()["data"]) == {"message"}  # an error object without null fields
    assert (await client.get_todos("ses_conflict")).todos[0].content == "theirs"


async def test_a_reorder_from_an_old_revision_is_a_conflict(http: httpx.AsyncClient, client: TodoClient) -> None:
    await client.create_session("ses_reorder")
    await client.replace_todos("ses_reorder", [Todo(id="a", content="a"), Todo(id="b", content="b")])
    await client.update_todo("ses_reorder", "a", status=TodoStatus.COMPLETED)

    answer = await http.put("/api/sessions/ses_reorder/order", json={"todo_ids": ["b", "a"], "expected_revision": 1})

    assert answer.status_code == 409
    assert [todo.id for todo in (await client.get_todos("ses_reorder")).todos] == ["a", "b"]


async def test_a_reorder_that_does_not_name_every_todo_once_is_refused(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_ids")
    await client.replace_todos("ses_ids", [Todo(id="a", content="a"), Todo(id="b", content="b")])

    answer = await http.put("/api/sessions/ses_ids/order", json={"todo_ids": ["b", "b"], "expected_revision": 1})

    assert answer.status_code == 400
    assert answer.json()["data"]["message"] == "todo_ids must name every todo of the list exactly once"


async def test_an_invalid_body_is_refused_with_what_is_wrong_and_changes_nothing(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_invalid")

    answer = await http.post(
        "/api/sessions/ses_invalid/todos", json={"content": "x", "status": "done", "expected_revision": 0}
    )

    assert answer.status_code == 400
    assert answer.json()["data"]["message"].startswith("body.status: Input should be")
    assert (await client.get_todos("ses_invalid")).todos == []


@pytest.mark.parametrize(("field", "value"), [("index", 2**40), ("index", -(2**40)), ("expected_revision", 2**70)])
async def test_a_number_out_of_its_protobuf_range_is_refused_with_400_and_changes_nothing(
    http: httpx.AsyncClient, client: TodoClient, field: str, value: int
) -> None:
    await client.create_session("ses_range")

    answer = await http.post(
        "/api/sessions/ses_range/todos", json={"content": "x", "expected_revision": 0, field: value}
    )

    assert answer.status_code == 400
    assert answer.json()["data"]["message"].startswith(f"body.{field}: Input should be")
    assert (await client.get_todos("ses_range")).todos == []


async def test_an_unknown_field_is_refused_rather_than_ignored(http: httpx.AsyncClient, client: TodoClient) -> None:
    await client.create_session("ses_field")

    answer = await http.post("/api/sessions/ses_field/todos", json={"text": "x", "expected_revision": 0})

    assert answer.status_code == 400
    assert "body.text: Extra inputs are not permitted" in answer.json()["data"]["message"]


async def test_an_edit_without_the_revision_the_viewer_saw_is_refused(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_blind")

    answer = await http.post("/api/sessions/ses_blind/todos", json={"content": "x"})

    assert answer.status_code == 400
    assert (await client.get_todos("ses_blind")).todos == []


async def test_what_sessiontodo_refuses_is_answered_with_its_reason(
    http: httpx.AsyncClient, client: TodoClient
) -> None:
    await client.create_session("ses_empty")

    answer = await http.post("/api/sessions/ses_empty/todos", json={"content": "", "expected_revision": 0})

    assert answer.status_code == 400
    assert "content" in answer.json()["data"]["message"]


async def test_an_unknown_session_is_not_found(http: httpx.AsyncClient) -> None:
    read = await http.get("/api/sessions/ses_nowhere")
    edit = await http.post("/api/sessions/ses_nowhere/todos", json={"content": "x", "expected_revision": 0})
    reorder = await http.put("/api/sessions/ses_nowhere/order", json={"todo_ids": [], "expected_revision": 0})

    assert (read.status_code, edit.status_code, reorder.status_code) == (404, 404, 404)


async def test_a_body_over_the_limit_is_refused(launch_web: LaunchWeb, viewer_token: str, client: TodoClient) -> None:
    web = await launch_web(max_body_bytes=1024)
    await client.create_session("ses_big")
    async with signed_in_http(web.url, viewer_token) as http:
        answer = await http.post("/api/sessions/ses_big/todos", json={"content": "x" * 2000, "expected_revision": 0})

    assert answer.status_code == 413
    assert (await client.get_todos("ses_big")).todos == []


async def test_a_board_whose_token_may_only_read_answers_edits_with_403(
    start: Callable[..., Awaitable[RunningServer]], launch_web: LaunchWeb, viewer_token: str, tmp_path: Path
) -> None:
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(
        auth_toml(("reader-token-0123456789", "acme", "reader"), ("writer-token-0123456789", "acme", "writer"))
    )
    server = await start(auth_file=auth_file)
    async with TodoClient.connect(server.address, security=ChannelSecurity(token="writer-token-0123456789")) as writer:
        await writer.create_session("ses_read_only")
    reader = TodoClient.connect(server.address, security=ChannelSecurity(token="reader-token-0123456789"))
    web = await launch_web(reader)
    async with signed_in_http(web.url, viewer_token) as http:
        answer = await http.post("/api/sessions/ses_read_only/todos", json={"content": "x", "expected_revision": 0})

    assert answer.status_code == 403
    assert "may not" in answer.json()["data"]["message"]


async def test_an_edit_while_sessiontodo_is_down_is_answered_503(
    web: RunningWeb, http: httpx.AsyncClient, client: TodoClient, server: RunningServer
) -> None:
    await client.create_session("ses_down")
    await web.board.delivered("ses_down", 0)
    await server.stop()

    # The board's client first waits its call timeout (10 s) for sessiontodo to accept a connection again.
    answer = await http.post("/api/sessions/ses_down/todos", json={"content": "x", "expected_revision": 0}, timeout=30)

    assert answer.status_code == 503


class _LaggingFeedClient(TodoClient):
    """A client whose feed hands each change on late, as a loaded board's feed can: reads must not be stale."""

    async def watch_changes(self, *args: Any, **kwargs: Any) -> AsyncGenerator[FeedEvent, None]:
        async for event in super().watch_changes(*args, **kwargs):
            if event.kind is not ChangeKind.PROGRESS:
                await asyncio.sleep(0.5)
            yield event


async def test_a_read_after_a_write_acknowledged_elsewhere_shows_that_write_even_when_the_feed_lags(
    server: RunningServer, client: TodoClient, launch_web: LaunchWeb, viewer_token: str
) -> None:
    await client.create_session("ses_read_your_writes")
    lagging = _LaggingFeedClient(grpc.aio.insecure_channel(server.address))
    web = await launch_web(client=lagging)
    async with signed_in_http(web.url, viewer_token) as http:
        for n in range(3):
            written = await client.replace_todos("ses_read_your_writes", [Todo(content=f"write {n}")])

            read = (await http.get("/api/sessions/ses_read_your_writes")).json()

            assert read["session"]["revision"] >= written.revision
            assert [todo["content"] for todo in read["todos"]] == [f"write {n}"]

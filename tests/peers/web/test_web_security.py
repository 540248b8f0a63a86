"""Secure by default: signed-in viewers only, Host and Origin checks, CSRF tokens on writes, a strict
Content-Security-Policy, HTTPS off loopback, a tenant's token showing only its tenant; and todo text
that is data, never markup, in a real browser."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from sessiontodo_client import ChannelSecurity, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_web import RunningWeb, Settings
from sessiontodo_web.app import CONTENT_SECURITY_POLICY
from sessiontodo_web.auth import FREE_FAILURES, SignInThrottle
from tests.peers.web.browser_remote import Page
from tests.peers.web.web_support import WAIT, LaunchWeb, select_session, session_row, signed_in_http, todo_row
from tests.support import ROOT, ManualClock
from tests.support.certificates import CertificateAuthority, auth_toml

NewPage = Callable[..., Awaitable[Page]]


async def test_a_page_without_a_sign_in_is_sent_to_the_sign_in_page(new_page: NewPage, web: RunningWeb) -> None:
    page = await new_page()

    await page.goto(f"{web.url}/")

    assert await page.url() == f"{web.url}/login"


async def test_a_wrong_token_is_refused_in_the_page(new_page: NewPage, web: RunningWeb) -> None:
    page = await new_page()
    await page.goto(f"{web.url}/login")

    await page.fill("#token", "not the token")
    await page.click("#token-form button[type=submit]")

    await page.wait_for("#sign-in-error")
    assert await page.cookies() == []


async def test_a_client_that_keeps_guessing_is_made_to_wait_even_with_the_right_token(
    launch_web: LaunchWeb, viewer_token: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stopped clock: on a loaded machine the first wait (1 s) could pass before the last request.
    monkeypatch.setattr("sessiontodo_web.app.SignInThrottle", lambda: SignInThrottle(clock=ManualClock()))
    web = await launch_web()
    async with httpx.AsyncClient(base_url=web.url) as http:
        refused = [
            (await http.post("/login", data={"token": f"guess {n}"})).status_code for n in range(FREE_FAILURES + 1)
        ]
        answer = await http.post("/login", data={"token": viewer_token})

    assert refused == [401] * (FREE_FAILURES + 1)
    assert answer.status_code == 429
    assert answer.headers["retry-after"] == "1"
    assert "set-cookie" not in answer.headers


async def test_the_sign_in_cookie_is_http_only_and_same_site_strict(page: Page) -> None:
    (cookie,) = await page.cookies()

    assert (cookie["name"], cookie["httpOnly"], cookie["sameSite"]) == ("sessiontodo-web", True, "Strict")


async def test_the_made_token_link_signs_in_and_leaves_no_token_in_the_address(
    new_page: NewPage, launch_web: LaunchWeb
) -> None:
    web = await launch_web(viewer_token=None)
    assert web.made_token
    page = await new_page()

    await page.goto(web.sign_in_url)

    await page.wait_for("body[data-board=ready]")
    assert await page.url() == f"{web.url}/"


async def test_the_data_api_refuses_requests_without_a_sign_in(web: RunningWeb) -> None:
    async with httpx.AsyncClient(base_url=web.url) as http:
        answers = [await http.get(path) for path in ("/api/sessions", "/api/events", "/api/me")]

    assert [answer.status_code for answer in answers] == [401, 401, 401]


async def test_a_cookie_of_another_board_is_refused(web: RunningWeb, launch_web: LaunchWeb) -> None:
    other = await launch_web(viewer_token="another board's token")
    async with signed_in_http(other.url, "another board's token") as elsewhere:
        foreign = elsewhere.cookies["sessiontodo-web"]

    async with httpx.AsyncClient(base_url=web.url) as http:
        answer = await http.get("/api/sessions", headers={"cookie": f"sessiontodo-web={foreign}"})

    assert answer.status_code == 401


async def test_a_cookie_whose_expiry_was_changed_is_refused(web: RunningWeb, viewer_token: str) -> None:
    async with signed_in_http(web.url, viewer_token) as signed_in:
        version, _, nonce, mac = signed_in.cookies["sessiontodo-web"].split(".")
    forged = f"{version}.9999999999.{nonce}.{mac}"

    async with httpx.AsyncClient(base_url=web.url) as http:
        answer = await http.get("/api/sessions", headers={"cookie": f"sessiontodo-web={forged}"})

    assert answer.status_code == 401


async def test_basic_auth_signs_in_when_a_password_is_set(launch_web: LaunchWeb) -> None:
    web = await launch_web(password=SecretStr("correct horse"))
    credentials = base64.b64encode(b"sessiontodo:correct horse").decode()

    async with httpx.AsyncClient(base_url=web.url) as http:
        wrong = await http.post("/login", data={"username": "sessiontodo", "password": "wrong"})
        form = await http.post("/login", data={"username": "sessiontodo", "password": "correct horse"})
        header = await http.post("/login", headers={"authorization": f"Basic {credentials}"})

    assert (wrong.status_code, form.status_code, header.status_code) == (401, 303, 303)


async def test_basic_auth_is_refused_when_no_password_is_set(web: RunningWeb) -> None:
    async with httpx.AsyncClient(base_url=web.url) as http:
        answer = await http.post("/login", data={"username": "sessiontodo", "password": ""})

    assert answer.status_code == 401


async def test_a_foreign_host_header_is_refused(web: RunningWeb, viewer_token: str) -> None:
    async with httpx.AsyncClient(base_url=web.url) as http:
        answer = await http.post("/login", data={"token": viewer_token}, headers={"host": "evil.example"})

    assert answer.status_code == 403
    assert "Host not allowed" in answer.text


async def test_a_cross_origin_post_is_refused_and_changes_nothing(http: httpx.AsyncClient, client: TodoClient) -> None:
    await client.create_session("ses_target")

    answer = await http.post(
        "/api/sessions/ses_target/todos",
        json={"content": "forged", "expected_revision": 0},
        headers={"origin": "https://evil.example"},
    )

    assert answer.status_code == 403
    assert (await client.get_todos("ses_target")).todos == []


async def test_a_write_without_the_csrf_token_is_refused_and_changes_nothing(
    web: RunningWeb, viewer_token: str, client: TodoClient
) -> None:
    await client.create_session("ses_target")
    async with signed_in_http(web.url, viewer_token) as http:
        del http.headers["x-csrf-token"]
        answer = await http.post("/api/sessions/ses_target/todos", json={"content": "forged", "expected_revision": 0})

    assert answer.status_code == 403
    assert (await client.get_todos("ses_target")).todos == []


@pytest.mark.parametrize("method", ["PATCH", "PUT", "DELETE"])
async def test_every_kind_of_write_without_the_csrf_token_is_refused_and_changes_nothing(
    web: RunningWeb, viewer_token: str, client: TodoClient, method: str
) -> None:
    await client.create_session("ses_target")
    written = await client.replace_todos("ses_target", [Todo(content="keep"), Todo(content="also")])
    first, second = (todo.id for todo in written.todos)
    path, body = {
        "PATCH": (
            f"/api/sessions/ses_target/todos/{first}",
            {"content": "forged", "expected_revision": written.revision},
        ),
        "PUT": ("/api/sessions/ses_target/order", {"todo_ids": [second, first], "expected_revision": written.revision}),
        "DELETE": (f"/api/sessions/ses_target/todos/{first}", {"expected_revision": written.revision}),
    }[method]
    async with signed_in_http(web.url, viewer_token) as http:
        del http.headers["x-csrf-token"]
        answer = await http.request(method, path, json=body)

    assert answer.status_code == 403
    assert [todo.content for todo in (await client.get_todos("ses_target")).todos] == ["keep", "also"]


async def test_a_write_with_another_sign_ins_csrf_token_is_refused(
    web: RunningWeb, viewer_token: str, client: TodoClient
) -> None:
    await client.create_session("ses_target")
    async with (
        signed_in_http(web.url, viewer_token) as first,
        signed_in_http(web.url, viewer_token) as other,
    ):
        first.headers["x-csrf-token"] = other.headers["x-csrf-token"]
        answer = await first.post("/api/sessions/ses_target/todos", json={"content": "x", "expected_revision": 0})

    assert answer.status_code == 403


async def test_every_answer_carries_the_content_security_policy(web: RunningWeb, http: httpx.AsyncClient) -> None:
    answers = [
        await http.get("/"),
        await http.get("/login"),
        await http.get("/assets/js/main.js"),
        await http.get("/api/sessions"),
        await http.get("/api/sessions/missing"),
    ]

    assert {answer.headers["content-security-policy"] for answer in answers} == {CONTENT_SECURITY_POLICY}


def test_the_content_security_policy_allows_no_inline_code_and_requires_trusted_types() -> None:
    directives = dict(directive.split(" ", 1) for directive in CONTENT_SECURITY_POLICY.split("; "))

    assert directives["default-src"] == "'none'"
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["require-trusted-types-for"] == "'script'"


async def test_hostile_todo_text_renders_as_text(page: Page, client: TodoClient) -> None:
    hostile = "<img src=x onerror=\"document.title='owned'\">"
    await client.create_session("ses_hostile", labels={"title": "<b>bold</b>"})
    await client.replace_todos("ses_hostile", [Todo(id="t1", content=hostile)])
    await page.wait_for(session_row("ses_hostile"))
    await select_session(page, "ses_hostile")

    assert await page.text(f"{todo_row('t1')} .content") == hostile
    assert await page.text(f"{session_row('ses_hostile')} .title") == "<b>bold</b>"
    assert await page.count("#todos img, #tree img, #tree b, #detail b") == 0
    assert await page.evaluate("return document.title") == "sessiontodo board"


async def test_javascript_links_in_labels_and_metadata_stay_text(page: Page, client: TodoClient) -> None:
    link = "javascript:document.title='owned'"
    await client.create_session("ses_links", labels={"title": "links", "url": link})
    await client.replace_todos("ses_links", [Todo(id="t1", content=link, metadata={"href": link})])
    await select_session(page, "ses_links")
    await page.click(f"{todo_row('t1')} .metadata summary")

    assert await page.text(f"{todo_row('t1')} .metadata dd") == link
    assert await page.count("a") == 0


async def test_very_long_text_wraps_inside_the_page(page: Page, client: TodoClient) -> None:
    long_text = "x" * 4000
    await client.create_session("ses_long", labels={"title": "y" * 3000})
    await client.replace_todos("ses_long", [Todo(id="t1", content=long_text)])
    await select_session(page, "ses_long")

    assert await page.text(f"{todo_row('t1')} .content") == long_text
    assert await page.evaluate("return document.documentElement.scrollWidth <= window.innerWidth")


async def test_the_page_reports_no_script_error_or_policy_refusal(page: Page, client: TodoClient) -> None:
    await client.create_session("ses_clean", labels={"title": "clean"})
    await client.replace_todos("ses_clean", [Todo(content="<script>alert(1)</script>")])
    await select_session(page, "ses_clean")

    assert await page.problems() == []


async def test_markup_cannot_be_written_into_the_page_at_all(page: Page) -> None:
    refused = await page.evaluate(
        "try { document.body.innerHTML = '<b>x</b>'; return false } catch (error) { return error instanceof TypeError }"
    )

    assert refused


async def test_a_board_with_a_tenants_token_shows_only_that_tenants_sessions(
    start: Callable[..., Awaitable[RunningServer]],
    launch_web: LaunchWeb,
    viewer_token: str,
    tmp_path: Path,
) -> None:
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(
        auth_toml(("acme-token-0123456789", "acme", "writer"), ("globex-token-0123456789", "globex", "writer"))
    )
    server = await start(auth_file=auth_file)
    async with (
        TodoClient.connect(server.address, security=ChannelSecurity(token="acme-token-0123456789")) as acme,
        TodoClient.connect(server.address, security=ChannelSecurity(token="globex-token-0123456789")) as globex,
    ):
        await acme.create_session("ses_acme")
        await globex.create_session("ses_globex")
        web = await launch_web(
            TodoClient.connect(server.address, security=ChannelSecurity(token="acme-token-0123456789"))
        )
        async with signed_in_http(web.url, viewer_token) as http:
            shown = {session["id"] for session in (await http.get("/api/sessions")).json()["sessions"]}

    assert "ses_acme" in shown
    assert "ses_globex" not in shown


def settings(**values: Any) -> Settings:
    return Settings(**values)


def test_a_board_on_a_public_address_over_plain_http_refuses_to_start() -> None:
    refusal = settings(host="0.0.0.0").refusal()

    assert refusal is not None
    assert "over plain HTTP" in refusal


@pytest.mark.parametrize("overrides", [{"host": "127.0.0.1"}, {"host": "::1"}, {"host": "0.0.0.0", "insecure": True}])
def test_loopback_or_an_explicit_insecure_flag_may_serve_plain_http(overrides: dict[str, object]) -> None:
    assert settings(**overrides).refusal() is None


def test_the_process_refusing_a_public_address_says_why_and_exits_1() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sessiontodo_web", "--host", "0.0.0.0", "--port", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=WAIT * 3,
    )

    assert run.returncode == 1
    assert "refusing to serve '0.0.0.0' over plain HTTP" in run.stderr


async def test_over_https_the_cookie_is_secure_and_host_prefixed(
    launch_web: LaunchWeb, ca: CertificateAuthority, viewer_token: str
) -> None:
    issued = ca.issue("127.0.0.1", server=True)
    web = await launch_web(https_cert=issued.cert, https_key=issued.key)
    assert web.url.startswith("https://")

    async with httpx.AsyncClient(base_url=web.url, verify=ssl.create_default_context(cafile=str(ca.cert))) as http:
        answer = await http.post("/login", data={"token": viewer_token})

    cookie = answer.headers["set-cookie"]
    assert cookie.startswith("__Host-sessiontodo-web=")
    assert "; Secure" in cookie

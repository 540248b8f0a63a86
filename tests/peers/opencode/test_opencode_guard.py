"""The sidecar's HTTP front door: Host and Origin checks, basic auth as OpenCode does it, the
protected default on public addresses; and the sidecar process reaching a sessiontodo server that
needs TLS and a token."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from sessiontodo_client import ChannelSecurity, TodoClient
from sessiontodo_client.security import host_allowed, origin_allowed
from sessiontodo_opencode import RunningSidecar, Settings
from sessiontodo_opencode.__main__ import check_sessiontodo
from sessiontodo_opencode.sidecar import StartupError
from sessiontodo_server.app import RunningServer
from tests.peers.opencode.opencode_support import create_once_serving
from tests.support import NODE_SUITES, ROOT, free_port, run_node_suite
from tests.support.certificates import CertificateAuthority

Launch = Callable[..., Awaitable[RunningSidecar]]
PASSWORD = "correct horse battery staple"


def basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


@pytest.fixture
async def guarded(launch_sidecar: Launch) -> RunningSidecar:
    return await launch_sidecar(server_password=PASSWORD, allowed_origins=["http://app.example"])


@pytest.fixture
async def plain_http(sidecar: RunningSidecar) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=sidecar.url, timeout=10.0) as http:
        yield http


@pytest.mark.parametrize(
    ("host", "allowed"),
    [
        ("127.0.0.1:4096", True),
        ("[::1]:4096", True),
        ("10.0.0.7", True),
        ("localhost:4096", True),
        ("app.localhost", True),
        ("evil.example:4096", False),
        ("127.0.0.1.evil.example", False),
        ("", False),
    ],
)
def test_only_hosts_that_dns_rebinding_cannot_forge_are_served_by_default(host: str, allowed: bool) -> None:
    assert host_allowed(host, ()) is allowed


def test_configured_hosts_and_origins_are_served() -> None:
    assert host_allowed("todos.internal:4096", ["todos.internal"])
    assert host_allowed("anything.example", ["*"])
    assert origin_allowed("http://127.0.0.1:4096", "127.0.0.1:4096", ())
    assert not origin_allowed("http://127.0.0.1:3000", "127.0.0.1:4096", ())
    assert not origin_allowed("null", "127.0.0.1:4096", ())
    assert origin_allowed("https://app.example", "127.0.0.1:4096", ["https://app.example"])


async def test_a_request_naming_a_foreign_host_is_refused(plain_http: httpx.AsyncClient) -> None:
    response = await plain_http.get("/session/ses_1/todo", headers={"host": "rebound.evil.example"})

    assert response.status_code == 403
    assert response.json() == {
        "name": "Forbidden",
        "data": {"message": "Host not allowed: 'rebound.evil.example' (see --allowed-hosts)"},
    }


async def test_a_cross_site_text_plain_post_is_refused_and_creates_nothing(
    plain_http: httpx.AsyncClient, client: TodoClient
) -> None:
    response = await plain_http.post(
        "/session",
        content='{"id": "ses_csrf"}',
        headers={"origin": "https://evil.example", "content-type": "text/plain"},
    )

    assert response.status_code == 403
    assert [s.session_id for s in await client.list_sessions() if s.session_id == "ses_csrf"] == []


async def test_same_origin_requests_pass(plain_http: httpx.AsyncClient, sidecar: RunningSidecar) -> None:
    response = await plain_http.post("/session", json={"id": "ses_same"}, headers={"origin": sidecar.url})

    assert response.status_code == 200, response.text


async def test_basic_auth_is_required_like_opencodes_own_server(guarded: RunningSidecar) -> None:
    async with httpx.AsyncClient(base_url=guarded.url, timeout=10.0) as http:
        anonymous = await http.get("/session/ses_1/todo")
        wrong = await http.get("/session/ses_1/todo", headers={"authorization": basic("opencode", "guess")})
        other_user = await http.get("/session/ses_1/todo", headers={"authorization": basic("admin", PASSWORD)})
        right = await http.post(
            "/session", json={"id": "ses_1"}, headers={"authorization": basic("opencode", PASSWORD)}
        )
        token = base64.b64encode(f"opencode:{PASSWORD}".encode()).decode()
        by_query = await http.get("/session/ses_1/todo", params={"auth_token": token})

    assert [r.status_code for r in (anonymous, wrong, other_user)] == [401, 401, 401]
    assert anonymous.headers["www-authenticate"].startswith("Basic ")
    assert anonymous.json() == {"name": "Unauthorized", "data": {"message": "Unauthorized"}}
    assert (right.status_code, by_query.status_code) == (200, 200)


async def test_an_allowed_origin_gets_cors_and_its_preflight_needs_no_credentials(guarded: RunningSidecar) -> None:
    async with httpx.AsyncClient(base_url=guarded.url, timeout=10.0) as http:
        preflight = await http.options(
            "/session",
            headers={"origin": "http://app.example", "access-control-request-method": "POST"},
        )
        call = await http.post(
            "/session",
            json={"id": "ses_cors"},
            headers={"origin": "http://app.example", "authorization": basic("opencode", PASSWORD)},
        )

    assert preflight.status_code == 200
    assert call.status_code == 200
    assert call.headers["access-control-allow-origin"] == "http://app.example"


@pytest.mark.process
async def test_the_opencode_sdk_works_against_a_sidecar_with_basic_auth(launch_sidecar: Launch) -> None:
    sidecar = await launch_sidecar(server_username="agent", server_password=PASSWORD)

    run = await run_node_suite(
        NODE_SUITES / "opencode-auth.test.mjs",
        {"OPENCODE_URL": sidecar.url, "OPENCODE_SERVER_USERNAME": "agent", "OPENCODE_SERVER_PASSWORD": PASSWORD},
    )

    run.assert_all_passed(at_least=3)


# The protected default: like sessiontodo's server (and unlike `opencode serve`, which only warns)


@pytest.mark.process
@pytest.mark.parametrize("password", [None, ""])
def test_a_sidecar_on_a_public_address_without_basic_auth_refuses_to_start(password: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SESSIONTODO_OPENCODE_", "OPENCODE_SERVER_"))}
    if password is not None:
        env["OPENCODE_SERVER_PASSWORD"] = password  # empty: no basic auth, as for OpenCode
    result = subprocess.run(
        [sys.executable, "-m", "sessiontodo_opencode", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert (
        "CRITICAL sessiontodo_opencode: refusing to listen on '0.0.0.0' without basic auth "
        "(OPENCODE_SERVER_PASSWORD):" in result.stderr
    )
    assert result.stdout == ""


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("127.0.0.1", False),
        ("127.8.9.10", False),
        ("::1", False),
        ("localhost", False),
        ("0.0.0.0", True),
        ("::", True),
        ("10.0.0.7", True),
        ("todos.internal", True),
    ],
)
def test_only_loopback_addresses_may_go_without_basic_auth(
    host: str, refused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENCODE_SERVER_PASSWORD", "SESSIONTODO_OPENCODE_SERVER_PASSWORD", "SESSIONTODO_OPENCODE_INSECURE"):
        monkeypatch.delenv(name, raising=False)

    assert (settings(host=host).refusal() is not None) is refused
    assert settings(host=host, server_password=SecretStr("pw")).refusal() is None
    assert settings(host=host, insecure=True).refusal() is None


def test_the_environment_can_opt_out_of_the_protected_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONTODO_OPENCODE_HOST", "0.0.0.0")
    monkeypatch.setenv("SESSIONTODO_OPENCODE_INSECURE", "true")

    assert settings().refusal() is None


def settings(**values: Any) -> Settings:
    return Settings(**values)


async def test_basic_auth_or_an_explicit_insecure_flag_lets_it_listen_publicly(launch_sidecar: Launch) -> None:
    with pytest.raises(StartupError, match="pass --insecure if the network is trusted"):
        await launch_sidecar(host="0.0.0.0")
    for public in (
        await launch_sidecar(host="0.0.0.0", insecure=True),
        await launch_sidecar(host="0.0.0.0", server_password=PASSWORD),
    ):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{public.port}", timeout=10.0) as http:
            response = await http.post(
                "/session",
                json={"id": f"ses_public_{public.port}"},
                headers={"authorization": basic("opencode", PASSWORD)},
            )
        assert response.status_code == 200, response.text


async def test_the_start_up_check_reaches_a_tls_server_with_a_token_as_the_sidecars_calls_do(
    start: Callable[..., Awaitable[RunningServer]],
    ca: CertificateAuthority,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    issued = ca.issue("127.0.0.1", server=True)
    token = "sidecar-token-0123456789"
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(
        f'[[token]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\ntenant = "acme"\nrole = "writer"\n'
    )
    server = await start(tls_cert=issued.cert, tls_key=issued.key, auth_file=auth_file)
    security = ChannelSecurity(tls=True, root_certificates=ca.cert_pem, token=token)

    async with TodoClient.connect(server.address, security=security) as client:
        with caplog.at_level(logging.INFO, logger="sessiontodo_opencode"):
            await check_sessiontodo(client, server.address)

    assert [record.getMessage() for record in caplog.records] == []  # neither unreachable nor not serving


@pytest.mark.process
async def test_the_sidecar_process_reaches_a_server_that_needs_tls_and_a_token(
    start: Callable[..., Awaitable[RunningServer]], tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("127.0.0.1", server=True)
    token = "sidecar-token-0123456789"
    auth_file = tmp_path / "auth.toml"
    token_file = tmp_path / "token"
    auth_file.write_text(
        f'[[token]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\ntenant = "acme"\nrole = "writer"\n'
    )
    token_file.write_text(token + "\n")
    server = await start(tls_cert=issued.cert, tls_key=issued.key, auth_file=auth_file)
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sessiontodo_opencode",
        "--sessiontodo-address",
        server.address,
        "--port",
        str(port),
        "--ca-file",
        str(ca.cert),
        env={**os.environ, "SESSIONTODO_OPENCODE_TOKEN_FILE": str(token_file)},
        cwd=ROOT,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10.0) as http:
            await create_once_serving(http, "ses_tls", timeout=30)
            written = await http.put(
                "/session/ses_tls/todo", json=[{"content": "through TLS", "status": "pending", "priority": "low"}]
            )
            assert written.status_code == 200, written.text
        security = ChannelSecurity(tls=True, root_certificates=ca.cert_pem, token=token)
        async with TodoClient.connect(server.address, security=security) as reader:
            assert [t.content for t in (await reader.get_todos("ses_tls")).todos] == ["through TLS"]
    finally:
        process.terminate()
        await process.wait()

"""The ACP proxy in front of a sessiontodo server that needs TLS and a bearer token."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_acp.settings import ProxySettings
from sessiontodo_client import ChannelSecurity, NotFound, TodoClient
from sessiontodo_server.app import RunningServer
from tests.support import eventually
from tests.support.certificates import CertificateAuthority

TOKEN = "acp-proxy-token-0123456789"


def test_the_proxy_takes_the_ca_client_certificate_and_token_as_flags(tmp_path: Path) -> None:
    ca = CertificateAuthority(tmp_path)
    agent = ca.issue("agent-1", server=False)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    flags = ["--ca-file", str(ca.cert), "--client-cert", str(agent.cert), "--client-key", str(agent.key)]

    settings = ProxySettings.from_flags([*flags, "--token-file", str(token_file)])

    assert settings.channel_security() == ChannelSecurity(True, ca.cert_pem, agent.cert_pem, agent.key_pem, TOKEN)


@pytest.mark.process
async def test_plans_reach_a_server_that_needs_tls_and_a_token(
    start: Callable[..., Awaitable[RunningServer]], open_editor: Any, tmp_path: Path
) -> None:
    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("127.0.0.1", server=True)
    auth_file, token_file = tmp_path / "auth.toml", tmp_path / "token"
    auth_file.write_text(
        f'[[token]]\nsha256 = "{hashlib.sha256(TOKEN.encode()).hexdigest()}"\ntenant = "acme"\nrole = "writer"\n'
    )
    token_file.write_text(TOKEN)
    server = await start(tls_cert=issued.cert, tls_key=issued.key, auth_file=auth_file)
    security = ChannelSecurity(tls=True, root_certificates=ca.cert_pem, token=TOKEN)

    env = {"SESSIONTODO_ACP_CA_FILE": str(ca.cert), "SESSIONTODO_ACP_TOKEN_FILE": str(token_file)}
    async with (
        open_editor(server.address, **env) as proxied,
        TodoClient.connect(server.address, security=security) as todos,
    ):
        session_id = await proxied.new_session()
        await proxied.send_plans(session_id, [{"content": "Sign the release", "status": "pending", "priority": "high"}])

        async def stored() -> bool:
            try:
                return [t.content for t in (await todos.get_todos(session_id)).todos] == ["Sign the release"]
            except NotFound:
                return False

        await eventually(stored, timeout=30)


@pytest.mark.process
async def test_an_unreadable_token_file_turns_mirroring_off_but_never_the_conversation(tmp_path: Path) -> None:
    echo = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()"
    process = await asyncio.create_subprocess_exec(
        *[sys.executable, "-m", "sessiontodo_acp", "--", sys.executable, "-c", echo],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "SESSIONTODO_ACP_TOKEN_FILE": str(tmp_path / "missing-token")},
    )
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    try:
        log = b""
        while b"forwarding only" not in log or b"missing-token" not in log:  # the mirror gives up, saying why...
            log += await asyncio.wait_for(process.stderr.readline(), 30)
        line = b'{"jsonrpc": "2.0", "method": "ping"}\n'
        process.stdin.write(line)
        assert await asyncio.wait_for(process.stdout.readline(), 30) == line  # ...and the conversation goes on
    finally:
        process.stdin.close()
        await asyncio.wait_for(process.wait(), 30)

"""TLS, mutual TLS, certificate reload, bearer tokens and roles, audit lines, the protected default.

Certificates are real (a CA, a server certificate for 127.0.0.1, client certificates), made per
test with the ``cryptography`` package; the servers are the ones production starts.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import SecretStr

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import (
    ChangeKind,
    ChannelSecurity,
    PermissionDenied,
    RetryPolicy,
    ServiceConnection,
    Todo,
    TodoClient,
    Unauthenticated,
    Unavailable,
)
from sessiontodo_client.security import is_loopback
from sessiontodo_server.api.auth import AuthInterceptor, Role, required_role
from sessiontodo_server.api.service_name import SERVICE_NAME
from sessiontodo_server.app import RunningServer, StartupError
from tests.support import ROOT, free_port, make_settings
from tests.support.certificates import CertificateAuthority, Issued, auth_toml

NO_RETRY: dict[str, Any] = {"retry": RetryPolicy(attempts=1), "timeout": 10.0}

TOKENS = {
    "reader": ("read-token-0123456789", "acme", "reader"),
    "writer": ("write-token-0123456789", "acme", "writer"),
    "admin": ("admin-token-0123456789", "acme", "admin"),
}


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    path.write_text(auth_toml(*TOKENS.values(), name="ci"))
    return path


def rewrite(path: Path, text: str) -> None:
    path.write_text(text)


def trusting(ca: CertificateAuthority, client: Issued | None = None, token: str | None = None) -> ChannelSecurity:
    return ChannelSecurity(
        tls=True,
        root_certificates=ca.cert_pem,
        client_certificate=client.cert_pem if client else None,
        client_key=client.key_pem if client else None,
        token=token,
    )


PATIENT = RetryPolicy(attempts=4, initial=0.5, maximum=2.0)
"""A slow handshake on a loaded machine gets another chance (a refused one fails every attempt)."""

HANDSHAKE_WAIT = 5.0
"""Seconds a call waits for the connection: a refused handshake never makes it ready, so this is what
each refusal costs; a handshake that works takes a fraction of it, even on a loaded machine."""


async def reachable(address: str, security: ChannelSecurity) -> bool:
    """Whether a fresh client gets an answer (any answer but UNAVAILABLE) from ``address``."""
    async with TodoClient.connect(address, PATIENT, HANDSHAKE_WAIT, security=security) as client:
        try:
            await client.list_sessions()
        except Unavailable:
            return False
        return True


# TLS


async def test_a_tls_server_serves_clients_that_trust_its_ca(
    start: Callable[..., Any], ca: CertificateAuthority, server_cert: Issued
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key)

    async with TodoClient.connect(server.address, security=trusting(ca)) as client:
        await client.create_session("ses_1")
        await client.replace_todos("ses_1", [Todo(content="over TLS")])
        assert [t.content for t in (await client.get_todos("ses_1")).todos] == ["over TLS"]


async def test_a_tls_server_answers_health_checks_over_the_clients_tls(
    start: Callable[..., Any], ca: CertificateAuthority, server_cert: Issued
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key)

    async with TodoClient.connect(server.address, security=trusting(ca)) as client:
        assert await client.serving() is True


async def test_a_tls_server_refuses_plaintext_and_untrusting_clients(
    start: Callable[..., Any], tmp_path: Path, server_cert: Issued
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key)
    stranger = CertificateAuthority(tmp_path, "another CA")

    assert not await reachable(server.address, ChannelSecurity())
    assert not await reachable(server.address, trusting(stranger))


async def test_mutual_tls_admits_only_clients_with_a_certificate_from_the_client_ca(
    start: Callable[..., Any], tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    client_ca = CertificateAuthority(tmp_path, "client CA")
    server: RunningServer = await start(
        tls_cert=server_cert.cert, tls_key=server_cert.key, tls_client_ca=client_ca.cert
    )
    impostor = CertificateAuthority(tmp_path, "impostor CA").issue("impostor", server=False)

    assert await reachable(server.address, trusting(ca, client_ca.issue("agent-1", server=False)))
    assert not await reachable(server.address, trusting(ca))
    assert not await reachable(server.address, trusting(ca, impostor))


async def test_a_reloaded_certificate_serves_new_connections_while_open_streams_keep_going(
    start: Callable[..., Any], tmp_path: Path, ca: CertificateAuthority, server_cert: Issued
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key)
    async with TodoClient.connect(server.address, security=trusting(ca)) as client:
        await client.create_session("ses_1")
        events = client.watch("ses_1")
        assert (await asyncio.wait_for(anext(events), 10)).kind is ChangeKind.SNAPSHOT

        rotated_ca = CertificateAuthority(tmp_path, "rotated CA")
        rotated = rotated_ca.issue("127.0.0.1 rotated", server=True)
        server_cert.take_over(rotated)
        server.reload()

        assert await reachable(server.address, trusting(rotated_ca))
        assert not await reachable(server.address, trusting(ca))
        await client.replace_todos("ses_1", [Todo(content="after the rotation")])
        event = await asyncio.wait_for(anext(events), 10)
        assert (event.kind, [t.content for t in event.todos]) == (ChangeKind.TODOS_REPLACED, ["after the rotation"])
        await events.aclose()


async def test_a_broken_certificate_on_reload_keeps_the_previous_one(
    start: Callable[..., Any], ca: CertificateAuthority, server_cert: Issued, caplog: pytest.LogCaptureFixture
) -> None:
    server: RunningServer = await start(tls_cert=server_cert.cert, tls_key=server_cert.key)
    rewrite(server_cert.key, "not a key")

    server.reload()

    assert "keeping the previous one" in caplog.text
    assert await reachable(server.address, trusting(ca))


# Bearer tokens and roles


async def test_calls_without_a_known_token_are_unauthenticated(start: Callable[..., Any], auth_file: Path) -> None:
    server: RunningServer = await start(auth_file=auth_file)

    for token in (None, "not-a-token"):
        async with TodoClient.connect(server.address, security=ChannelSecurity(token=token), **NO_RETRY) as client:
            with pytest.raises(Unauthenticated):
                await client.list_sessions()
            with pytest.raises(Unauthenticated):
                await anext(client.watch("ses_1"))


async def test_each_role_may_do_what_its_role_allows_and_nothing_more(
    start: Callable[..., Any], auth_file: Path
) -> None:
    server: RunningServer = await start(auth_file=auth_file)

    def connect(role: str) -> TodoClient:
        return TodoClient.connect(server.address, security=ChannelSecurity(token=TOKENS[role][0]), **NO_RETRY)

    async with connect("reader") as reader, connect("writer") as writer, connect("admin") as admin:
        await writer.create_session("ses_1")
        await writer.replace_todos("ses_1", [Todo(content="plan")])
        assert [t.content for t in (await reader.get_todos("ses_1")).todos] == ["plan"]
        assert [s.session_id for s in await reader.list_sessions()] == ["ses_1"]
        events = reader.watch("ses_1")
        assert (await asyncio.wait_for(anext(events), 10)).kind is ChangeKind.SNAPSHOT
        await events.aclose()
        for write in (
            reader.create_session("ses_2"),
            reader.replace_todos("ses_1", []),
            reader.remove_session("ses_1"),
            writer.remove_all_sessions(),
        ):
            with pytest.raises(PermissionDenied):
                await write
        assert await admin.remove_all_sessions() == 1


def test_every_rpc_of_the_service_has_a_deliberate_role() -> None:
    reads = {"GetTodos", "GetSession", "BatchGetTodos", "ListSessions", "WatchTodos", "WatchChanges"}
    methods = {method.name for method in pb.DESCRIPTOR.services_by_name["TodoService"].methods}

    roles = {name: required_role(f"/{SERVICE_NAME}/{name}") for name in methods}

    assert methods >= reads | {"RemoveAllSessions", "ReplaceTodos"}
    assert {name for name, role in roles.items() if role is Role.READER} == reads
    assert {name for name, role in roles.items() if role is Role.ADMIN} == {"RemoveAllSessions"}
    assert required_role("/grpc.health.v1.Health/Check") is None
    assert required_role("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo") is Role.READER
    assert required_role("/other.Service/Call") is Role.ADMIN


async def test_health_stays_open_while_the_service_needs_a_token(start: Callable[..., Any], auth_file: Path) -> None:
    server: RunningServer = await start(auth_file=auth_file)

    async with grpc.aio.insecure_channel(server.address) as channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert response.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_reloaded_auth_file_admits_new_tokens_and_drops_removed_ones(
    start: Callable[..., Any], auth_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server: RunningServer = await start(auth_file=auth_file)
    fresh = ("fresh-token-0123456789", "acme", "reader")
    rewrite(auth_file, auth_toml(fresh))
    server.reload()

    assert await _lists(server, fresh[0])
    with pytest.raises(Unauthenticated):
        await _lists(server, TOKENS["admin"][0])

    rewrite(auth_file, "[[token]]\nsha256 = 'short'\n")
    server.reload()
    assert "keeping the previous one" in caplog.text
    assert await _lists(server, fresh[0])


async def _lists(server: RunningServer, token: str) -> bool:
    async with TodoClient.connect(server.address, security=ChannelSecurity(token=token), **NO_RETRY) as client:
        await client.list_sessions()
    return True


async def test_denied_calls_leave_an_audit_line_without_tokens_or_content(
    start: Callable[..., Any], auth_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server: RunningServer = await start(auth_file=auth_file)
    caplog.set_level(logging.INFO)
    secret_content = "launch codes 4242"

    async with TodoClient.connect(server.address, security=ChannelSecurity(token="guessed-token"), **NO_RETRY) as c:
        with pytest.raises(Unauthenticated):
            await c.replace_todos("ses_1", [Todo(content=secret_content)])
    reader = ChannelSecurity(token=TOKENS["reader"][0])
    async with TodoClient.connect(server.address, security=reader, **NO_RETRY) as c:
        with pytest.raises(PermissionDenied):
            await c.replace_todos("ses_1", [Todo(content=secret_content)])

    lines = [r.getMessage() for r in caplog.records if r.name == "sessiontodo_server.audit"]
    assert len(lines) == 2, lines
    assert "denied UNAUTHENTICATED /sessiontodo.v1.TodoService/ReplaceTodos peer=" in lines[0]
    assert "denied PERMISSION_DENIED" in lines[1]
    assert "token=ci-reader tenant=acme role=reader" in lines[1]
    for secret in ("guessed-token", TOKENS["reader"][0], secret_content):
        assert secret not in caplog.text


async def test_tokens_and_mutual_tls_work_together(
    start: Callable[..., Any], tmp_path: Path, ca: CertificateAuthority, server_cert: Issued, auth_file: Path
) -> None:
    server: RunningServer = await start(
        tls_cert=server_cert.cert, tls_key=server_cert.key, tls_client_ca=ca.cert, auth_file=auth_file
    )
    agent = ca.issue("agent-1", server=False)

    async with TodoClient.connect(server.address, security=trusting(ca, agent, TOKENS["writer"][0])) as client:
        await client.create_session("ses_1")
    async with TodoClient.connect(server.address, security=trusting(ca, agent), **NO_RETRY) as client:
        with pytest.raises(Unauthenticated):
            await client.create_session("ses_1")


@pytest.mark.parametrize(
    ("target", "loopback"),
    [
        ("127.0.0.1:50051", True),
        ("127.0.1.1:50051", True),
        ("localhost:50051", True),
        ("LOCALHOST", True),
        ("[::1]:50051", True),
        ("dns:///localhost:50051", True),
        ("ipv4:127.0.0.1:50051", True),
        ("10.1.2.3:50051", False),
        ("todos.internal:50051", False),
        ("localhost.example.com:50051", False),
        ("[2001:db8::1]:50051", False),
        ("dns://8.8.8.8/todos.internal:50051", False),
        ("unix:/run/sessiontodo.sock", False),
    ],
)
def test_loopback_targets_are_told_from_other_machines_without_resolving_names(target: str, loopback: bool) -> None:
    assert is_loopback(target) is loopback


async def test_a_token_without_tls_is_refused_for_another_machine_before_any_connection() -> None:
    with pytest.raises(ValueError, match=r"^refusing to send a bearer token in plaintext to 10\.1\.2\.3:50051"):
        TodoClient.connect("10.1.2.3:50051", security=ChannelSecurity(token="s3cret"))
    async with TodoClient.connect("10.1.2.3:50051", security=ChannelSecurity(tls=True, token="s3cret")):
        pass  # over TLS it may go anywhere
    async with TodoClient.connect("10.1.2.3:50051"):
        pass  # and without a token there is nothing to protect


async def test_a_token_without_tls_reaches_a_loopback_server(start: Callable[..., Any], auth_file: Path) -> None:
    server: RunningServer = await start(auth_file=auth_file)
    port = server.address.rpartition(":")[2]
    async with TodoClient.connect(f"localhost:{port}", security=ChannelSecurity(token=TOKENS["writer"][0])) as client:
        await client.create_session("ses_1")


def test_gateway_settings_read_the_token_and_certificates_from_files(tmp_path: Path, ca: CertificateAuthority) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("  file-token \n")
    agent = ca.issue("agent-1", server=False)

    security = ServiceConnection(
        ca_file=ca.cert, client_cert=agent.cert, client_key=agent.key, token_file=token_file
    ).channel_security()

    assert security == ChannelSecurity(True, ca.cert_pem, agent.cert_pem, agent.key_pem, "file-token")
    with pytest.raises(ValueError, match="not both"):
        ServiceConnection(token=SecretStr("a"), token_file=token_file).channel_security()
    with pytest.raises(ValueError, match="needs its key"):
        ServiceConnection(client_cert=agent.cert).channel_security()


# The protected default


@pytest.mark.process
@pytest.mark.parametrize(
    ("flags", "missing"),
    [([], "--tls-cert/--tls-key and --auth-file"), (["--auth-file", "auth.toml"], "--tls-cert/--tls-key")],
)
def test_a_server_on_a_public_address_without_tls_and_tokens_refuses_to_start(flags: list[str], missing: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "sessiontodo_server", "--host", "0.0.0.0", "--port", str(free_port()), *flags],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )

    assert result.returncode == 1
    assert result.stderr.count("\n") == 1, result.stderr
    assert f"CRITICAL sessiontodo_server: refusing to listen on '0.0.0.0' without {missing}:" in result.stderr


async def test_an_explicit_insecure_flag_or_full_protection_lets_it_listen_publicly(
    start: Callable[..., Any], server_cert: Issued, auth_file: Path
) -> None:
    await start(host="0.0.0.0", insecure=True)
    await start(host="0.0.0.0", tls_cert=server_cert.cert, tls_key=server_cert.key, auth_file=auth_file)
    with pytest.raises(StartupError, match="--tls-cert and --tls-key go together"):
        await start(tls_cert=server_cert.cert)


async def test_an_unusable_auth_file_stops_the_start_with_the_reason(start: Callable[..., Any], tmp_path: Path) -> None:
    bad = tmp_path / "auth.toml"
    bad.write_text('[[token]]\nsha256 = "00"\ntenant = "acme"\nrole = "root"\n')

    with pytest.raises(StartupError, match=r"invalid auth file .*token\.0\.sha256.*token\.0\.role"):
        await start(auth_file=bad)
    with pytest.raises(StartupError, match="cannot read auth file"):
        await start(auth_file=tmp_path / "missing.toml")


class Details(NamedTuple):
    """What grpc.aio hands an interceptor about a call (``grpc.HandlerCallDetails``)."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...]


async def test_a_tenants_handler_is_made_once_so_the_observing_wrapping_is_reused(tmp_path: Path) -> None:
    (tmp_path / "auth.toml").write_text(auth_toml(("t-acme", "acme", "writer"), ("t-beta", "beta", "writer")))
    auth = AuthInterceptor(tmp_path / "auth.toml")
    registered = grpc.unary_unary_rpc_method_handler(lambda request, context: None)
    method = f"/{SERVICE_NAME}/GetTodos"

    async def continuation(details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        return registered

    def details(token: str) -> grpc.HandlerCallDetails:
        return Details(method, (("authorization", f"Bearer {token}"),))

    acme = [await auth.intercept_service(continuation, details("t-acme")) for _ in range(3)]
    beta = await auth.intercept_service(continuation, details("t-beta"))
    assert acme[0] is acme[1] is acme[2]
    assert acme[0] is not registered
    assert beta is not acme[0]


async def _read_until_it_ends(call: Any) -> None:
    """Read a stream's messages until it ends with an error (raised here)."""
    while True:
        await asyncio.wait_for(call.read(), 10)


async def test_a_reload_that_drops_a_token_ends_its_open_streams_unauthenticated(
    start: Callable[..., Any], auth_file: Path
) -> None:
    server: RunningServer = await start(auth_file=auth_file)
    writer = (("authorization", f"Bearer {TOKENS['writer'][0]}"),)
    reader = (("authorization", f"Bearer {TOKENS['reader'][0]}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="ses_1"), metadata=writer, timeout=10)
        dropped = [
            stub.WatchTodos(pb.WatchTodosRequest(session_id="ses_1"), metadata=reader),
            stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True), metadata=reader),
        ]
        kept = stub.WatchTodos(pb.WatchTodosRequest(session_id="ses_1"), metadata=writer)
        for call in (*dropped, kept):
            await asyncio.wait_for(call.read(), 10)  # open: the first message arrived
        rewrite(auth_file, auth_toml(TOKENS["writer"], TOKENS["admin"]))
        server.reload()

        for call in dropped:
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                await _read_until_it_ends(call)
            assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED
        todos = [pb.Todo(content="still watched")]
        await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id="ses_1", todos=todos), metadata=writer, timeout=10)
        replaced = await asyncio.wait_for(kept.read(), 10)
        kept.cancel()
    assert replaced.kind == pb.CHANGE_KIND_TODOS_REPLACED


async def test_a_reload_that_moves_a_token_to_another_tenant_ends_its_streams_but_a_lowered_role_does_not(
    start: Callable[..., Any], auth_file: Path
) -> None:
    server: RunningServer = await start(auth_file=auth_file)
    admin = (("authorization", f"Bearer {TOKENS['admin'][0]}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        feed = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True), metadata=admin)
        await asyncio.wait_for(feed.read(), 10)
        rewrite(auth_file, auth_toml(TOKENS["writer"], (TOKENS["admin"][0], "acme", "reader")))
        server.reload()
        assert server.auth is not None
        assert server.auth.open_streams == 1
        rewrite(auth_file, auth_toml(TOKENS["writer"], (TOKENS["admin"][0], "beta", "reader")))
        server.reload()
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await _read_until_it_ends(feed)
    assert ended.value.code() is grpc.StatusCode.UNAUTHENTICATED


async def test_anonymous_health_watches_are_limited_while_a_token_holder_still_watches(
    start: Callable[..., Any], auth_file: Path
) -> None:
    server: RunningServer = await start(auth_file=auth_file, max_watchers=3)
    reader = (("authorization", f"Bearer {TOKENS['reader'][0]}"),)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        anonymous = [stub.Watch(health_pb2.HealthCheckRequest()) for _ in range(3)]
        for call in anonymous:
            await asyncio.wait_for(call.read(), 10)  # open: the first status arrived
        refused = stub.Watch(health_pb2.HealthCheckRequest())
        with pytest.raises(grpc.aio.AioRpcError) as exhausted:
            await asyncio.wait_for(refused.read(), 10)
        with_token = stub.Watch(health_pb2.HealthCheckRequest(), metadata=reader)
        first = await asyncio.wait_for(with_token.read(), 10)
        for call in (*anonymous, with_token):
            call.cancel()
    assert exhausted.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert first.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_server_certificate_that_has_expired_is_named_in_a_warning_at_start(
    start: Callable[..., Any], ca: CertificateAuthority, caplog: pytest.LogCaptureFixture
) -> None:
    expired = ca.issue("127.0.0.1", server=True, valid_for=datetime.timedelta(days=-1))

    await start(tls_cert=expired.cert, tls_key=expired.key)

    assert f"the TLS certificate {expired.cert} expired" in caplog.text


async def test_a_valid_server_certificate_starts_without_a_validity_warning(
    start: Callable[..., Any], server_cert: Issued, caplog: pytest.LogCaptureFixture
) -> None:
    await start(tls_cert=server_cert.cert, tls_key=server_cert.key)

    assert "the TLS certificate" not in caplog.text


def test_metrics_on_a_public_address_are_refused_unless_insecure_is_given() -> None:
    public = make_settings(metrics_port=9100, metrics_host="0.0.0.0")
    trusted = make_settings(metrics_port=9100, metrics_host="0.0.0.0", insecure=True)
    local = make_settings(metrics_port=9100)

    assert "refusing to serve metrics on '0.0.0.0'" in (public.refusal() or "")
    assert trusted.refusal() is None
    assert local.refusal() is None


async def test_an_ipv6_loopback_address_with_a_fixed_port_serves(start: Callable[..., Any]) -> None:
    with socket.create_server(("::1", 0), family=socket.AF_INET6) as probe:
        port = probe.getsockname()[1]
    server: RunningServer = await start(host="[::1]", port=port)

    async with TodoClient.connect(f"[::1]:{port}") as client:
        created, _ = await client.create_session("over_ipv6")

    assert (server.port, created.session_id) == (port, "over_ipv6")

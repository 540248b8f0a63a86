"""The address a person types, as the gRPC target every client dials (``sessiontodo_client.target``)."""

from __future__ import annotations

import pytest

from sessiontodo_client.target import service_target


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("127.0.0.1", "127.0.0.1:50051"),
        ("localhost", "localhost:50051"),
        ("todos.internal", "todos.internal:50051"),
        ("[::1]", "[::1]:50051"),
        ("::1", "[::1]:50051"),
    ],
)
def test_a_host_without_a_port_means_sessiontodos_port_not_https(address: str, target: str) -> None:
    assert service_target(address) == target


@pytest.mark.parametrize("address", ["127.0.0.1:7", "[::1]:7", "dns:///todos.internal:7", "unix:/run/todos.sock"])
def test_a_port_or_a_grpc_uri_is_kept(address: str) -> None:
    assert service_target(address) == address


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("a b", "expected HOST:PORT, such as 127.0.0.1:50051, got 'a b'"),
        ("host:http", "expected a port from 1 to 65535 after the host, got 'host:http'"),
        ("host:70000", "expected a port from 1 to 65535 after the host, got 'host:70000'"),
        ("[::1", "expected HOST:PORT, such as 127.0.0.1:50051, got '[::1'"),
    ],
)
def test_what_is_not_host_and_port_is_refused_saying_what_is_expected(address: str, problem: str) -> None:
    with pytest.raises(ValueError, match="expected") as refused:
        service_target(address)
    assert str(refused.value) == problem

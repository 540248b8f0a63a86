"""Where a client dials: the address a person types, as the gRPC target every client uses.

``127.0.0.1`` alone means sessiontodo's port (gRPC itself would dial 443, the HTTPS port, and
wait there); a value that is not ``host[:port]`` is refused before any channel exists, and so is
a host name that the resolver says does not exist, so a typo fails at start, in one line, rather
than as UNAVAILABLE calls retried for seconds. gRPC's own schemes (``dns:``, ``ipv4:``,
``unix:``…) pass as they are.
"""

from __future__ import annotations

import ipaddress
import re
import socket

DEFAULT_PORT = 50051
"""The port sessiontodo serves on unless told otherwise, and the one an address without a port means."""

_SCHEME = re.compile(r"^(?:dns|ipv4|ipv6|unix|unix-abstract|vsock|xds):", re.IGNORECASE)
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?$", re.IGNORECASE)


def service_target(address: str) -> str:
    """``address`` (``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a gRPC URI) as a gRPC target, with
    ``DEFAULT_PORT`` where no port is given; raises ``ValueError`` naming what is wrong."""
    address = address.strip()
    if _SCHEME.match(address):
        return address  # dns:///host:port, ipv4:…, unix:path: gRPC's own syntax
    if address.startswith("["):
        host, bracket, rest = address[1:].partition("]")
        if not bracket or not _is_ipv6(host) or (rest and not rest.startswith(":")):
            raise ValueError(f"expected HOST:PORT, such as 127.0.0.1:{DEFAULT_PORT}, got {address!r}")
        port = rest[1:] if rest else str(DEFAULT_PORT)
        return f"[{host}]:{_port(port, address)}"
    if _is_ipv6(address):
        return f"[{address}]:{DEFAULT_PORT}"
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, str(DEFAULT_PORT)
    if not (_is_ipv4(host) or _HOST_NAME.match(host)):
        raise ValueError(f"expected HOST:PORT, such as 127.0.0.1:{DEFAULT_PORT}, got {address!r}")
    return f"{host}:{_port(port, address)}"


def check_host_exists(target: str) -> None:
    """Raises ``ValueError`` when the resolver says the target's host name does not exist (a typo). A
    resolver that cannot answer now (no network yet) is not an error: gRPC will ask again."""
    if _SCHEME.match(target):
        return
    host = target[1:].partition("]")[0] if target.startswith("[") else target.rpartition(":")[0]
    if _is_ipv4(host) or _is_ipv6(host):
        return
    try:
        socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        if error.errno == socket.EAI_NONAME:
            raise ValueError(f"no host named {host!r} (expected HOST:PORT, such as 127.0.0.1:{DEFAULT_PORT})") from None


def _port(port: str, address: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"expected a port from 1 to 65535 after the host, got {address!r}")
    return int(port)


def _is_ipv4(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv4Address)
    except ValueError:
        return False


def _is_ipv6(host: str) -> bool:
    try:
        return isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address)
    except ValueError:
        return False

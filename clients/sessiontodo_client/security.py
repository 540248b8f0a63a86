"""How a client reaches a secured sessiontodo server: TLS, a client certificate, a bearer token.

``ChannelSecurity`` holds the material; ``ServiceConnection`` is the settings block every gateway
shares (flags and environment: ``--sessiontodo-address``, and ``ServiceSecurity``'s ``--tls``,
``--ca-file``, ``--client-cert``, ``--client-key``, ``--token``, ``--token-file``), shown in
``--help`` under ``CONNECTION_GROUP``. A
token travels only over TLS or to a loopback address (``localhost``, 127.0.0.0/8, ``[::1]``):
anything else is refused before a channel exists, so a token never crosses a network in clear text.
``host_allowed`` and ``origin_allowed`` are the other side: the checks the HTTP gateways (OpenCode
sidecar, MCP) make of a request against DNS rebinding.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self
from urllib.parse import urlsplit

import grpc
from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator

from sessiontodo_client.target import check_host_exists, service_target
from sessiontodo_common.addresses import is_loopback_host


@dataclass(frozen=True)
class ChannelSecurity:
    """TLS (``root_certificates`` None: the system's roots), optional client certificate, optional token."""

    tls: bool = False
    root_certificates: bytes | None = None
    client_certificate: bytes | None = None
    client_key: bytes | None = None
    token: str | None = None

    def __post_init__(self) -> None:
        if (self.client_certificate is None) != (self.client_key is None):
            raise ValueError("a client certificate needs its key, and a key its certificate")
        if (self.root_certificates or self.client_certificate) and not self.tls:
            raise ValueError("certificates are only used with tls=True")

    @classmethod
    def from_files(
        cls,
        *,
        tls: bool,
        ca_file: Path | None,
        client_cert: Path | None,
        client_key: Path | None,
        token: SecretStr | None,
        token_file: Path | None,
    ) -> ChannelSecurity:
        """The material the gateways' flags name (see ``ServiceSecurity``), read from its files."""
        if token is not None and token_file is not None:
            raise ValueError("give --token or --token-file, not both")
        secret = token.get_secret_value() if token is not None else None
        if token_file is not None:
            secret = token_file.read_text().strip()
            if not secret:
                raise ValueError(f"token file {token_file} is empty")
        return cls(
            tls=tls or ca_file is not None or client_cert is not None,
            root_certificates=ca_file.read_bytes() if ca_file is not None else None,
            client_certificate=client_cert.read_bytes() if client_cert is not None else None,
            client_key=client_key.read_bytes() if client_key is not None else None,
            token=secret,
        )

    def credentials(self, target: str) -> grpc.ChannelCredentials | None:
        """Channel credentials for ``target``, or None for a plain channel (no TLS, no token).

        Raises ``ValueError`` for a token without TLS to anything but a loopback address (gRPC's local
        credentials would only fail the connection later, as UNAVAILABLE, which clients retry)."""
        if self.tls:
            channel = grpc.ssl_channel_credentials(self.root_certificates, self.client_key, self.client_certificate)
        elif self.token:
            if not is_loopback(target):
                raise ValueError(
                    f"refusing to send a bearer token in plaintext to {target}: use TLS or a loopback address"
                )
            channel = grpc.local_channel_credentials(grpc.LocalConnectionType.LOCAL_TCP)
        else:
            return None
        if not self.token:
            return channel
        return grpc.composite_channel_credentials(channel, grpc.access_token_call_credentials(self.token))


_SCHEME = re.compile(r"^(?:dns:(?://[^/]*/)?|ipv4:|ipv6:)")


def is_loopback(target: str) -> bool:
    """Whether a gRPC target (``host:port``, ``[v6]:port``, with an optional ``dns:``/``ipv4:``/``ipv6:``
    scheme) names this machine: ``localhost`` or a loopback address. A host name is never resolved here."""
    address = _SCHEME.sub("", target)
    if address.startswith("["):
        host = address[1:].partition("]")[0]
    else:
        host, colon, port = address.rpartition(":")
        host = host if colon and port.isdigit() else address
    return is_loopback_host(host)


class ServiceSecurity(BaseModel):
    """How securely a program reaches sessiontodo: TLS, client certificate, token (mixed into its settings)."""

    tls: bool = Field(
        default=False, description="Connect to sessiontodo with TLS (implied by --ca-file and --client-cert)."
    )
    ca_file: Path | None = Field(
        default=None, description="PEM CA bundle that signed the sessiontodo server certificate."
    )
    client_cert: Path | None = Field(default=None, description="PEM client certificate for mutual TLS.")
    client_key: Path | None = Field(default=None, description="PEM private key of --client-cert.")
    token: SecretStr | None = Field(default=None, description="Bearer token for sessiontodo (prefer --token-file).")
    token_file: Path | None = Field(
        default=None, description="File holding the bearer token (surrounding whitespace ignored)."
    )

    def channel_security(self) -> ChannelSecurity:
        """Reads the files named here; raises ``OSError`` or ``ValueError`` if they are unusable."""
        return ChannelSecurity.from_files(
            tls=self.tls,
            ca_file=self.ca_file,
            client_cert=self.client_cert,
            client_key=self.client_key,
            token=self.token,
            token_file=self.token_file,
        )


class ServiceConnection(ServiceSecurity):
    """The gateways' settings for reaching sessiontodo, and securely (mixed into their ``Settings``)."""

    sessiontodo_address: str = Field(
        default="127.0.0.1:50051",
        json_schema_extra={"metavar": "HOST:PORT"},
        description="host:port of the sessiontodo gRPC server (a host alone: port 50051).",
    )

    @field_validator("sessiontodo_address")
    @classmethod
    def _a_service_target(cls, address: str) -> str:
        """A typo (no host:port, a host that does not exist) is refused at start, not retried for seconds."""
        target = service_target(address)
        check_host_exists(target)
        return target

    @model_validator(mode="after")
    def _no_token_in_clear(self) -> Self:
        """A token without TLS to another host is refused at start, in one line, never sent nor merely logged."""
        tls = self.tls or self.ca_file is not None or self.client_cert is not None
        has_token = self.token is not None or self.token_file is not None
        if has_token and not tls and not is_loopback(self.sessiontodo_address):
            raise ValueError(
                f"refusing to send a bearer token in plaintext to {self.sessiontodo_address}: use TLS (--tls, "
                "--ca-file) or a loopback address"
            )
        return self


CONNECTION_GROUP = {"connection to sessiontodo": ["sessiontodo_address", *ServiceSecurity.model_fields]}
"""The option group every gateway's ``--help`` shows first (``sessiontodo_common.command_line``)."""


def host_allowed(host_header: str, allowed_hosts: Sequence[str]) -> bool:
    """Whether a Host header names this server in a way DNS rebinding cannot forge (the HTTP gateways' check)."""
    host = urlsplit(f"//{host_header}").hostname or ""
    if "*" in allowed_hosts or host in (name.lower() for name in allowed_hosts):
        return True
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True  # an IP literal: no name for an attacker to re-point


def origin_allowed(origin: str, host_header: str, allowed_origins: Sequence[str]) -> bool:
    """Whether a browser request from ``origin`` may reach the HTTP gateway serving ``host_header``."""
    if "*" in allowed_origins or origin in allowed_origins:
        return True
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host_header.lower()

"""Configuration of the sidecar, read once from flags and ``SESSIONTODO_OPENCODE_*`` variables."""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client import ServiceConnection
from sessiontodo_client.security import CONNECTION_GROUP
from sessiontodo_common.addresses import is_loopback_host


class Settings(BaseSettings, ServiceConnection):
    """Serve OpenCode's todo routes and /event over sessiontodo, for OpenCode's clients and SDKs.

    Every knob is a flag or a SESSIONTODO_OPENCODE_* environment variable; flags win over the
    environment, which wins over the defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_OPENCODE_", cli_kebab_case=True, cli_prog_name="sessiontodo-opencode"
    )

    directory: str = Field(
        default_factory=os.getcwd,
        description="The directory this instance serves, as OpenCode's: sessions without a directory label "
        "belong to it, and /event without ?directory= carries them. Default: the working directory.",
    )
    project: str = Field("global", description="The projectID of sessions without a project label.")
    host: str = Field("127.0.0.1", description="Address to serve OpenCode's HTTP routes on.")
    port: int = Field(4096, ge=0, le=65535, description="Port to serve on (OpenCode's default); 0 picks a free one.")
    heartbeat_interval: float = Field(10.0, gt=0, description="Seconds between server.heartbeat frames on /event.")
    subscriber_buffer: int = Field(
        1024,
        ge=1,
        description="Unread events kept per /event client before they collapse to the latest list per session.",
    )
    catch_up_window: float = Field(
        2.0,
        ge=0,
        description="Seconds of recent changes a new /event client receives first (each session's latest list), "
        "so a client that read a list just before subscribing misses nothing.",
    )
    ready_timeout: float = Field(
        10.0, gt=0, description="Seconds a call waits for a session's watch to start or to deliver a write."
    )
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest request body accepted; a larger one is answered 413."
    )
    shutdown_grace: float = Field(5.0, ge=0, description="Seconds in-flight requests get to finish on shutdown.")
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr.")
    metrics: bool = Field(False, description="Count and time HTTP requests and serve them at GET /metrics.")
    server_username: str = Field(
        "opencode",
        validation_alias=AliasChoices(
            "server_username", "SESSIONTODO_OPENCODE_SERVER_USERNAME", "OPENCODE_SERVER_USERNAME"
        ),
        description="Basic auth user name (as OpenCode's OPENCODE_SERVER_USERNAME).",
    )
    server_password: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices(
            "server_password", "SESSIONTODO_OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_PASSWORD"
        ),
        description="Require HTTP basic auth with this password (as OpenCode's OPENCODE_SERVER_PASSWORD; prefer the "
        "environment to the command line).",
    )
    insecure: bool = Field(
        False, description="Allow binding a non-loopback --host without basic auth (OPENCODE_SERVER_PASSWORD)."
    )
    allowed_hosts: list[str] = Field(
        [], description="Host names served besides IP addresses and localhost ('*': any; DNS rebinding protection)."
    )
    allowed_origins: list[str] = Field(
        [], description="Browser origins allowed besides the sidecar's own, with CORS ('*': any)."
    )

    def refusal(self) -> str | None:
        """Why these settings must not start a sidecar, or None.

        Like sessiontodo's server (Redis's protected mode): anything reachable from other hosts needs
        basic auth, unless ``--insecure`` says that is intended. (``opencode serve`` only warns.)
        """
        if is_loopback_host(self.host) or self.insecure or self.server_password:  # "" is no password, as for OpenCode
            return None
        return (
            f"refusing to listen on {self.host!r} without basic auth (OPENCODE_SERVER_PASSWORD): anyone who can reach "
            "the port could read and change every session; set it, bind 127.0.0.1, or pass --insecure if the network "
            "is trusted"
        )


class MirrorSettings(BaseSettings, ServiceConnection):
    """Follow an OpenCode server and import its sessions and todos into sessiontodo, one way.

    Every knob is a flag or a SESSIONTODO_OPENCODE_MIRROR_* environment variable; flags win over
    the environment, which wins over the defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_OPENCODE_MIRROR_", cli_kebab_case=True, cli_prog_name="sessiontodo-opencode-mirror"
    )

    opencode: str = Field(description="Base URL of the OpenCode server to follow, e.g. http://127.0.0.1:4096.")
    opencode_username: str = Field(
        "opencode",
        validation_alias=AliasChoices("opencode_username", "OPENCODE_SERVER_USERNAME"),
        description="Basic auth user name for OpenCode (its OPENCODE_SERVER_USERNAME).",
    )
    opencode_password: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("opencode_password", "OPENCODE_SERVER_PASSWORD"),
        description="Basic auth password for an OpenCode server started with OPENCODE_SERVER_PASSWORD.",
    )
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr.")

    @field_validator("opencode")
    @classmethod
    def _an_http_url(cls, value: str) -> str:
        """A URL httpx can reach: without a scheme, every request fails and the mirror would retry for ever."""
        url = urlsplit(value)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"expected the server's URL, such as http://127.0.0.1:4096, got {value!r}")
        return value


SIDECAR_GROUPS = {
    **CONNECTION_GROUP,
    "serving OpenCode's routes": ["host", "port", "directory", "project", "max_body_bytes", "shutdown_grace"],
    "security": ["server_username", "server_password", "insecure", "allowed_hosts", "allowed_origins"],
    "events": ["heartbeat_interval", "subscriber_buffer", "catch_up_window", "ready_timeout"],
    "logs and metrics": ["log_level", "metrics"],
}
SIDECAR_EXAMPLES = (
    "python -m sessiontodo_opencode     # serves 127.0.0.1:4096 for sessiontodo at 127.0.0.1:50051",
    "python -m sessiontodo_opencode --port 4097 --sessiontodo-address 127.0.0.1:50052",
    "OPENCODE_SERVER_PASSWORD=secret python -m sessiontodo_opencode --host 0.0.0.0",
)
MIRROR_GROUPS = {
    **CONNECTION_GROUP,
    "the OpenCode server": ["opencode", "opencode_username", "opencode_password"],
}
MIRROR_EXAMPLES = ("sessiontodo-opencode-mirror --opencode http://127.0.0.1:4096",)

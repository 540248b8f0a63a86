"""Configuration of ``sessiontodo-mcp``, read once from flags and ``SESSIONTODO_MCP_*`` variables."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client import ServiceConnection
from sessiontodo_client.security import CONNECTION_GROUP
from sessiontodo_common.addresses import is_loopback_host

DEFAULT_MAX_SESSIONS = 100
"""MCP sessions open at once over HTTP (``--max-sessions``): each holds about 64 KiB and a watch per subscription."""


class Transport(StrEnum):
    STDIO = "stdio"
    HTTP = "http"


class Settings(BaseSettings, ServiceConnection):
    """An MCP server (stdio or streamable HTTP) whose tools (todo_read, todo_write, todo_update) and
    resource (sessiontodo://sessions/{id}/todos) are a sessiontodo session's todo list.

    Every knob is a flag or a SESSIONTODO_MCP_* environment variable; flags win over the
    environment, which wins over the defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_MCP_", cli_kebab_case=True, cli_prog_name="sessiontodo-mcp"
    )

    transport: Transport = Field(
        Transport.STDIO,
        description="stdio: one MCP client on stdin/stdout (what an agent launches); http: MCP streamable HTTP.",
    )
    session_id: str | None = Field(
        None,
        json_schema_extra={"metavar": "ID"},
        description="stdio: the sessiontodo session whose list the tools edit, created if missing. Default: a new "
        "session per process. Over HTTP each MCP session has its own (see the Sessiontodo-Session-Id header).",
    )
    idle_ttl: float = Field(
        7 * 24 * 3600.0,
        ge=0,
        json_schema_extra={"metavar": "SECONDS"},
        description="Seconds without a change after which sessiontodo forgets a session this server created "
        "(an abandoned agent's); 0 keeps them until removed.",
    )
    host: str = Field(
        "127.0.0.1", json_schema_extra={"metavar": "ADDRESS"}, description="http: the address to listen on."
    )
    port: int = Field(
        50060,
        ge=0,
        le=65535,
        json_schema_extra={"metavar": "PORT"},
        description="http: the port to listen on; 0 picks a free one.",
    )
    http_token: SecretStr | None = Field(
        None,
        description="http: require 'Authorization: Bearer <this>' of every MCP client (prefer --http-token-file or "
        "the environment to the command line).",
    )
    http_token_file: Path | None = Field(None, description="http: a file holding the token clients must present.")
    insecure: bool = Field(False, description="http: allow a non-loopback --host without a client token.")
    allowed_hosts: list[str] = Field(
        [],
        json_schema_extra={"metavar": "NAME"},
        description="http: Host names served besides IP addresses and localhost ('*': any; DNS rebinding guard).",
    )
    allowed_origins: list[str] = Field(
        [],
        json_schema_extra={"metavar": "ORIGIN"},
        description="http: browser origins allowed besides the server's own ('*': any).",
    )
    max_sessions: int = Field(
        DEFAULT_MAX_SESSIONS,
        ge=1,
        json_schema_extra={"metavar": "COUNT"},
        description="http: MCP sessions open at once (about 64 KiB each); a new one beyond is refused with 503.",
    )
    log_level: str = Field(
        "INFO",
        json_schema_extra={"metavar": "LEVEL"},
        description="Python logging level; logs go to stderr, never stdout.",
    )

    def client_token(self) -> str | None:
        """The token MCP clients must present over HTTP, read from its file; ``ValueError`` if unusable."""
        if self.http_token is not None and self.http_token_file is not None:
            raise ValueError("give --http-token or --http-token-file, not both")
        if self.http_token_file is not None:
            token = self.http_token_file.read_text().strip()
            if not token:
                raise ValueError(f"token file {self.http_token_file} is empty")
            return token
        return self.http_token.get_secret_value() if self.http_token is not None else None

    def refusal(self) -> str | None:
        """Why these settings must not start a server, or None.

        Flags that mean nothing for the chosen transport are refused rather than ignored; over HTTP,
        anything reachable from other hosts needs a client token unless ``--insecure`` says the
        network is trusted (as the OpenCode sidecar and sessiontodo itself do).
        """
        if self.transport is Transport.HTTP and self.session_id is not None:
            return "--session-id is for stdio: over HTTP every MCP session has its own sessiontodo session"
        if self.transport is Transport.STDIO and (self.http_token is not None or self.http_token_file is not None):
            return "--http-token and --http-token-file are for --transport http"
        exposed = not (is_loopback_host(self.host) or self.insecure)
        if self.transport is Transport.HTTP and exposed and self.http_token is None and self.http_token_file is None:
            return (
                f"refusing to listen on {self.host!r} without a client token (--http-token-file): anyone who can reach "
                "the port could read and change the todo lists; set one, bind 127.0.0.1, or pass --insecure if the "
                "network is trusted"
            )
        return None


HELP_GROUPS = {
    **CONNECTION_GROUP,
    "serving MCP": ["transport", "session_id", "idle_ttl"],
    "over HTTP": [
        "host",
        "port",
        "http_token",
        "http_token_file",
        "insecure",
        "allowed_hosts",
        "allowed_origins",
        "max_sessions",
    ],
}
"""The option groups of ``--help``, the connection first as in every gateway's."""

EXAMPLES = (
    "sessiontodo-mcp                                    # stdio, a new session for this process",
    "sessiontodo-mcp --session-id build-42              # stdio, that session's list",
    "sessiontodo-mcp --transport http --port 50060      # http://127.0.0.1:50060/mcp, a session per MCP session",
)

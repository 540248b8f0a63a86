"""Configuration of the web board, read once from flags and ``SESSIONTODO_WEB_*`` variables."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client import ServiceConnection
from sessiontodo_client.security import CONNECTION_GROUP
from sessiontodo_common.addresses import is_loopback_host


class Settings(BaseSettings, ServiceConnection):
    """Serve the live web board of every session's todo list, for people, over sessiontodo.

    The board reads and writes as its sessiontodo token's tenant, like any client. Every knob is a
    flag or a SESSIONTODO_WEB_* environment variable; flags win over the environment, which wins
    over the defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_WEB_", cli_kebab_case=True, cli_prog_name="sessiontodo-web"
    )

    host: str = Field("127.0.0.1", description="Address to serve the board on.")
    port: int = Field(8080, ge=0, le=65535, description="Port to serve the board on; 0 picks a free one.")
    viewer_token: SecretStr | None = Field(
        None, description="The token viewers sign in with (prefer --viewer-token-file); default: one made at start."
    )
    viewer_token_file: Path | None = Field(None, description="File holding the viewers' sign-in token.")
    username: str = Field("sessiontodo", description="User name for signing in with basic auth (with --password).")
    password: SecretStr | None = Field(
        None, description="Let viewers sign in with basic auth (--username and this password) as well as the token."
    )
    https_cert: Path | None = Field(None, description="PEM certificate (chain) to serve the board over HTTPS with.")
    https_key: Path | None = Field(None, description="PEM private key of --https-cert.")
    insecure: bool = Field(False, description="Allow serving a non-loopback --host over plain HTTP.")
    allowed_hosts: list[str] = Field(
        [], description="Host names served besides IP addresses and localhost (DNS rebinding protection)."
    )
    sign_in_lifetime: float = Field(
        12 * 3600.0, gt=0, description="Seconds a sign-in lasts before the viewer signs in again."
    )
    heartbeat_interval: float = Field(15.0, gt=0, description="Seconds between keep-alive comments on /api/events.")
    feed_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds without any message from sessiontodo (it sends PROGRESS on a quiet feed, every 10 s "
        "by default) before viewers are told it is unreachable.",
    )
    resume_window: int = Field(
        10_000, ge=1, description="Changes kept so that a reconnecting page resumes after its last one (Last-Event-ID)."
    )
    changes_per_session: int = Field(50, ge=1, description="Recent changes kept and shown per session.")
    subscriber_buffer: int = Field(
        1024, ge=1, description="Unsent changes kept per page before it is sent the whole board again instead."
    )
    ready_timeout: float = Field(
        10.0, gt=0, description="Seconds a write waits for the feed to deliver it before answering."
    )
    max_body_bytes: int = Field(1024 * 1024, ge=1024, description="Largest request body accepted; larger is 413.")
    shutdown_grace: float = Field(5.0, ge=0, description="Seconds in-flight requests get to finish on shutdown.")
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr.")

    @model_validator(mode="after")
    def _one_token_source(self) -> Settings:
        if self.viewer_token is not None and self.viewer_token_file is not None:
            raise ValueError("give --viewer-token or --viewer-token-file, not both")
        if (self.https_cert is None) != (self.https_key is None):
            raise ValueError("--https-cert and --https-key go together")
        return self

    @property
    def https(self) -> bool:
        """Whether the board serves HTTPS (``tls`` is about the connection to sessiontodo)."""
        return self.https_cert is not None

    def refusal(self) -> str | None:
        """Why these settings must not start a board, or None.

        Like the server and the OpenCode sidecar: a board reachable from other hosts serves HTTPS, so
        that sign-in tokens, passwords and cookies never cross a network in clear text, unless
        ``--insecure`` says the network is trusted (or a TLS proxy on the same host fronts it).
        """
        if is_loopback_host(self.host) or self.https or self.insecure:
            return None
        return (
            f"refusing to serve {self.host!r} over plain HTTP: sign-in tokens and cookies would cross the network "
            "in clear text; give --https-cert and --https-key, bind 127.0.0.1 (e.g. behind a TLS proxy), or pass "
            "--insecure if the network is trusted"
        )

    def viewer_secret(self) -> str | None:
        """The configured sign-in token, read from its file; None when the board should make one."""
        if self.viewer_token_file is not None:
            token = self.viewer_token_file.read_text().strip()
            if not token:
                raise ValueError(f"viewer token file {self.viewer_token_file} is empty")
            return token
        return self.viewer_token.get_secret_value() if self.viewer_token else None


HELP_GROUPS = {
    **CONNECTION_GROUP,
    "serving the board": ["host", "port", "https_cert", "https_key", "max_body_bytes", "shutdown_grace"],
    "signing in": ["viewer_token", "viewer_token_file", "username", "password", "sign_in_lifetime"],
    "security": ["insecure", "allowed_hosts"],
    "the feed and the pages": [
        "heartbeat_interval",
        "feed_timeout",
        "resume_window",
        "changes_per_session",
        "subscriber_buffer",
        "ready_timeout",
    ],
}
"""The option groups of ``--help``, the connection first as in every gateway's."""

EXAMPLES = (
    "sessiontodo-web                       # http://127.0.0.1:8080 for sessiontodo at 127.0.0.1:50051",
    "sessiontodo-web --port 8081 --sessiontodo-address 127.0.0.1:50052",
    "sessiontodo-web --viewer-token-file viewer.token --token-file board.token",
)

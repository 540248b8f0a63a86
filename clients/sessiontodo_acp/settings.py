"""Configuration of the ACP proxy, read once from flags and ``SESSIONTODO_ACP_*`` environment variables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_common.command_line import parse_settings

if TYPE_CHECKING:
    from sessiontodo_client.retry import RetryPolicy
    from sessiontodo_client.security import ChannelSecurity


PROG = "sessiontodo-acp-proxy"

HELP_GROUPS = {
    "connection to sessiontodo": [
        "address",
        "tls",
        "ca_file",
        "client_cert",
        "client_key",
        "token",
        "token_file",
    ],
    "retries of sessiontodo writes": ["retry_initial", "retry_max", "retry_attempts", "retry_deadline"],
    "the agent and its sessions": ["agent_exit_timeout", "drain_timeout", "idle_ttl", "max_line_bytes"],
}
EXAMPLES = (
    "sessiontodo-acp-proxy -- npx @zed-industries/claude-agent-acp",
    "SESSIONTODO_ACP_ADDRESS=127.0.0.1:50052 sessiontodo-acp-proxy -- opencode acp",
)


class ProxySettings(BaseSettings):
    """Run an ACP agent behind a transparent stdio proxy that keeps its plans in sessiontodo.

    The editor starts the proxy as its agent; the agent command follows --. Every knob is a flag or
    a SESSIONTODO_ACP_* environment variable; flags win over the environment, which wins over the
    defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_ACP_", cli_kebab_case=True, cli_prog_name="sessiontodo-acp-proxy"
    )

    address: str = Field("127.0.0.1:50051", description="host:port of the sessiontodo gRPC service.")
    # sessiontodo_client.ServiceConnection's fields, declared here because importing that package loads
    # gRPC, which must wait until the agent is started (see launch); channel_security() shares its reading.
    tls: bool = Field(False, description="Use TLS to sessiontodo (implied by --ca-file and --client-cert).")
    ca_file: Path | None = Field(None, description="PEM CA bundle that signed sessiontodo's certificate.")
    client_cert: Path | None = Field(None, description="PEM client certificate for mutual TLS.")
    client_key: Path | None = Field(None, description="PEM private key of --client-cert.")
    token: SecretStr | None = Field(None, description="Bearer token for sessiontodo (prefer --token-file).")
    token_file: Path | None = Field(None, description="File holding the bearer token (whitespace trimmed).")
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr, never stdout.")
    agent_exit_timeout: float = Field(
        5.0, ge=0, description="Seconds the agent gets to exit after the editor closes the proxy's input."
    )
    drain_timeout: float = Field(2.0, ge=0, description="Seconds pending plan writes get when the proxy exits.")
    retry_initial: float = Field(0.2, gt=0, description="Longest first delay before retrying a sessiontodo write.")
    retry_max: float = Field(5.0, gt=0, description="Longest delay between retries of a sessiontodo write.")
    retry_attempts: int = Field(8, ge=1, description="Tries per sessiontodo write while sessiontodo is unavailable.")
    retry_deadline: float = Field(
        60.0, gt=0, description="Seconds after which a sessiontodo write is not tried again (the job is dropped)."
    )
    idle_ttl: float = Field(
        7 * 24 * 3600.0,
        ge=0,
        description="Seconds without a change after which sessiontodo forgets a session the proxy created "
        "(an abandoned editor's); 0 keeps sessions until deleted.",
    )
    max_line_bytes: int = Field(
        64 << 20,
        ge=1024,
        description="Largest message forwarded, in bytes; a longer one is refused with a JSON-RPC error.",
    )

    @classmethod
    def from_flags(cls, flags: Sequence[str]) -> ProxySettings:
        """Settings from the proxy's own flags (everything before ``--``), the environment and defaults;
        ``--help`` prints the help and a wrong flag or value one line, and both exit (0 and 2)."""
        return parse_settings(
            cls, flags, prog=PROG, usage="[options] -- AGENT COMMAND...", groups=HELP_GROUPS, examples=EXAMPLES
        )

    def channel_security(self) -> ChannelSecurity:
        """TLS material and token for sessiontodo, read from their files (``OSError``/``ValueError`` if unusable)."""
        from sessiontodo_client.security import ChannelSecurity  # gRPC loads after the agent started

        return ChannelSecurity.from_files(
            tls=self.tls,
            ca_file=self.ca_file,
            client_cert=self.client_cert,
            client_key=self.client_key,
            token=self.token,
            token_file=self.token_file,
        )

    def session_idle_ttl(self) -> float | None:
        return self.idle_ttl or None

    def retry_policy(self) -> RetryPolicy:
        """How a sessiontodo write (one job) and the channel's reconnects back off."""
        from sessiontodo_client.retry import RetryPolicy  # gRPC loads after the agent started (see launch)

        return RetryPolicy(
            attempts=self.retry_attempts,
            initial=self.retry_initial,
            maximum=max(self.retry_max, self.retry_initial),
            deadline=self.retry_deadline,
        )

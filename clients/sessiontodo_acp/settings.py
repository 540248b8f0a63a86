"""Configuration of the ACP proxy, read once from flags and ``SESSIONTODO_ACP_*`` environment variables.

Importing it loads gRPC (through the typed client): it is imported once the agent has started
(see ``launch``), or for ``--help``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client.retry import RetryPolicy
from sessiontodo_client.security import CONNECTION_GROUP, ServiceConnection
from sessiontodo_common.command_line import parse_settings

PROG = "sessiontodo-acp-proxy"

HELP_GROUPS = {
    **CONNECTION_GROUP,
    "retries of sessiontodo writes": ["retry_initial", "retry_max", "retry_attempts", "retry_deadline"],
    "the agent and its sessions": ["agent_exit_timeout", "drain_timeout", "idle_ttl", "max_line_bytes"],
}
EXAMPLES = (
    "sessiontodo-acp-proxy -- npx @zed-industries/claude-agent-acp",
    "sessiontodo-acp-proxy --sessiontodo-address 127.0.0.1:50052 -- opencode acp",
)
OLD_ENV_ADDRESS = "SESSIONTODO_ACP_ADDRESS"
"""The address's environment variable before 0.4 (editors' configurations name it): still read, after the new one."""


class ProxySettings(BaseSettings, ServiceConnection):
    """Run an ACP agent behind a transparent stdio proxy that keeps its plans in sessiontodo.

    The editor starts the proxy as its agent; the agent command follows --. Every knob is a flag or
    a SESSIONTODO_ACP_* environment variable; flags win over the environment, which wins over the
    defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_ACP_", cli_kebab_case=True, cli_prog_name="sessiontodo-acp-proxy"
    )

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

    @model_validator(mode="before")
    @classmethod
    def _old_address_variable(cls, data: Any) -> Any:
        """``SESSIONTODO_ACP_ADDRESS`` where neither the flag nor the new variable gives the address."""
        if isinstance(data, dict) and "sessiontodo_address" not in data and OLD_ENV_ADDRESS in os.environ:
            return {**data, "sessiontodo_address": os.environ[OLD_ENV_ADDRESS]}
        return data

    @classmethod
    def from_flags(cls, flags: Sequence[str]) -> ProxySettings:
        """Settings from the proxy's own flags (everything before ``--``), the environment and defaults;
        ``--help`` prints the help and a wrong flag or value one line, and both exit (0 and 2)."""
        return parse_settings(
            cls,
            flags,
            prog=PROG,
            usage="[options] -- AGENT COMMAND...",
            groups=HELP_GROUPS,
            examples=EXAMPLES,
            flag_aliases={"sessiontodo_address": ["--address"]},  # the proxy's flag before 0.4
        )

    def session_idle_ttl(self) -> float | None:
        return self.idle_ttl or None

    def retry_policy(self) -> RetryPolicy:
        """How a sessiontodo write (one job) and the channel's reconnects back off."""
        return RetryPolicy(
            attempts=self.retry_attempts,
            initial=self.retry_initial,
            maximum=max(self.retry_max, self.retry_initial),
            deadline=self.retry_deadline,
        )

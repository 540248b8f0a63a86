"""Configuration of the ACP proxy, read once from flags and ``SESSIONTODO_ACP_*`` environment variables."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client import RetryPolicy


class ProxySettings(BaseSettings):
    """Every knob of ``sessiontodo-acp-proxy``; flags win over environment variables, which win over defaults."""

    model_config = SettingsConfigDict(env_prefix="SESSIONTODO_ACP_")

    address: str = Field("127.0.0.1:50051", description="host:port of the sessiontodo gRPC service.")
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr, never stdout.")
    agent_exit_timeout: float = Field(
        5.0, ge=0, description="Seconds the agent gets to exit after the editor closes the proxy's input."
    )
    drain_timeout: float = Field(2.0, ge=0, description="Seconds pending plan writes get when the proxy exits.")
    retry_initial: float = Field(0.2, gt=0, description="First delay before retrying a failed sessiontodo write.")
    retry_max: float = Field(5.0, gt=0, description="Longest delay between retries of a failed sessiontodo write.")
    max_line_bytes: int = Field(
        64 << 20,
        ge=1024,
        description="Messages up to this size are observed; longer ones are forwarded untouched but not observed.",
    )

    def backoff(self) -> RetryPolicy:
        return RetryPolicy(initial=self.retry_initial, maximum=self.retry_max)

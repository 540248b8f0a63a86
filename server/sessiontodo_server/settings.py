"""Configuration, read once from flags and ``SESSIONTODO_*`` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_common.addresses import is_loopback_host, redact_url
from sessiontodo_server.domain.budget import DEFAULT_BUDGET, MemoryBudget
from sessiontodo_server.domain.todos import MAX_IDLE_TTL
from sessiontodo_server.domain.values import Limits

DEFAULT_STORE = "sqlite:///data/sessiontodo.db"


class Settings(BaseSettings):
    """Serve per-session todo lists over gRPC (sessiontodo.v1.TodoService) until Ctrl-C or SIGTERM.

    Every knob is a flag or a SESSIONTODO_* environment variable; flags win over the environment,
    which wins over the defaults."""

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_", cli_kebab_case=True, cli_prog_name="sessiontodo-server"
    )

    host: str = Field("127.0.0.1", description="Address to listen on.")
    port: int = Field(50051, ge=0, le=65535, description="Port to listen on; 0 picks a free one.")
    store: str = Field(
        DEFAULT_STORE,
        description="Store URL: memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db, redis://host:port/db,"
        " etcd://host:2379,host:2379,host:2379/prefix.",
    )
    durability: Literal["process", "fsync"] = Field(
        "process",
        description="sqlite store: acknowledge writes once they survive a process crash (process) or an OS crash"
        " and power loss too (fsync: synchronous=FULL, group-committed).",
    )
    redis_wait_replicas: int = Field(
        0,
        ge=0,
        description="Redis store: answer a write only once this many Redis replicas have it (WAIT), so that promoting"
        " one after the primary dies loses no acknowledged write; UNAVAILABLE when they do not confirm in time.",
    )
    history_limit: int = Field(64, ge=0, description="Changes kept per session for resuming watchers.")
    feed_history: int = Field(
        4096, ge=0, description="Changes kept server-wide for resuming WatchChanges feeds by cursor."
    )
    default_idle_ttl: float = Field(
        0,
        ge=0,
        le=MAX_IDLE_TTL,
        description="Seconds a session may go without a change before it expires, unless it sets its own; 0 never.",
    )
    expiry_interval: float = Field(
        1.0, gt=0, description="Seconds between checks for expired sessions and lapsed claim leases."
    )
    watch_buffer: int = Field(256, ge=1, description="Changes buffered per watcher before it is reset.")
    memory_budget: int = Field(
        DEFAULT_BUDGET,
        ge=16 << 20,
        description="Bytes for lists (half: writes beyond are RESOURCE_EXHAUSTED), history (a quarter) and"
        " watcher buffers (a quarter).",
    )
    progress_interval: float = Field(10.0, gt=0, description="Seconds between PROGRESS messages on a quiet watch.")
    shutdown_grace: float = Field(5.0, ge=0, description="Seconds in-flight calls get to finish on shutdown.")
    reflection: bool = Field(True, description="Serve gRPC server reflection (for grpcurl).")
    reuse_port: bool = Field(False, description="Allow several processes on one port (SO_REUSEPORT).")
    max_connection_age: float = Field(
        0, ge=0, description="Seconds before a connection is closed to rebalance; 0 never."
    )
    event_loop: Literal["auto", "uvloop", "asyncio"] = Field(
        "auto", description="Event loop: uvloop when installed (auto), or insist on one."
    )
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr.")
    tls_cert: Path | None = Field(None, description="PEM certificate chain: serve TLS (reloaded on SIGHUP).")
    tls_key: Path | None = Field(None, description="PEM private key of --tls-cert.")
    tls_client_ca: Path | None = Field(
        None, description="PEM CA bundle: clients must present a certificate it signed (mutual TLS)."
    )
    auth_file: Path | None = Field(
        None, description="TOML file of hashed bearer tokens with tenants and roles (reloaded on SIGHUP)."
    )
    insecure: bool = Field(False, description="Allow binding a non-loopback address without both TLS and --auth-file.")
    log_format: Literal["text", "json"] = Field("text", description="text, or json: one JSON object per line.")
    log_requests: bool = Field(
        False, description="Log one line per finished rpc: method, session id, status code, latency."
    )
    metrics_port: int | None = Field(
        None, ge=0, le=65535, description="Serve Prometheus metrics on this port (0 picks one); off when unset."
    )
    metrics_host: str = Field("127.0.0.1", description="Address the metrics endpoint listens on.")
    tracing: bool = Field(
        False,
        description="Trace every rpc with OpenTelemetry (the `tracing` extra); OTLP export is configured by the "
        "standard OTEL_* environment variables.",
    )

    max_streams_per_connection: int = Field(
        1000, ge=1, description="Concurrent calls (watches included) one HTTP/2 connection may open."
    )
    max_connections: int = Field(
        0, ge=0, description="Connections accepted at once; 0: the file-descriptor limit less a reserve."
    )
    max_connection_idle: float = Field(
        300, ge=0, description="Seconds a connection without calls stays open; 0 forever."
    )
    request_timeout: float = Field(
        10, gt=0, description="Seconds a call may take to send its request message before it is ended."
    )
    keepalive_time: float = Field(
        60, gt=0, description="Seconds between the server's pings on a quiet connection (dead peers are dropped)."
    )
    keepalive_timeout: float = Field(20, gt=0, description="Seconds to wait for a ping's answer.")
    min_client_ping_interval: float = Field(
        10, gt=0, description="Clients pinging more often than this are disconnected (GOAWAY too_many_pings)."
    )

    # Limits: a call beyond one fails (INVALID_ARGUMENT or RESOURCE_EXHAUSTED) and changes nothing.
    max_session_id_length: int = Field(
        128, ge=1, le=1024, description="Longest session id in characters; longer is INVALID_ARGUMENT."
    )
    max_todo_id_length: int = Field(
        128, ge=1, le=1024, description="Longest todo id in characters; longer is INVALID_ARGUMENT."
    )
    max_content_length: int = Field(
        4096, ge=1, le=65536, description="Longest todo content in characters; longer is INVALID_ARGUMENT."
    )
    max_todos_per_session: int = Field(
        1000, ge=1, le=10_000, description="Most todos in one list; more is RESOURCE_EXHAUSTED."
    )
    max_list_bytes: int = Field(
        1 << 20,
        ge=1024,
        le=3 << 20,
        description="Most text bytes in one list, keeping messages under gRPC's 4 MiB; more is RESOURCE_EXHAUSTED.",
    )
    max_sessions: int = Field(
        100_000, ge=1, description="Most sessions (across replicas); a new one beyond is RESOURCE_EXHAUSTED."
    )
    max_watchers: int = Field(
        20_000,
        ge=1,
        description="Most open WatchTodos and WatchChanges streams here, together; one more is RESOURCE_EXHAUSTED.",
    )
    max_sessions_per_tenant: int = Field(0, ge=0, description="Sessions one tenant may hold; 0: up to --max-sessions.")
    max_watchers_per_tenant: int = Field(0, ge=0, description="Streams one tenant may open; 0: up to --max-watchers.")
    memory_per_tenant: int = Field(
        0, ge=0, description="Bytes of lists one tenant may hold, within the budget's lists share; 0: no own share."
    )

    def refusal(self) -> str | None:
        """Why these settings must not start a server, or None.

        Like Redis's protected mode: anything reachable from other hosts needs TLS and tokens,
        unless ``--insecure`` says that is intended.
        """
        if (self.tls_cert is None) != (self.tls_key is None):
            return "--tls-cert and --tls-key go together"
        if self.tls_client_ca is not None and self.tls_cert is None:
            return "--tls-client-ca needs --tls-cert and --tls-key"
        if self.metrics_port is not None and not (is_loopback_host(self.metrics_host) or self.insecure):
            return (
                f"refusing to serve metrics on {self.metrics_host!r}: the metrics endpoint is plain HTTP without "
                "tokens, open to anyone who can reach it; bind it to 127.0.0.1, or pass --insecure if the network "
                "is trusted"
            )
        if is_loopback_host(self.host) or self.insecure or (self.tls_cert is not None and self.auth_file is not None):
            return None
        needed = (("--tls-cert/--tls-key", self.tls_cert), ("--auth-file", self.auth_file))
        missing = " and ".join(flag for flag, value in needed if value is None)
        return (
            f"refusing to listen on {self.host!r} without {missing}: anyone who can reach the port could read and "
            "change every session; add them, bind 127.0.0.1, or pass --insecure if the network is trusted"
        )

    def data_location(self) -> str:
        """Where the data lives, for people: the sqlite file's absolute path, memory, or the redacted Redis URL."""
        scheme = urlsplit(self.store).scheme
        if scheme == "sqlite" and self.store.startswith("sqlite:///"):
            return str(Path(self.store.removeprefix("sqlite:///")).resolve())
        if scheme == "memory":
            return "memory only (gone when the server stops)"
        return redact_url(self.store)

    def limits(self) -> Limits:
        return Limits(
            max_session_id_length=self.max_session_id_length,
            max_todo_id_length=self.max_todo_id_length,
            max_content_length=self.max_content_length,
            max_todos_per_session=self.max_todos_per_session,
            max_list_bytes=self.max_list_bytes,
            max_sessions=self.max_sessions,
            max_watchers=self.max_watchers,
            max_sessions_per_tenant=self.max_sessions_per_tenant,
            max_watchers_per_tenant=self.max_watchers_per_tenant,
        )

    def budget(self) -> MemoryBudget:
        return MemoryBudget(self.memory_budget, self.memory_per_tenant)


HELP_GROUPS = {
    "listening": ["host", "port", "reuse_port", "reflection", "event_loop", "shutdown_grace"],
    "data": [
        "store",
        "durability",
        "redis_wait_replicas",
        "history_limit",
        "feed_history",
        "default_idle_ttl",
        "expiry_interval",
    ],
    "security": ["tls_cert", "tls_key", "tls_client_ca", "auth_file", "insecure"],
    "logs, metrics and traces": ["log_level", "log_format", "log_requests", "metrics_port", "metrics_host", "tracing"],
    "watches": ["watch_buffer", "progress_interval"],
    "connections": [
        "max_connection_age",
        "max_streams_per_connection",
        "max_connections",
        "max_connection_idle",
        "request_timeout",
        "keepalive_time",
        "keepalive_timeout",
        "min_client_ping_interval",
    ],
    "limits (a call beyond one fails and changes nothing)": [
        "memory_budget",
        "max_session_id_length",
        "max_todo_id_length",
        "max_content_length",
        "max_todos_per_session",
        "max_list_bytes",
        "max_sessions",
        "max_watchers",
        "max_sessions_per_tenant",
        "max_watchers_per_tenant",
        "memory_per_tenant",
    ],
}
"""The option groups of ``--help``."""

HELP_EXAMPLES = (
    "python -m sessiontodo_server                       # 127.0.0.1:50051, data in data/sessiontodo.db",
    "python -m sessiontodo_server --store memory://     # nothing kept after exit",
    "python -m sessiontodo_server --port 50052 --store sqlite:///data/second.db   # a second server",
    "SESSIONTODO_LOG_LEVEL=debug python -m sessiontodo_server",
)

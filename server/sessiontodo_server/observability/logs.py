"""Logging set-up: text or one JSON object per line on stderr, with the rpc's context on every line.

Every line logged while an rpc runs carries its method and session id (set by the observing
interceptor) and, when tracing is on, the trace id, so one request's lines can be found
together and next to its trace.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from types import ModuleType
from typing import Any, Literal

LogFormat = Literal["text", "json"]

REQUEST_LOGGER = "sessiontodo_server.requests"
"""One line per finished rpc (``--log-requests``): method, session id, status code, latency."""


@dataclass(slots=True)
class RpcContext:
    method: str
    session_id: str | None


current_rpc: ContextVar[RpcContext | None] = ContextVar("current_rpc", default=None)


def note_request(request: object) -> None:
    """Put a request's session id on the current rpc's log context, once the transport has parsed it
    (a no-op when nothing observes rpcs)."""
    rpc = current_rpc.get()
    if rpc is not None:
        rpc.session_id = getattr(request, "session_id", None)


@functools.cache
def _tracing() -> ModuleType | None:
    """OpenTelemetry's trace API, imported on first use and once (a failed import is not remembered by Python)."""
    try:
        from opentelemetry import trace
    except ImportError:  # without the `tracing` extra
        return None
    return trace


def _trace_id() -> str | None:
    """The current OpenTelemetry trace id in hex, or None (no span, or no `tracing` extra)."""
    trace = _tracing()
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class RpcContextFilter(logging.Filter):
    """Puts ``method``, ``session_id`` and ``trace_id`` on every record (None outside an rpc)."""

    def filter(self, record: logging.LogRecord) -> bool:
        rpc = current_rpc.get()
        if not hasattr(record, "method"):
            record.method = rpc.method if rpc else None
        if not hasattr(record, "session_id"):
            record.session_id = rpc.session_id if rpc else None
        record.trace_id = _trace_id()
        return True


_JSON_FIELDS = ("method", "session_id", "code", "latency_ms", "trace_id")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, then the rpc fields that are set."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in _JSON_FIELDS:
            if (value := getattr(record, field, None)) is not None:
                line[field] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """The classic line, with the rpc's fields appended when they are set."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = " ".join(
            f"{field}={value}" for field in _JSON_FIELDS if (value := getattr(record, field, None)) is not None
        )
        return f"{text} [{fields}]" if fields else text


def configure_logging(level: str, log_format: LogFormat) -> None:
    """Logs go to stderr: stdout may be a protocol channel."""
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(RpcContextFilter())
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)

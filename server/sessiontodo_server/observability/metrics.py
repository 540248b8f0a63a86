"""Prometheus metrics: go-grpc-prometheus's server metrics, store timings and the service's own gauges.

Kept out of the domain: a grpc.aio server interceptor (``observing``) counts and times every rpc, a wrapper
around the ``TodoStore`` times every store operation, the gauges read the book when scraped,
and the few things only the domain sees arrive through its ``BookObserver`` hook. The names
and labels of the gRPC metrics are go-grpc-prometheus's, so existing dashboards work.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import start_http_server
from prometheus_client.gc_collector import GCCollector
from prometheus_client.process_collector import ProcessCollector

from sessiontodo_server.domain import errors
from sessiontodo_server.domain.batch import Batch, BatchWritten, Write, WriteContext
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.budget import MemoryBudget
from sessiontodo_server.domain.observer import ConflictReason, ResetReason
from sessiontodo_server.domain.periodic import repeat
from sessiontodo_server.domain.store import SessionState, TodoStore, Written
from sessiontodo_server.domain.values import EVERY_SESSION, Change, RemovalReason, SessionFilter, SessionInfo

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer  # the `tracing` extra

log = logging.getLogger(__name__)

SESSION_COUNT_INTERVAL = 5.0
"""Seconds between reads of the session count (one store call, cheap even on Redis)."""

# go-grpc-prometheus's buckets are Prometheus' defaults; ours start lower, where a local call lands.
_SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

_STORE_OPERATIONS = (
    "open",
    "create_session",
    "remove_session",
    "remove_all_sessions",
    "list_sessions",
    "session_count",
    "get",
    "write",
    "changes_after",
)
"""Every operation ``InstrumentedStore`` times: its series exist at zero from the start."""

_GO_CODE_NAMES = {
    grpc.StatusCode.CANCELLED: "Canceled",  # Go's spelling: dashboards match on it
    **{
        code: "".join(word.capitalize() for word in code.name.split("_"))
        for code in grpc.StatusCode
        if code is not grpc.StatusCode.CANCELLED
    },
}
_GO_CODE_NAMES[grpc.StatusCode.OK] = "OK"
_CODES_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def status_code(code: grpc.StatusCode | int | None) -> grpc.StatusCode:
    """A servicer context's code as a StatusCode (the context may hold a bare number; unset is OK)."""
    if isinstance(code, int):
        return _CODES_BY_NUMBER.get(code, grpc.StatusCode.UNKNOWN)
    return code or grpc.StatusCode.OK


def code_name(code: grpc.StatusCode) -> str:
    """go-grpc-prometheus's ``grpc_code`` label: ``OK``, ``NotFound``, ``Canceled``…"""
    return _GO_CODE_NAMES[code]


class Metrics:
    """Every metric of one server, in its own registry (several servers can share a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_resident_memory_bytes, CPU, open fds
        GCCollector(registry=self.registry)
        rpc = ["grpc_type", "grpc_service", "grpc_method"]
        self.started = Counter("grpc_server_started_total", "RPCs started on the server.", rpc, registry=self.registry)
        self.handled = Counter(
            "grpc_server_handled_total",
            "RPCs completed on the server, regardless of success or failure.",
            [*rpc, "grpc_code"],
            registry=self.registry,
        )
        self.handling_seconds = Histogram(
            "grpc_server_handling_seconds",
            "Response latency (seconds) of gRPC calls until they are finished by the server.",
            rpc,
            buckets=_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.msg_sent = Counter(
            "grpc_server_msg_sent_total", "gRPC stream messages sent by the server.", rpc, registry=self.registry
        )
        self.store_seconds = Histogram(
            "sessiontodo_store_seconds",
            "Time spent in store operations, by operation.",
            ["operation"],
            buckets=_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.store_errors = Counter(
            "sessiontodo_store_errors_total",
            "Store operations that failed (the store unreachable or failing), by operation.",
            ["operation"],
            registry=self.registry,
        )
        self.watch_resets = Counter(
            "sessiontodo_watch_resets_total",
            "RESET snapshots sent to watchers: lagged (buffer overflow) or history (resume not bridgeable).",
            ["reason"],
            registry=self.registry,
        )
        self.write_conflicts = Counter(
            "sessiontodo_write_conflicts_total",
            "Writes whose expected_revision was not the session's (answered ABORTED).",
            ["reason"],
            registry=self.registry,
        )
        self.sessions = Gauge("sessiontodo_sessions", "Sessions in the store.", registry=self.registry)
        self.watchers = Gauge("sessiontodo_watchers", "Open WatchTodos streams on this server.", registry=self.registry)
        self.memory_budget = Gauge(
            "sessiontodo_memory_budget_bytes",
            "The memory budget (--memory-budget) by share: lists, history (with the feed), watcher buffers.",
            ["share"],
            registry=self.registry,
        )
        self.memory_held = Gauge(
            "sessiontodo_memory_held_bytes",
            "Bytes held against each share of the memory budget.",
            ["share"],
            registry=self.registry,
        )
        self.feed_streams = Gauge(
            "sessiontodo_feed_streams", "Open WatchChanges (feed) streams on this server.", registry=self.registry
        )
        for operation in _STORE_OPERATIONS:
            self.store_seconds.labels(operation)
            self.store_errors.labels(operation)
        for reason in ResetReason.__args__:  # type: ignore[attr-defined]
            self.watch_resets.labels(reason)
        for reason in ConflictReason.__args__:  # type: ignore[attr-defined]
            self.write_conflicts.labels(reason)

    def initialize(self, service: ServiceDescriptor) -> None:
        """Every method's series at zero from the start, as go-grpc-prometheus's InitializeMetrics does,
        so rates and ratios exist before the first call and error codes before the first error."""
        for method in service.methods:
            labels = (grpc_type(method.client_streaming, method.server_streaming), service.full_name, method.name)
            for metric in (self.started, self.handling_seconds, self.msg_sent):
                metric.labels(*labels)
            for code in grpc.StatusCode:
                self.handled.labels(*labels, code_name(code))

    def observe_budget(self, budget: MemoryBudget, book: TodoBook) -> None:
        shares = {"lists": budget.lists, "history": budget.history, "buffers": budget.buffers}
        for share, limit in shares.items():
            self.memory_budget.labels(share).set(limit)
            self.memory_held.labels(share).set_function(functools.partial(_held, book, share))

    def observe_book(self, book: TodoBook) -> None:
        # The hub counts watches and feeds together (they share --max-watchers).
        self.watchers.set_function(lambda: max(0, book.watcher_count - book.feed_count))
        self.feed_streams.set_function(lambda: book.feed_count)

    # BookObserver

    def watch_reset(self, reason: ResetReason) -> None:
        self.watch_resets.labels(reason).inc()

    def write_conflict(self, reason: ConflictReason) -> None:
        self.write_conflicts.labels(reason).inc()


def _held(book: TodoBook, share: str) -> float:
    return book.memory_held()[share]


def grpc_type(client_streaming: bool, server_streaming: bool) -> str:
    if client_streaming:
        return "bidi_stream" if server_streaming else "client_stream"
    return "server_stream" if server_streaming else "unary"


async def count_sessions(metrics: Metrics, book: TodoBook) -> None:
    """Keep ``sessiontodo_sessions`` current until cancelled (a scrape runs on another thread, and
    the store is async, so the count is read here rather than at scrape time)."""

    async def count() -> None:
        metrics.sessions.set(await book.session_count())

    def unavailable(error: Exception) -> None:  # the store is down: health and store_errors_total say so
        log.debug("session count unavailable: %s", error)

    await repeat(count, every=SESSION_COUNT_INTERVAL, on_error=unavailable)


def serve_metrics(metrics: Metrics, host: str, port: int) -> tuple[Callable[[], None], int]:
    """Serve ``/metrics`` over HTTP on a daemon thread; returns its stop function and its port."""
    http_server, thread = start_http_server(port, addr=host, registry=metrics.registry)

    def stop() -> None:
        http_server.shutdown()
        http_server.server_close()
        thread.join()

    return stop, http_server.server_port


# The store, timed


class InstrumentedStore:
    """A ``TodoStore`` that times every operation into ``sessiontodo_store_seconds``, counts failures, and,
    given a tracer, makes each a child span of the rpc's. Domain outcomes (a missing parent, the session
    limit, a lost compare-and-set) are answers, not store errors."""

    def __init__(self, store: TodoStore, metrics: Metrics | None, tracer: Tracer | None = None) -> None:
        self._store = store
        self._metrics = metrics
        self._tracer = tracer
        self.feed_epoch = store.feed_epoch

    @contextmanager
    def _timed(self, operation: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            if self._tracer is None:
                yield
            else:
                with self._tracer.start_as_current_span(f"store.{operation}"):
                    yield
        except errors.TodoError as error:
            if isinstance(error, errors.Unavailable) and self._metrics is not None:  # the store unreachable
                self._metrics.store_errors.labels(operation).inc()
            raise
        except Exception:
            if self._metrics is not None:
                self._metrics.store_errors.labels(operation).inc()
            raise
        finally:
            if self._metrics is not None:
                self._metrics.store_seconds.labels(operation).observe(time.perf_counter() - start)

    async def open(self) -> None:
        with self._timed("open"):
            await self._store.open()
        self.feed_epoch = self._store.feed_epoch  # a durable store reads its epoch when it opens

    async def close(self) -> None:
        await self._store.close()

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str, *, max_per_tenant: int = 0
    ) -> tuple[SessionState, Change | None]:
        with self._timed("create_session"):
            return await self._store.create_session(
                session_id, info, max_sessions, origin, max_per_tenant=max_per_tenant
            )

    async def remove_session(self, session_id: str, reason: RemovalReason, origin: str = "") -> list[Change]:
        with self._timed("remove_session"):
            return await self._store.remove_session(session_id, reason, origin)

    async def remove_all_sessions(self, origin: str = "", only: SessionFilter = EVERY_SESSION) -> list[Change]:
        with self._timed("remove_all_sessions"):
            return await self._store.remove_all_sessions(origin, only)

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        with self._timed("list_sessions"):
            return await self._store.list_sessions(after_id, limit, only)

    async def get(self, session_id: str) -> SessionState | None:
        with self._timed("get"):
            return await self._store.get(session_id)

    async def session_count(self) -> int:
        with self._timed("session_count"):
            return await self._store.session_count()

    def held_bytes(self) -> tuple[int, int]:
        return self._store.held_bytes()

    def feed_position(self) -> int:
        return self._store.feed_position()

    async def write(self, operation: Write, context: WriteContext) -> Written:
        with self._timed("write"):
            return await self._store.write(operation, context)

    async def write_batch(self, batch: Batch, context: WriteContext) -> BatchWritten:
        with self._timed("write_batch"):
            return await self._store.write_batch(batch, context)

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        with self._timed("changes_after"):
            return await self._store.changes_after(session_id, revision)

    async def feed_after(self, cursor: int) -> list[Change] | None:
        with self._timed("feed_after"):
            return await self._store.feed_after(cursor)

    async def snapshot(self, tenant: str | None = None) -> tuple[int, list[SessionState]]:
        with self._timed("snapshot"):
            return await self._store.snapshot(tenant)

    async def expired(self, now: float) -> list[str]:
        with self._timed("expired"):
            return await self._store.expired(now)

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        self._store.on_external_change(listener)

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        self._store.on_availability_change(listener)

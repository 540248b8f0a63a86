"""Composition: build the store, the book and the gRPC server from settings.

``start_server`` is shared by ``__main__`` and the tests, so tests exercise exactly
what production runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import os
import socket
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import grpc
from google.protobuf import descriptor, descriptor_pool
from grpc_health.v1 import health, health_pb2
from grpc_reflection.v1alpha import reflection

from sessiontodo_server import fd_limits
from sessiontodo_server.api import request_guard
from sessiontodo_server.api.auth import ANONYMOUS_HEALTH_WATCHES, AuthFileError, AuthInterceptor
from sessiontodo_server.api.service_name import SERVICE_NAME
from sessiontodo_server.api.servicer import (
    TodoServicer,
    add_health_service,
    add_reflection_service,
    add_todo_service,
)
from sessiontodo_server.api.tls import ReloadableTls, TlsError, TlsFiles
from sessiontodo_server.domain.book import TodoBook
from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.domain.store import StoreStartupError, TodoStore
from sessiontodo_server.domain.streams import TodoStreams
from sessiontodo_server.domain.watch import WatchHub
from sessiontodo_server.observability.interceptor import ObservingInterceptor
from sessiontodo_server.observability.metrics import InstrumentedStore, Metrics, count_sessions, serve_metrics
from sessiontodo_server.settings import Settings
from sessiontodo_server.stores.by_url import open_store

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider  # the `tracing` extra
    from opentelemetry.trace import Tracer

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The server must not start with these settings; the message says why in one line."""


def _server_options(settings: Settings, max_connections: int) -> list[tuple[str, int]]:
    options = [
        ("grpc.so_reuseport", int(settings.reuse_port)),
        ("grpc.max_concurrent_streams", settings.max_streams_per_connection),
        ("grpc.max_allowed_incoming_connections", max_connections),
        ("grpc.max_receive_message_length", request_guard.GRPC_RECEIVE_LIMIT),
        ("grpc.server_handshake_timeout_ms", _ms(settings.request_timeout)),
        (
            "grpc.max_connection_idle_ms",
            _ms(settings.max_connection_idle) if settings.max_connection_idle else _FOREVER,
        ),
        # Ping quiet connections so dead peers (and their watches) are dropped; accept client
        # pings down to the minimum interval, also without calls, and GOAWAY clients pinging faster.
        ("grpc.keepalive_time_ms", _ms(settings.keepalive_time)),
        ("grpc.keepalive_timeout_ms", _ms(settings.keepalive_timeout)),
        ("grpc.http2.min_ping_interval_without_data_ms", _ms(settings.min_client_ping_interval)),
        ("grpc.http2.max_ping_strikes", 2),
        ("grpc.keepalive_permit_without_calls", 1),
        # HTTP/2 rapid reset (HEADERS then RST_STREAM in a loop, CVE-2023-44487): gRPC core's own
        # protections, set here on purpose. Fewer new streams are taken per read of a connection;
        # streams over the concurrency limit, counting reset ones not yet freed, are refused; and
        # resets are answered with a PING the client must acknowledge: a client that resets
        # without reading stalls its own connection (gRPC stops reading it), and one that never
        # acknowledges gets GOAWAY ENHANCE_YOUR_CALM when the ping times out. Core keeps no count
        # of resets, so a client that acknowledges is never closed (docs/operations.md).
        ("grpc.http2.max_requests_per_read", MAX_REQUESTS_PER_READ),
        ("grpc.http.overload_protection", 1),
        ("grpc.http2.ping_on_rst_stream_percent", 100),
        ("grpc.http2.ping_timeout_ms", _ms(settings.keepalive_timeout)),
    ]
    if settings.max_connection_age:
        options += [
            ("grpc.max_connection_age_ms", int(settings.max_connection_age * 1000)),
            ("grpc.max_connection_age_grace_ms", int(settings.shutdown_grace * 1000)),
        ]
    return options


MAX_REQUESTS_PER_READ = 16
"""New streams gRPC core accepts from one connection per read (its default is 32)."""

_FOREVER = 2**31 - 1  # INT_MAX: what gRPC core takes as "never"


def _ms(seconds: float) -> int:
    return min(int(seconds * 1000), _FOREVER)


class ListenError(Exception):
    """The server cannot listen on its address: taken (``in_use``), not an address of this host, or not permitted."""

    def __init__(self, message: str, *, in_use: bool = False) -> None:
        super().__init__(message)
        self.in_use = in_use


def _listen(server: grpc.aio.Server, settings: Settings, credentials: grpc.ServerCredentials | None) -> int:
    """Bind the port, failing with one clear sentence (gRPC's own error says only to turn on its debug logs)."""
    host = settings.host.strip("[]")
    address = f"[{host}]:{settings.port}" if ":" in host else f"{host}:{settings.port}"
    if settings.port and not settings.reuse_port:
        # Probe first, as gRPC binds (SO_REUSEADDR): a taken port fails here without gRPC's log noise.
        try:
            with socket.create_server((host, settings.port), family=socket.AF_INET6 if ":" in host else socket.AF_INET):
                pass
        except OSError as error:
            raise ListenError(
                f"cannot listen on {address}: {os.strerror(error.errno) if error.errno else error}",
                in_use=error.errno == errno.EADDRINUSE,
            ) from error
    try:
        port: int = (
            server.add_secure_port(address, credentials)
            if credentials is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError as error:
        raise ListenError(f"cannot listen on {address}") from error
    return port


class _ReflectionPool:
    """The default descriptor pool, able to find rpc methods by full name too.

    upb's pool cannot (grpc/grpc#34743), so without this ``grpcurl describe
    sessiontodo.v1.TodoService.AddTodo`` would answer "Symbol not found".
    """

    def __init__(self, pool: descriptor_pool.DescriptorPool) -> None:
        self._pool = pool

    def __getattr__(self, name: str) -> object:
        return getattr(self._pool, name)

    def FindFileContainingSymbol(self, symbol: str) -> descriptor.FileDescriptor:
        try:
            return self._pool.FindFileContainingSymbol(symbol)
        except KeyError:
            service, _, method = symbol.rpartition(".")
            if method not in self._pool.FindServiceByName(service).methods_by_name:  # KeyError if no such service
                raise
            return self._pool.FindFileContainingSymbol(service)


@dataclass(kw_only=True)
class RunningServer:
    server: grpc.aio.Server
    port: int
    book: TodoBook
    store: TodoStore
    health: health.aio.HealthServicer
    shutdown_grace: float
    expiry: asyncio.Task[None]
    descriptor_watch: asyncio.Task[None]
    deadlines: request_guard.Deadlines
    metrics: Metrics | None = None
    metrics_port: int | None = None
    telemetry: contextlib.AsyncExitStack = field(default_factory=contextlib.AsyncExitStack)
    """The metrics endpoint, the session counter and a tracer provider made here: closed after the server."""
    tls: ReloadableTls | None = None
    auth: AuthInterceptor | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def reload(self) -> None:
        """SIGHUP: re-read the TLS files and the auth file; open streams are untouched, and a
        broken file is logged while the previous one stays in force."""
        for part in (self.tls, self.auth):
            try:
                if part is not None:
                    part.reload()
            except (TlsError, AuthFileError) as error:
                log.error("%s; keeping the previous one", error)

    async def stop(self) -> None:
        """Health NOT_SERVING, watches end with UNAVAILABLE, then stop within the grace period."""
        await self.health.enter_graceful_shutdown()
        self.expiry.cancel()
        self.descriptor_watch.cancel()
        self.book.shut_down()
        await self.server.stop(self.shutdown_grace)
        await self.deadlines.aclose()
        await self.store.close()
        await self.telemetry.aclose()
        log.info("server stopped")


async def _set_health(health_servicer: health.aio.HealthServicer, serving: bool) -> None:
    status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
    for service in ("", SERVICE_NAME):
        await health_servicer.set(service, status)


@dataclass(frozen=True)
class _Security:
    tls: ReloadableTls | None
    auth: AuthInterceptor | None


def _security(settings: Settings) -> _Security:
    """TLS credentials and the auth interceptor, or the one-line reason to refuse starting."""
    if refusal := settings.refusal():
        raise StartupError(refusal)
    try:
        tls = None
        if settings.tls_cert is not None and settings.tls_key is not None:
            tls = ReloadableTls(TlsFiles(settings.tls_cert, settings.tls_key, settings.tls_client_ca))
        auth = None
        if settings.auth_file is not None:
            auth = AuthInterceptor(settings.auth_file, min(ANONYMOUS_HEALTH_WATCHES, settings.max_watchers))
    except (TlsError, AuthFileError) as error:
        raise StartupError(str(error)) from error
    return _Security(tls, auth)


async def start_server(
    settings: Settings, store: TodoStore | None = None, tracer_provider: TracerProvider | None = None
) -> RunningServer:
    """``tracer_provider`` turns tracing on with that provider (tests pass one with an in-memory exporter);
    otherwise ``settings.tracing`` turns it on with one configured by ``OTEL_*``. Raises ``StartupError``
    before touching the store when the settings must not serve."""
    security = _security(settings)
    telemetry = contextlib.AsyncExitStack()
    if tracer_provider is None and settings.tracing:
        from sessiontodo_server.observability.tracing import provider_from_environment

        tracer_provider = provider_from_environment()
        telemetry.callback(tracer_provider.shutdown)  # flushes the spans still batched
    metrics = Metrics() if settings.metrics_port is not None else None
    store = (
        store
        if store is not None
        else open_store(
            settings.store,
            settings.history_limit,
            feed_history=settings.feed_history,
            budget=settings.budget(),
            durability=settings.durability,
            redis_wait_replicas=settings.redis_wait_replicas,
        )
    )
    if metrics is not None or tracer_provider is not None:
        store = InstrumentedStore(store, metrics, _store_tracer(tracer_provider))
    try:
        await store.open()
    except Unavailable as error:  # Redis or etcd down: say which, the URL's password hidden
        await telemetry.aclose()
        raise StoreStartupError(
            f"the store at {settings.data_location()} is unreachable: start it, or point --store (SESSIONTODO_STORE) "
            "at one that runs"
        ) from error
    except BaseException:
        await telemetry.aclose()
        raise
    try:
        return await _serve(settings, store, metrics, tracer_provider, telemetry, security)
    except BaseException:
        await store.close()  # e.g. the port is taken: never leave the store open
        await telemetry.aclose()
        raise


def _store_tracer(provider: TracerProvider | None) -> Tracer | None:
    if provider is None:
        return None
    from sessiontodo_server.observability.tracing import store_tracer

    return store_tracer(provider)


def _interceptors(
    settings: Settings, metrics: Metrics | None, provider: TracerProvider | None, auth: AuthInterceptor | None
) -> list[grpc.aio.ServerInterceptor]:
    """Tracing outermost, so its span is current while the observing interceptor logs and records;
    authentication innermost, so refused calls are traced, logged and counted too."""
    checks: list[grpc.aio.ServerInterceptor] = [auth] if auth is not None else []
    if provider is not None:
        from sessiontodo_server.observability.tracing import record_status, server_interceptor

        observing = ObservingInterceptor(metrics, settings.log_requests, record_status)
        return [server_interceptor(provider, SERVICE_NAME), observing, *checks]
    if metrics is not None or settings.log_requests or settings.log_format == "json":
        return [ObservingInterceptor(metrics, settings.log_requests), *checks]
    return checks  # nothing to observe: every rpc skips the wrapping


async def _serve(
    settings: Settings,
    store: TodoStore,
    metrics: Metrics | None,
    tracer_provider: TracerProvider | None,
    telemetry: contextlib.AsyncExitStack,
    security: _Security,
) -> RunningServer:
    limits = settings.limits()
    hub = WatchHub(
        settings.watch_buffer,
        limits.max_watchers,
        settings.budget().buffers,
        limits.max_watchers_per_tenant,
        position=store.feed_position(),  # a restarted server's feeds go on from the store's cursor
    )
    book = TodoBook(store, hub, limits, default_idle_ttl=settings.default_idle_ttl, observer=metrics)
    streams = TodoStreams(book, store, hub, limits, progress_interval=settings.progress_interval, observer=metrics)

    file_descriptors = fd_limits.raise_soft_limit()
    max_connections = fd_limits.connection_limit(settings.max_connections, file_descriptors)
    server = grpc.aio.server(
        options=_server_options(settings, max_connections),
        interceptors=_interceptors(settings, metrics, tracer_provider, security.auth),
    )
    deadlines = request_guard.Deadlines(settings.request_timeout)
    add_todo_service(server, TodoServicer(book, streams), deadlines)
    health_servicer = health.aio.HealthServicer()
    add_health_service(server, health_servicer, deadlines)
    if settings.reflection:
        services = (SERVICE_NAME, health.SERVICE_NAME, reflection.SERVICE_NAME)
        add_reflection_service(server, services, _ReflectionPool(descriptor_pool.Default()))
    credentials = security.tls.credentials if security.tls is not None else None
    port = _listen(server, settings, credentials)
    metrics_port = None
    if metrics is not None and settings.metrics_port is not None:
        metrics.initialize(descriptor_pool.Default().FindServiceByName(SERVICE_NAME))
        metrics.observe_book(book)
        metrics.observe_budget(settings.budget(), book)
        stop_metrics, metrics_port = serve_metrics(metrics, settings.metrics_host, settings.metrics_port)
        telemetry.callback(stop_metrics)
        counter = asyncio.create_task(count_sessions(metrics, book))
        telemetry.push_async_callback(_cancelled, counter)
        log.info("metrics on http://%s:%d/metrics", settings.metrics_host, metrics_port)
    await server.start()
    # A store shared with other replicas reports whether it is reachable; health follows it.
    store.on_availability_change(functools.partial(_set_health, health_servicer))
    await _set_health(health_servicer, True)
    expiry = asyncio.create_task(book.run_expiry(settings.expiry_interval), name="expire idle sessions")
    watch = asyncio.create_task(fd_limits.watch(file_descriptors, max_connections), name="descriptor watch")
    log.info(
        "serving on %s:%d (%s, %s), data in %s; Ctrl-C to stop (at most %d connections of %d streams each)",
        settings.host,
        port,
        "plaintext" if security.tls is None else ("mutual TLS" if settings.tls_client_ca else "TLS"),
        "bearer tokens" if security.auth is not None else "no authentication",
        settings.data_location(),
        max_connections,
        settings.max_streams_per_connection,
    )
    return RunningServer(
        server=server,
        port=port,
        book=book,
        store=store,
        health=health_servicer,
        shutdown_grace=settings.shutdown_grace,
        expiry=expiry,
        descriptor_watch=watch,
        deadlines=deadlines,
        metrics=metrics,
        metrics_port=metrics_port,
        telemetry=telemetry,
        tls=security.tls,
        auth=security.auth,
    )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task

"""Prometheus metrics of the sidecar (``--metrics``): HTTP requests by route and status, their latency,
and the number of connected ``/event`` (SSE) clients, served at ``GET /metrics``.

An ASGI middleware, so the routes stay free of metrics. Routes are labelled by their template
(``/session/{session_id}/todo``), never by the raw path, so session ids cannot explode the
number of series; an event stream's lifetime is not a latency and is left out of the histogram.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class SidecarMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "sessiontodo_opencode_http_requests_total",
            "HTTP requests answered, by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.seconds = Histogram(
            "sessiontodo_opencode_http_request_seconds",
            "Time to answer an HTTP request (event streams excluded), by method and route template.",
            ["method", "route"],
            buckets=_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.sse_clients = Gauge(
            "sessiontodo_opencode_sse_clients", "Connected /event (SSE) clients.", registry=self.registry
        )

    def route(self) -> Route:
        return Route("/metrics", self._exposition, methods=["GET"])

    async def _exposition(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


class MetricsMiddleware:
    """Counts and times every HTTP request of ``app`` into ``metrics``."""

    def __init__(self, app: ASGIApp, metrics: SidecarMetrics, routes: Sequence[BaseRoute]) -> None:
        self._app = app
        self._metrics = metrics
        self._routes = routes

    def _template(self, scope: Scope) -> str:
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL and isinstance(route, Route):
                return route.path
        return "other"  # unknown paths and wrong methods: one series, however many are tried

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        method, route = scope["method"], self._template(scope)
        start = time.perf_counter()
        status = 500  # what the client gets if the app fails before answering
        streaming = False

        async def observed_send(message: Message) -> None:
            nonlocal status, streaming
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = dict(message.get("headers", ()))
                streaming = headers.get(b"content-type", b"").startswith(b"text/event-stream")
                if streaming:
                    self._metrics.sse_clients.inc()
            await send(message)

        try:
            await self._app(scope, receive, observed_send)
        finally:
            if streaming:
                self._metrics.sse_clients.dec()
            else:
                self._metrics.seconds.labels(method, route).observe(time.perf_counter() - start)
            self._metrics.requests.labels(method, route, str(status)).inc()

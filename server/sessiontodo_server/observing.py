"""The grpc.aio server interceptor through which every rpc is counted, timed and logged.

It wraps each method's behaviour once (and reuses the wrapper), so the servicer stays free of
metrics and logging. Per call it sets the log context (method, session id), and when finished
records go-grpc-prometheus's metrics and, with ``--log-requests``, one line with the final
status code and the latency.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from sessiontodo_server.logs import REQUEST_LOGGER, RpcContext, current_rpc
from sessiontodo_server.metrics import Metrics, code_name, grpc_type, status_code

request_log = logging.getLogger(REQUEST_LOGGER)


StatusHook = Callable[[grpc.StatusCode], None]
"""Told each rpc's final status code inside the rpc's context (tracing puts it on the span)."""


class ObservingInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, metrics: Metrics | None, log_requests: bool, on_status: StatusHook | None = None) -> None:
        self._metrics = metrics
        self._log_requests = log_requests
        self._on_status = on_status
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method: str = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(method, handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, _, name = method.lstrip("/").rpartition("/")
        labels = (grpc_type(handler.request_streaming, handler.response_streaming), service, name)
        observed = _Observed(method, labels, self._metrics, self._log_requests, self._on_status)
        serializers = (handler.request_deserializer, handler.response_serializer)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(observed.unary(handler.unary_unary), *serializers)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(observed.streaming(handler.unary_stream), *serializers)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(observed.unary(handler.stream_unary), *serializers)
        return grpc.stream_stream_rpc_method_handler(observed.streaming(handler.stream_stream), *serializers)


class _Observed:
    """One method's wrappers: started, handled with its final code, handling time, messages, the log line."""

    def __init__(
        self,
        method: str,
        labels: tuple[str, str, str],
        metrics: Metrics | None,
        log_requests: bool,
        on_status: StatusHook | None,
    ) -> None:
        self._method = method
        self._on_status = on_status
        self._metrics = metrics
        self._log_requests = log_requests
        self._streaming_requests = labels[0] in ("client_stream", "bidi_stream")
        if self._metrics is not None:
            self._started = self._metrics.started.labels(*labels)
            self._handling = self._metrics.handling_seconds.labels(*labels)
            self._received = self._metrics.msg_received.labels(*labels)
            self._sent = self._metrics.msg_sent.labels(*labels)
            self._handled = lambda code: self._metrics.handled.labels(*labels, code)  # type: ignore[union-attr]

    def _prepare(self, request: Any) -> Any:
        """Sets the log context; counts a unary request, or each message of a request stream."""
        session_id = None if self._streaming_requests else getattr(request, "session_id", None)
        current_rpc.set(RpcContext(self._method, session_id))
        if self._metrics is None:
            return request
        if not self._streaming_requests:
            self._received.inc()
            return request

        async def counted() -> AsyncIterator[Any]:
            async for message in request:
                self._received.inc()
                yield message

        return counted()

    @contextmanager
    def _call(self, context: grpc.aio.ServicerContext) -> Iterator[None]:
        if self._metrics is not None:
            self._started.inc()
        start = time.perf_counter()
        code: grpc.StatusCode | int | None = grpc.StatusCode.UNKNOWN
        try:
            yield
            code = context.code()
        except asyncio.CancelledError:
            code = grpc.StatusCode.CANCELLED
            raise
        except grpc.aio.AbortError:
            code = context.code()
            raise
        finally:
            seconds = time.perf_counter() - start
            final = status_code(code)
            name = code_name(final)
            if self._on_status is not None:
                self._on_status(final)
            if self._metrics is not None:
                self._handled(name).inc()
                self._handling.observe(seconds)
            if self._log_requests:
                request_log.info(
                    "%s %s", self._method, name, extra={"code": name, "latency_ms": round(seconds * 1000, 3)}
                )

    def _sent_one(self) -> None:
        if self._metrics is not None:
            self._sent.inc()

    def unary(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            request = self._prepare(request)
            with self._call(context):
                response = await behaviour(request, context)
            self._sent_one()
            return response

        return observed

    def streaming(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behaviour):  # writes with context.write (e.g. health's Watch)

            async def observed_writer(request: Any, context: grpc.aio.ServicerContext) -> None:
                request = self._prepare(request)
                with self._call(context):
                    await behaviour(request, context)

            return observed_writer

        async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            request = self._prepare(request)
            with self._call(context):
                async for response in behaviour(request, context):
                    yield response
                    self._sent_one()

        return observed

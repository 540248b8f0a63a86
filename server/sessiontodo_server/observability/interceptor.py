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
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import descriptor_pool

from sessiontodo_server.observability.logs import REQUEST_LOGGER, RpcContext, current_rpc
from sessiontodo_server.observability.metrics import Metrics, code_name, grpc_type, status_code

request_log = logging.getLogger(REQUEST_LOGGER)


StatusHook = Callable[[grpc.StatusCode], None]
"""Told each rpc's final status code inside the rpc's context (tracing puts it on the span)."""

_MOST_WRAPPED = 4096
"""Wrapped handlers kept for reuse: far more than methods x tenants, and a bound under a flood of refusals."""


class ObservingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc ships no types
    def __init__(self, metrics: Metrics | None, log_requests: bool, on_status: StatusHook | None = None) -> None:
        self._metrics = metrics
        self._log_requests = log_requests
        self._on_status = on_status
        self._wrapped: dict[grpc.RpcMethodHandler, grpc.RpcMethodHandler] = {}
        """Each handler the continuation gives (one per method, or per method and tenant), wrapped once;
        emptied when it reaches ``_MOST_WRAPPED`` (refusals are a new handler each time)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        wrapped = self._wrapped.get(handler)
        if wrapped is None:
            if len(self._wrapped) >= _MOST_WRAPPED:
                self._wrapped.clear()
            wrapped = self._wrapped[handler] = self._wrap(handler_call_details.method, handler)
        return wrapped

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        service, _, name = method.lstrip("/").rpartition("/")
        labels = (_declared_type(service, name, handler), service, name)
        observed = _Observed(method, labels, self._metrics, self._log_requests, self._on_status)
        serializers = (handler.request_deserializer, handler.response_serializer)
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(observed.unary(handler.unary_unary), *serializers)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(observed.streaming(handler.unary_stream), *serializers)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(observed.unary(handler.stream_unary), *serializers)
        return grpc.stream_stream_rpc_method_handler(observed.streaming(handler.stream_stream), *serializers)


def _declared_type(service: str, name: str, handler: grpc.RpcMethodHandler) -> str:
    """The rpc's type as its proto declares it: TodoService's unary rpcs are registered as
    client-streaming (``wire`` reads the request itself), yet are ``unary`` to a dashboard."""
    try:
        method = descriptor_pool.Default().FindMethodByName(f"{service}.{name}")
    except KeyError:
        return grpc_type(handler.request_streaming, handler.response_streaming)
    return grpc_type(method.client_streaming, method.server_streaming)


class _Observed:
    """One method's wrappers: started, handled with its final code, handling time, messages sent, the log line.

    Per call this is on every rpc's path when anything observes: the wrappers begin and end the
    call with plain try/except (no context manager object per call), and the handled counter's
    child per code is looked up in prometheus once, then kept here."""

    def __init__(
        self,
        method: str,
        labels: tuple[str, str, str],
        metrics: Metrics | None,
        log_requests: bool,
        on_status: StatusHook | None,
    ) -> None:
        self._method = method
        self._labels = labels
        self._on_status = on_status
        self._metrics = metrics
        self._log_requests = log_requests
        self._handled: dict[str, Any] = {}
        """``metrics.handled``'s child for each final code seen (its labels, resolved once)."""
        if metrics is not None:
            self._started = metrics.started.labels(*labels)
            self._handling = metrics.handling_seconds.labels(*labels)
            self._sent = metrics.msg_sent.labels(*labels)

    def _begin(self, request: Any) -> float:
        """Sets the log context (the session id is known here for a parsed request, else once
        ``wire`` has parsed it: ``logs.note_request``) and counts the call as started."""
        current_rpc.set(RpcContext(self._method, getattr(request, "session_id", None)))
        if self._metrics is not None:
            self._started.inc()
        return _clock()

    def _end(self, start: float, code: grpc.StatusCode | int | None) -> None:
        seconds = _clock() - start
        final = status_code(code)
        name = code_name(final)
        if self._on_status is not None:
            self._on_status(final)
        if self._metrics is not None:
            handled = self._handled.get(name)
            if handled is None:
                handled = self._handled[name] = self._metrics.handled.labels(*self._labels, name)
            handled.inc()
            self._handling.observe(seconds)
        if self._log_requests:
            request_log.info("%s %s", self._method, name, extra={"code": name, "latency_ms": round(seconds * 1000, 3)})

    def _sent_one(self) -> None:
        if self._metrics is not None:
            self._sent.inc()

    def unary(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        async def observed(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = self._begin(request)
            try:
                response = await behaviour(request, context)
            except BaseException as error:
                self._end(start, _final_code(error, context))
                raise
            self._end(start, context.code())
            self._sent_one()
            return response

        return observed

    def streaming(self, behaviour: Callable[..., Any]) -> Callable[..., Any]:
        if not inspect.isasyncgenfunction(behaviour):  # writes with context.write (e.g. health's Watch)

            async def observed_writer(request: Any, context: grpc.aio.ServicerContext) -> None:
                start = self._begin(request)
                try:
                    await behaviour(request, context)
                except BaseException as error:
                    self._end(start, _final_code(error, context))
                    raise
                self._end(start, context.code())

            return observed_writer

        async def observed(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            start = self._begin(request)
            try:
                async for response in behaviour(request, context):
                    yield response
                    self._sent_one()
            except BaseException as error:
                self._end(start, _final_code(error, context))
                raise
            self._end(start, context.code())

        return observed


_clock = time.perf_counter


def _final_code(error: BaseException, context: grpc.aio.ServicerContext) -> grpc.StatusCode | int | None:
    """The code of a call its behaviour ended by raising ``error``: an abort's, CANCELLED, or UNKNOWN."""
    if isinstance(error, grpc.aio.AbortError):
        return context.code()
    if isinstance(error, asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN

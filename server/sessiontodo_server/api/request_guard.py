"""Guards between HTTP/2 and the servicer: the request message must arrive in time, fit and parse.

grpc.aio reads a unary request before it calls the handler, with no time limit (a client that
opens a call and never sends its message holds it forever) and turns a malformed message into
UNKNOWN plus a logged traceback. So every rpc is registered as client-streaming here: the guard
reads the one message itself under ``timeout`` (DEADLINE_EXCEEDED when it does not come),
parses it (INVALID_ARGUMENT and one warning line when it does not parse), then calls the
servicer method exactly as a unary handler would. The wire format is the same. A message over
``MAX_REQUEST_BYTES`` is refused here too, with the details of every other limit: gRPC core's own
refusal (past ``GRPC_RECEIVE_LIMIT``) carries none.

The deadline is kept by one sweeping task per server rather than a timer per call: a timer per
call (``asyncio.timeout``) cost about 7% of unary throughput.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, NoReturn, cast

import grpc
from google.protobuf.message import DecodeError, Message

from sessiontodo_server.domain import errors
from sessiontodo_server.observability.logs import note_request

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = 10.0
"""Seconds a call may take to deliver its request message (``--request-timeout``)."""

MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The largest request message: gRPC's usual 4 MiB; more is RESOURCE_EXHAUSTED with a QuotaFailure."""

GRPC_RECEIVE_LIMIT = 2 * MAX_REQUEST_BYTES
"""gRPC core's receive limit: a message up to it is read and refused here with details, a larger one
is refused by core from its length alone, before it is read (as etcd leaves its gRPC limit above
``--max-request-bytes``), so one call never holds more than this."""

Reject = Callable[[grpc.aio.ServicerContext, errors.TodoError], Awaitable[NoReturn]]
"""Ends the call with the error's status (the transport's one way of doing so)."""


class Deadlines:
    """Calls still waiting for their request message; those waiting longer than ``timeout`` are
    cancelled by a sweeping task that runs only while some call is waiting."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._waiting: dict[asyncio.Task[Any], float] = {}
        self._overdue: set[asyncio.Task[Any]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def enter(self) -> asyncio.Task[Any]:
        task = asyncio.current_task()
        assert task is not None
        loop = task.get_loop()
        self._waiting[task] = loop.time()
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = loop.create_task(self._sweep(), name="request message deadlines")
        return task

    def leave(self, task: asyncio.Task[Any]) -> None:
        self._waiting.pop(task, None)

    async def aclose(self) -> None:
        """Stop the sweeper (with the server): a sweeper left sleeping is destroyed pending with its loop."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            await asyncio.gather(self._sweeper, return_exceptions=True)

    def overdue(self, task: asyncio.Task[Any]) -> bool:
        """Whether the sweeper cancelled ``task`` (then the cancellation is taken back)."""
        if task not in self._overdue:
            return False
        self._overdue.discard(task)
        task.uncancel()
        return True

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(min(1.0, self.timeout / 2))
            cutoff = loop.time() - self.timeout
            for task in [task for task, started in self._waiting.items() if started <= cutoff]:
                del self._waiting[task]
                self._overdue.add(task)
                task.cancel()


async def _receive(
    method: str, parse: Callable[[bytes], Message], deadlines: Deadlines, context: grpc.aio.ServicerContext
) -> Any:
    """The request, parsed; raises InvalidArgument when it is missing or malformed, LimitExceeded when too large."""
    task = deadlines.enter()
    try:
        raw = await context.read()
    except asyncio.CancelledError:
        if not deadlines.overdue(task):
            raise  # the client went away
        log.warning("%s from %s: no request message within %gs; call ended", method, context.peer(), deadlines.timeout)
        await context.abort(
            grpc.StatusCode.DEADLINE_EXCEEDED, f"the request message did not arrive within {deadlines.timeout:g}s"
        )
    finally:
        deadlines.leave(task)
    if raw is grpc.aio.EOF:
        raise errors.InvalidArgument([("request", "no request message was sent")])
    if len(raw) > MAX_REQUEST_BYTES:
        log.warning("%s from %s: a request message of %d bytes refused", method, context.peer(), len(raw))
        raise errors.LimitExceeded("request bytes", MAX_REQUEST_BYTES)
    try:
        request = parse(raw)
    except DecodeError as error:
        log.warning("%s from %s: malformed request message (%s)", method, context.peer(), error)
        raise errors.InvalidArgument([("request", f"not a valid protobuf message: {error}")]) from None
    note_request(request)
    return request


def unary_handler(
    method: str,
    behaviour: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]],
    parse: Callable[[bytes], Message],
    serialize: Callable[[Any], bytes],
    deadlines: Deadlines,
    reject: Reject,
) -> grpc.RpcMethodHandler:
    async def guarded(requests: object, context: grpc.aio.ServicerContext) -> Any:
        try:
            request = await _receive(method, parse, deadlines, context)
        except (errors.InvalidArgument, errors.LimitExceeded) as error:
            await reject(context, error)
        return await behaviour(request, context)

    return grpc.stream_unary_rpc_method_handler(guarded, response_serializer=serialize)


def server_streaming_handler(
    method: str,
    behaviour: Callable[[Any, grpc.aio.ServicerContext], AsyncGenerator[Any, None] | Awaitable[None]],
    parse: Callable[[bytes], Message],
    serialize: Callable[[Any], bytes] | None,
    deadlines: Deadlines,
    reject: Reject,
) -> grpc.RpcMethodHandler:
    """The servicer yields the stream's items (bytes already encoded when ``serialize`` is None),
    or writes them with ``context.write`` (grpc_health's Watch)."""
    if not inspect.isasyncgenfunction(behaviour):

        async def guarded_writer(requests: object, context: grpc.aio.ServicerContext) -> None:
            try:
                request = await _receive(method, parse, deadlines, context)
            except (errors.InvalidArgument, errors.LimitExceeded) as error:
                await reject(context, error)
            await cast(Awaitable[None], behaviour(request, context))

        return grpc.stream_stream_rpc_method_handler(guarded_writer, response_serializer=serialize)

    async def guarded(requests: object, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            request = await _receive(method, parse, deadlines, context)
        except (errors.InvalidArgument, errors.LimitExceeded) as error:
            await reject(context, error)
        stream = cast(AsyncGenerator[Any, None], behaviour(request, context))
        async with aclosing(stream):  # a cancel ends the servicer's stream at once
            async for item in stream:
                yield item

    return grpc.stream_stream_rpc_method_handler(guarded, response_serializer=serialize)

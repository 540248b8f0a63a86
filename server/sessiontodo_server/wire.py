"""Guards between HTTP/2 and the servicer: the request message must arrive in time and parse.

grpc.aio reads a unary request before it calls the handler, with no time limit (a client that
opens a call and never sends its message holds it forever) and turns a malformed message into
UNKNOWN plus a logged traceback. So every rpc is registered as client-streaming here: the guard
reads the one message itself under ``timeout`` (DEADLINE_EXCEEDED when it does not come),
parses it (INVALID_ARGUMENT and one warning line when it does not parse), then calls the
servicer method exactly as a unary handler would. The wire format is the same.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from typing import Any, NoReturn

import grpc
from google.protobuf.message import DecodeError, Message

from sessiontodo_server import errors

log = logging.getLogger(__name__)

DEFAULT_REQUEST_TIMEOUT = 10.0
"""Seconds a call may take to deliver its request message (``--request-timeout``)."""

Reject = Callable[[grpc.aio.ServicerContext, errors.TodoError], Awaitable[NoReturn]]
"""Ends the call with the error's status (the transport's one way of doing so)."""


async def _receive(
    method: str, parse: Callable[[bytes], Message], timeout: float, context: grpc.aio.ServicerContext
) -> Any:
    """The request, parsed; raises InvalidArgument when it is missing or malformed."""
    try:
        async with asyncio.timeout(timeout):
            raw = await context.read()
    except TimeoutError:
        log.warning("%s from %s: no request message within %gs; call ended", method, context.peer(), timeout)
        await context.abort(
            grpc.StatusCode.DEADLINE_EXCEEDED, f"the request message did not arrive within {timeout:g}s"
        )
    if raw is grpc.aio.EOF:
        raise errors.InvalidArgument([("request", "no request message was sent")])
    try:
        return parse(raw)
    except DecodeError as error:
        log.warning("%s from %s: malformed request message (%s)", method, context.peer(), error)
        raise errors.InvalidArgument([("request", f"not a valid protobuf message: {error}")]) from None


def unary_handler(
    method: str,
    behaviour: Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]],
    parse: Callable[[bytes], Message],
    serialize: Callable[[Any], bytes],
    timeout: float,
    reject: Reject,
) -> grpc.RpcMethodHandler:
    async def guarded(requests: object, context: grpc.aio.ServicerContext) -> Any:
        try:
            request = await _receive(method, parse, timeout, context)
        except errors.InvalidArgument as error:
            await reject(context, error)
        return await behaviour(request, context)

    return grpc.stream_unary_rpc_method_handler(guarded, response_serializer=serialize)


def server_streaming_handler(
    method: str,
    behaviour: Callable[[Any, grpc.aio.ServicerContext], AsyncGenerator[Any, None]],
    parse: Callable[[bytes], Message],
    timeout: float,
    reject: Reject,
) -> grpc.RpcMethodHandler:
    """The stream's items go out as they come (the servicer yields bytes already encoded)."""

    async def guarded(requests: object, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        try:
            request = await _receive(method, parse, timeout, context)
        except errors.InvalidArgument as error:
            await reject(context, error)
        async with aclosing(behaviour(request, context)) as stream:  # a cancel ends the servicer's stream at once
            async for item in stream:
                yield item

    return grpc.stream_stream_rpc_method_handler(guarded)

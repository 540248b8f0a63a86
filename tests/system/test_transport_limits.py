"""Bad wire input and HTTP/2 limits: nothing a client sends holds the server's resources unbounded."""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_server import fd_limits
from sessiontodo_server.api.request_guard import GRPC_RECEIVE_LIMIT, MAX_REQUEST_BYTES
from sessiontodo_server.app import RunningServer
from tests.support import eventually

SERVICE = "/sessiontodo.v1.TodoService/"
GLOBAL = "sessiontodo:global"
"""The global list (its id is reserved)."""


def raw_call(channel: grpc.aio.Channel, method: str) -> Any:
    """A unary call sending bytes exactly as given."""
    return channel.unary_unary(SERVICE + method, request_serializer=None, response_deserializer=None)


def own_connection(address: str) -> grpc.aio.Channel:
    """A channel with its own connection (channels in one process share them by default)."""
    return grpc.aio.insecure_channel(address, options=[("grpc.use_local_subchannel_pool", 1)])


async def test_a_stopped_server_leaves_no_request_deadline_sweeper_behind(start: Callable[..., Any]) -> None:
    server = await start()
    async with own_connection(server.address) as channel:
        await pb_grpc.TodoServiceStub(channel).CreateSession(pb.CreateSessionRequest(session_id="s"))

    await server.stop()

    assert [task for task in asyncio.all_tasks() if task.get_name() == "request message deadlines"] == []


async def test_a_malformed_message_is_invalid_argument_with_one_warning_line(
    server: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with grpc.aio.insecure_channel(server.address) as channel:
        for method in ("CreateSession", "RemoveAllSessions", "ReplaceTodos"):
            caplog.clear()
            with pytest.raises(grpc.aio.AioRpcError) as raised:
                await raw_call(channel, method)(b"\x0a\xff\xff\xff")
            assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT, method
            assert "not a valid protobuf message" in (raised.value.details() or "")
            problems = [r for r in caplog.records if r.levelno >= logging.WARNING]
            assert len(problems) == 1
            assert "malformed request message" in problems[0].getMessage()
            assert problems[0].exc_info is None
        sessions = await pb_grpc.TodoServiceStub(channel).ListSessions(pb.ListSessionsRequest())
        assert list(sessions.sessions) == []


@pytest.mark.parametrize("size", [MAX_REQUEST_BYTES + 64, GRPC_RECEIVE_LIMIT - 64])
async def test_a_request_over_4_mib_is_resource_exhausted_with_quota_failure_and_error_info(
    server: RunningServer, size: int
) -> None:
    """gRPC core's own refusal would carry no details: the guard refuses it, like every other limit."""
    padding = "x" * (size - 40)
    request = pb.ReplaceTodosRequest(session_id="s", todos=[pb.Todo(content=padding)])
    assert MAX_REQUEST_BYTES < request.ByteSize() <= GRPC_RECEIVE_LIMIT
    options = [("grpc.max_send_message_length", -1)]
    async with grpc.aio.insecure_channel(server.address, options=options) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.CreateSession(pb.CreateSessionRequest(session_id="s"))
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stub.ReplaceTodos(request)
        unchanged = await stub.GetTodos(pb.GetTodosRequest(session_id="s"))
    status = rpc_status.from_call(raised.value)
    assert raised.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert status is not None, "no google.rpc.Status in the trailers"
    quota, info = error_details_pb2.QuotaFailure(), error_details_pb2.ErrorInfo()
    assert [detail.Unpack(quota) or detail.Unpack(info) for detail in status.details] == [True, True]
    assert [violation.subject for violation in quota.violations] == ["request bytes"]
    assert (info.reason, info.metadata["limit"]) == ("LIMIT_EXCEEDED", "request bytes")
    assert unchanged.revision == 0


async def test_a_malformed_watch_request_is_invalid_argument(server: RunningServer) -> None:
    async with grpc.aio.insecure_channel(server.address) as channel:
        call = channel.unary_stream(SERVICE + "WatchTodos", request_serializer=None, response_deserializer=None)
        stream = call(b"\x12\xff")
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await stream.read()
        assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "method",
    [SERVICE + "GetTodos", SERVICE + "WatchTodos", "/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"],
)
async def test_a_call_whose_message_never_arrives_is_ended(start: Callable[..., Any], method: str) -> None:
    server: RunningServer = await start(request_timeout=0.5)
    never = asyncio.Event()

    async def nothing() -> AsyncIterator[bytes]:
        await never.wait()
        yield b""

    async with grpc.aio.insecure_channel(server.address) as channel:
        call = channel.stream_stream(method, request_serializer=None, response_deserializer=None)(nothing())
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await asyncio.wait_for(call.read(), 30)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "request message did not arrive" in (raised.value.details() or "")


async def test_connections_beyond_the_limit_are_refused_and_idle_ones_are_closed(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(max_connections=2, max_connection_idle=1)
    request = pb.GetTodosRequest(session_id=GLOBAL)
    channels = [own_connection(server.address) for _ in range(3)]
    try:
        for channel in channels[:2]:
            await pb_grpc.TodoServiceStub(channel).GetTodos(request, timeout=10)
        with pytest.raises(grpc.aio.AioRpcError) as raised:
            await pb_grpc.TodoServiceStub(channels[2]).GetTodos(request, timeout=2)
        assert raised.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
        # The idle ones are closed by the server, which makes room again.
        await eventually(lambda: channels[0].get_state() == grpc.ChannelConnectivity.IDLE, timeout=30)
        async with own_connection(server.address) as later:
            await pb_grpc.TodoServiceStub(later).GetTodos(request, timeout=10)
    finally:
        for channel in channels:
            await channel.close()


async def test_streams_beyond_the_per_connection_limit_wait_for_a_free_one(start: Callable[..., Any]) -> None:
    server: RunningServer = await start(max_streams_per_connection=2)
    async with grpc.aio.insecure_channel(server.address) as channel:
        stub = pb_grpc.TodoServiceStub(channel)
        await stub.GetTodos(pb.GetTodosRequest(session_id=GLOBAL))  # the client has the server's SETTINGS now
        watches = [stub.WatchTodos(pb.WatchTodosRequest(session_id=GLOBAL)) for _ in range(2)]
        try:
            for watch in watches:
                assert (await asyncio.wait_for(watch.read(), 10)).kind == pb.CHANGE_KIND_SNAPSHOT
            watches.append(stub.WatchTodos(pb.WatchTodosRequest(session_id=GLOBAL)))
            third = asyncio.ensure_future(watches[2].read())
            done, _ = await asyncio.wait([third], timeout=1)
            assert not done, "a third stream was opened on a connection limited to two"
            watches[0].cancel()
            assert (await asyncio.wait_for(third, 10)).kind == pb.CHANGE_KIND_SNAPSHOT
        finally:
            for watch in watches:
                watch.cancel()


async def test_a_warning_is_logged_before_descriptors_run_out(caplog: pytest.LogCaptureFixture) -> None:
    used = fd_limits.in_use()
    assert used is not None
    watcher = asyncio.create_task(fd_limits.watch(descriptors=used + 2, connections=1000, interval=0.01))
    try:
        await eventually(lambda: any("file descriptors in use" in r.getMessage() for r in caplog.records))
    finally:
        watcher.cancel()
    assert sum("file descriptors in use" in r.getMessage() for r in caplog.records) == 1  # once per crossing


def test_the_connection_limit_leaves_a_reserve_of_descriptors() -> None:
    assert fd_limits.connection_limit(0, 1024) == 1024 - fd_limits.RESERVE
    assert fd_limits.connection_limit(50, 1024) == 50


@pytest.mark.process
async def test_a_json_request_changes_nothing(server: RunningServer) -> None:
    """gRPC core accepts any content type (grpc/grpc#35824) and hands Python an empty message, so
    the refusal is the empty message's: INVALID_ARGUMENT, never a session created (main did)."""
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    process = await asyncio.create_subprocess_exec(
        curl, "-s", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/null", "-X", "POST",
        "-H", "content-type: application/json", "-H", "te: trailers", "--data-binary", '{"session_id": "x"}',
        f"http://{server.address}{SERVICE}CreateSession",
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    headers, _ = await asyncio.wait_for(process.communicate(), 30)
    assert b"grpc-status: 3" in headers  # INVALID_ARGUMENT
    async with grpc.aio.insecure_channel(server.address) as channel:
        sessions = await pb_grpc.TodoServiceStub(channel).ListSessions(pb.ListSessionsRequest())
    assert list(sessions.sessions) == []

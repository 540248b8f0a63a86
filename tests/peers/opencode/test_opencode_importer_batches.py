"""The importer's resync in BatchWrite calls, against a real server: OpenCode is in memory
(``httpx.MockTransport``), the rpcs are counted by the server's own metrics.

The real OpenCode drives a batched resync in tests/peers/opencode_real/test_opencode_mirror.py; the
chunking and the fallback's every branch are in tests/unit/test_opencode_batches.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import grpc
import pytest

from sessiontodo_client import Todo, TodoClient
from sessiontodo_server.app import RunningServer
from tests.peers.opencode.fake_opencode import CONNECTED, FakeOpenCode, holds, importing
from tests.peers.opencode.opencode_support import todos
from tests.support import eventually, write_calls

BOUND = 30.0
SESSIONS = 150


def full_opencode(sessions: int = SESSIONS) -> FakeOpenCode:
    opencode = FakeOpenCode()
    for n in range(sessions):
        opencode.lists[f"ses_{n:03d}"] = todos(f"{n}: read", f"{n}: fix", f"{n}: ship")
    return opencode


async def lists_of(client: TodoClient, session_ids: list[str]) -> dict[str, list[str]]:
    found, _ = await client.batch_get_todos(session_ids)
    return {entry.session.session_id: [todo.content for todo in entry.todos] for entry in found}


def expected_lists(opencode: FakeOpenCode) -> dict[str, list[str]]:
    return {session_id: [todo["content"] for todo in listed] for session_id, listed in opencode.lists.items()}


@pytest.fixture(autouse=True)
def mirror_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The mirror's INFO lines (``resynced …`` ends each resync) in ``caplog``."""
    caplog.set_level(logging.INFO, logger="sessiontodo_opencode")


@pytest.fixture
async def counted(start: Callable[..., Any]) -> RunningServer:
    server: RunningServer = await start(metrics_port=0)
    return server


async def test_a_resync_writes_every_session_with_its_list_in_one_batch(counted: RunningServer) -> None:
    opencode = full_opencode()
    async with TodoClient.connect(counted.address) as client, importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        await eventually(holds(client, "ses_149", "149: read", "149: fix", "149: ship"), timeout=BOUND)

        assert await lists_of(client, list(opencode.lists)) == expected_lists(opencode)
    assert write_calls(counted) == {"BatchWrite": 1}


async def test_a_resync_with_nothing_changed_writes_nothing(
    counted: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = full_opencode()
    async with TodoClient.connect(counted.address) as client, importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        await eventually(lambda: "resynced" in caplog.text, timeout=BOUND)
        await eventually(lambda: importer.held_revision("ses_149") is not None, timeout=BOUND)  # the feed caught up

        opencode.reconnect()
        await eventually(lambda: caplog.text.count("resynced") == 2, timeout=BOUND)

    assert write_calls(counted) == {"BatchWrite": 1}


async def test_sessions_gone_upstream_are_removed_and_changed_lists_written_in_one_batch(
    counted: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = full_opencode(4)
    async with TodoClient.connect(counted.address) as client, importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        await eventually(lambda: "resynced" in caplog.text, timeout=BOUND)

        del opencode.lists["ses_000"], opencode.lists["ses_001"]
        opencode.lists["ses_002"] = todos("changed while the mirror was away")
        opencode.reconnect()
        await eventually(lambda: caplog.text.count("resynced") == 2, timeout=BOUND)

        assert await lists_of(client, ["ses_000", "ses_001", "ses_002", "ses_003"]) == {
            "ses_002": ["changed while the mirror was away"],
            "ses_003": ["3: read", "3: fix", "3: ship"],
        }
    assert write_calls(counted) == {"BatchWrite": 2}


async def test_a_session_whose_parent_sessiontodo_lacks_is_a_root_and_the_rest_of_its_batch_is_written(
    counted: RunningServer, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = full_opencode(6)
    opencode.parents["ses_003"] = "ses_not_listed"  # OpenCode lists a child of a session it does not list
    async with TodoClient.connect(counted.address) as client, importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        await eventually(lambda: "resynced" in caplog.text, timeout=BOUND)

        assert await lists_of(client, list(opencode.lists)) == expected_lists(opencode)
        assert (await client.get_session("ses_003")).parent_id == ""
    assert "sessions by single calls: 1)" in caplog.text


async def test_a_list_sessiontodo_refuses_is_skipped_and_the_rest_of_its_batch_is_written(
    start: Callable[..., Any], caplog: pytest.LogCaptureFixture
) -> None:
    server: RunningServer = await start(max_todos_per_session=3)
    opencode = full_opencode(5)
    opencode.lists["ses_002"] = todos("one", "two", "three", "four")  # one more than the server takes
    async with TodoClient.connect(server.address) as client, importing(client, opencode) as importer:
        opencode.frames.put_nowait(CONNECTED)
        await eventually(lambda: "resynced" in caplog.text, timeout=BOUND)

        assert await lists_of(client, list(opencode.lists)) == expected_lists(opencode) | {"ses_002": []}
    assert importer.skipped == 1


async def test_a_session_sessiontodo_held_without_the_servers_label_is_labelled_and_gets_its_list(
    client: TodoClient, caplog: pytest.LogCaptureFixture
) -> None:
    opencode = full_opencode(3)
    opencode.lists["ses_001"] = []  # the batch assumes a session it creates is empty: here it is not
    await client.create_session("ses_001", origin="elsewhere")
    await client.replace_todos("ses_001", [Todo(content="written elsewhere")], origin="elsewhere")
    async with importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        await eventually(lambda: "resynced" in caplog.text, timeout=BOUND)

    assert (await client.get_session("ses_001")).labels.get("opencode.server") == "http://opencode.test"
    assert (await client.get_todos("ses_001")).todos == []


class WithoutBatches(grpc.GenericRpcHandler):
    """A server as old as 0.2, for the importer: every unary rpc forwarded as bytes to the real one,
    except BatchWrite, which grpc itself answers UNIMPLEMENTED (no handler for it)."""

    def __init__(self, upstream: grpc.aio.Channel) -> None:
        self._upstream = upstream

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler | None:
        method = handler_call_details.method
        if method.endswith("/BatchWrite"):
            return None
        forward = self._upstream.unary_unary(method)

        async def handle(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
            try:
                return cast(bytes, await forward(request))
            except grpc.aio.AioRpcError as error:
                await context.abort(error.code(), error.details() or "", tuple(error.trailing_metadata() or ()))
                raise  # abort raises; this keeps the type checker's count of returns

        return grpc.unary_unary_rpc_method_handler(handle)


@pytest.fixture
async def old_server(counted: RunningServer) -> AsyncIterator[str]:
    """The address of a server without BatchWrite in front of ``counted``."""
    async with grpc.aio.insecure_channel(counted.address) as upstream:
        front = grpc.aio.server(handlers=[WithoutBatches(upstream)])
        port = front.add_insecure_port("127.0.0.1:0")
        await front.start()
        yield f"127.0.0.1:{port}"
        await front.stop(None)


async def test_a_server_that_takes_no_batches_gets_the_resync_by_single_calls(
    counted: RunningServer, old_server: str
) -> None:
    opencode = full_opencode(5)
    async with TodoClient.connect(old_server) as client, importing(client, opencode):
        opencode.frames.put_nowait(CONNECTED)
        await eventually(holds(client, "ses_004", "4: read", "4: fix", "4: ship"), timeout=BOUND)

        assert await lists_of(client, list(opencode.lists)) == expected_lists(opencode)
    assert write_calls(counted) == {"CreateSession": 5, "ReplaceTodos": 5}

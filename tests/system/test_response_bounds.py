"""Responses stay under gRPC's default 4 MiB receive limit whatever is asked: BatchGetTodos and
ListSessions stop at 3 MiB and say what is left for the next call, so a client never gets
gRPC's own "message larger than max" RESOURCE_EXHAUSTED (which carries no details)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import Todo, TodoClient
from sessiontodo_server.app import RunningServer

FULL_LIST = [Todo(id=f"t{n}", content=f"{n}".ljust(4096, ".")) for n in range(255)]
"""A list near the 1 MiB limit."""
HEAVY_LABELS = {f"key{n}": f"{n}".ljust(4096, ".") for n in range(64)}
"""The most labels a session may carry, each as long as allowed."""


@pytest.fixture
async def stub(server: RunningServer) -> AsyncIterator[pb_grpc.TodoServiceStub]:
    async with grpc.aio.insecure_channel(server.address) as channel:
        yield pb_grpc.TodoServiceStub(channel)


async def test_a_batch_of_full_lists_answers_what_fits_and_names_the_rest_as_unread(
    client: TodoClient, stub: pb_grpc.TodoServiceStub
) -> None:
    ids = [f"s{n}" for n in range(5)]
    for session_id in ids:
        await client.create_session(session_id)
        await client.replace_todos(session_id, FULL_LIST)

    response = await stub.BatchGetTodos(pb.BatchGetTodosRequest(session_ids=[*ids, "absent"]), timeout=10)

    answered = [entry.session.session_id for entry in response.sessions]
    assert response.ByteSize() <= 4 << 20
    assert answered + list(response.unread_session_ids) == [*ids, "absent"]
    assert len(answered) == 3


async def test_the_typed_client_reads_a_batch_too_large_for_one_response_in_several(client: TodoClient) -> None:
    ids = [f"s{n}" for n in range(5)]
    for session_id in ids:
        await client.create_session(session_id)
        await client.replace_todos(session_id, FULL_LIST)

    found, missing = await client.batch_get_todos([*ids, "absent"])

    assert [entry.session.session_id for entry in found] == ids
    assert missing == ["absent"]


async def test_a_page_of_heavily_labelled_sessions_stops_at_3_mib_with_a_token_for_the_rest(
    client: TodoClient, stub: pb_grpc.TodoServiceStub
) -> None:
    ids = [f"s{n:02}" for n in range(20)]
    for session_id in ids:
        await client.create_session(session_id, labels=HEAVY_LABELS)

    first = await stub.ListSessions(pb.ListSessionsRequest(page_size=100), timeout=10)
    rest = await stub.ListSessions(pb.ListSessionsRequest(page_size=100, page_token=first.next_page_token), timeout=10)

    assert first.ByteSize() <= 3 << 20
    assert first.next_page_token
    assert [s.session_id for s in [*first.sessions, *rest.sessions]] == ids
    assert rest.next_page_token == ""

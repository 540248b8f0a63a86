"""The default sqlite store: every acknowledged write survives a restart and ``kill -9``, in both
durability modes (``fsync`` also survives an OS crash, which a test cannot stage: it is the same
group-committed path with ``synchronous=FULL``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sessiontodo_client import ChangeKind, ServiceError, Todo, TodoClient, TodoStatus
from sessiontodo_server.stores.by_url import open_store
from tests.support import ServerProcess, eventually

pytestmark = pytest.mark.process

GLOBAL = "sessiontodo:global"
"""The reserved id of RFC-0034's sessionless global list."""


def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'todos.db'}"  # an absolute path: sqlite:////tmp/...


async def test_a_restart_restores_sessions_lists_revisions_and_ids(tmp_path: Path) -> None:
    store = sqlite_url(tmp_path)
    with ServerProcess("--store", store) as server:
        async with TodoClient.connect(server.address) as client:
            await client.create_session("parent")
            await client.create_session("child", parent_id="parent", labels={"title": "Child"}, idle_ttl=3600)
            written = await client.replace_todos(
                "child",
                [
                    Todo(id="a", content="first", metadata={"example.com/estimate": "3"}),
                    Todo(content="second", status=TodoStatus.IN_PROGRESS),
                ],
            )
            before = await client.get_session("child")
            await client.add_todo(GLOBAL, Todo(content="global"))
        assert server.stop() == 0

    with ServerProcess("--store", store, port=server.port) as restarted:
        async with TodoClient.connect(restarted.address) as client:
            assert await client.get_todos("child") == written
            assert await client.get_session("child") == before
            assert before.labels == {"title": "Child"}
            assert before.idle_ttl == 3600
            sessions = {s.session_id: s.parent_id for s in await client.list_sessions()}
            assert sessions == {"parent": "", "child": "parent"}
            assert [t.content for t in (await client.get_todos(GLOBAL)).todos] == ["global"]
            # The parent link survived too: removing the parent still takes the child.
            assert sorted(await client.remove_session("parent")) == ["child", "parent"]


@pytest.mark.parametrize("durability", ["process", "fsync"])
async def test_no_acknowledged_write_is_lost_to_kill_9(tmp_path: Path, durability: str) -> None:
    """Several writers at once, so writes are group-committed when the process dies."""
    store = sqlite_url(tmp_path)
    acknowledged: dict[str, list[tuple[str, int]]] = {f"s{n}": [] for n in range(4)}
    server = ServerProcess("--store", store, "--durability", durability).start()
    try:
        async with TodoClient.connect(server.address) as client:

            async def write_until_killed(session_id: str) -> None:
                await client.create_session(session_id)
                for n in range(10_000):
                    try:
                        added = await client.add_todo(session_id, Todo(content=f"write {n}"))
                    except ServiceError:
                        return  # the server is gone: this write was never acknowledged
                    acknowledged[session_id].append((added.todo.id, added.revision))

            writers = [asyncio.create_task(write_until_killed(session_id)) for session_id in acknowledged]
            await eventually(lambda: all(len(acks) >= 100 for acks in acknowledged.values()), timeout=60)
            server.kill()
            await asyncio.wait_for(asyncio.gather(*writers), 60)
    finally:
        server.__exit__(None, None, None)

    with ServerProcess("--store", store, "--durability", durability, port=server.port) as restarted:
        async with TodoClient.connect(restarted.address) as client:
            for session_id, acks in acknowledged.items():
                state = await client.get_todos(session_id)
                stored_ids = [t.id for t in state.todos]
                assert stored_ids[: len(acks)] == [todo_id for todo_id, _ in acks]
                assert state.revision >= acks[-1][1]


@pytest.mark.parametrize("url", ["memory://", "redis://127.0.0.1:1/0"])
def test_durability_fsync_is_refused_for_a_store_it_does_not_apply_to(url: str) -> None:
    with pytest.raises(ValueError, match="applies to the sqlite store"):
        open_store(url, 8, durability="fsync")


@pytest.mark.parametrize("resume", ["current", "older"])
async def test_a_watch_resumes_across_a_restart(tmp_path: Path, resume: str) -> None:
    store = sqlite_url(tmp_path)
    with ServerProcess("--store", store) as server:
        async with TodoClient.connect(server.address) as client:
            await client.create_session("s")
            first = await client.add_todo("s", Todo(content="a"))
            second = await client.add_todo("s", Todo(content="b"))
        server.stop()

    with ServerProcess("--store", store, port=server.port) as restarted:
        async with TodoClient.connect(restarted.address) as client:
            after = second.revision if resume == "current" else first.revision
            events = client.watch("s", after_revision=after)
            next_event = asyncio.ensure_future(anext(events))
            # Whether the watch starts before or after this write, the outcome is the same:
            # the write is the only change in the (fresh, in-memory) history.
            written = await client.add_todo("s", Todo(content="c"))
            event = await asyncio.wait_for(next_event, 5)
            await events.aclose()
    if resume == "current":
        assert (event.kind, event.revision) == (ChangeKind.TODO_ADDED, written.revision)
    else:  # history is kept in memory only, so the gap cannot be bridged after a restart
        assert event.kind is ChangeKind.RESET
        assert [t.content for t in event.todos][:2] == ["a", "b"]

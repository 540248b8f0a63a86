"""What only the Redis store does as replicas see it (several stores on one Redis stand for replicas,
no gRPC): its feed stream, scripts, key layout and cluster slots. What every shared store does
alike is the replica contract (``tests/contract/test_replica_contract.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio
import redis.exceptions

from sessiontodo_server.domain.batch import Write, WriteContext
from sessiontodo_server.domain.errors import SessionNotFound, Unavailable
from sessiontodo_server.domain.mutations import AddTodo
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID
from sessiontodo_server.domain.values import EVERY_SESSION, ChangeKind, RemovalReason, SessionInfo, Todo
from sessiontodo_server.stores.redis import RedisStore
from tests.support import eventually
from tests.support.redis_server import RedisServer
from tests.support.replicas import (
    LIMITS,
    OpenReplica,
    create,
    heard_up_to,
    listen,
    pause_following,
    replace,
    resume_following,
    summary,
)

Open = OpenReplica[RedisStore]


async def test_a_list_too_large_for_the_feed_is_read_from_the_sessions_history(open_replica: Open) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = listen(reader)
    await create(writer, "s")
    large = await replace(writer, "s", *(f"{n}: " + "x" * 4000 for n in range(40)))  # ~160 KB of text
    await eventually(lambda: len(heard) == 2)
    assert summary(heard[1:]) == summary([large])
    assert summary((await reader.feed_after(large.cursor - 1)) or []) == summary([large])


async def test_a_replica_writing_before_it_read_others_changes_delivers_them_first(open_replica: Open) -> None:
    """A Redis replica whose follower lags delivers what it missed itself before answering a write
    (an etcd replica waits for its watch instead; the fact both keep is in the replica contract)."""
    first, second = await open_replica(), await open_replica()
    heard = listen(second)
    await create(first, "s")
    await eventually(lambda: len(heard) == 1)
    await pause_following(second)
    unheard = [await replace(first, "s", "from elsewhere"), await replace(first, "s", "again")]
    mine = await replace(second, "s", "mine")
    assert summary(heard[1:]) == summary(unheard)  # already, before its own change is published
    assert mine.cursor == unheard[-1].cursor + 1
    resume_following(second)
    barrier = await replace(first, "s", "later")
    await heard_up_to(heard, barrier)
    assert summary(heard[3:]) == summary([barrier])  # nothing heard twice, and never its own change


async def test_a_replica_whose_connections_were_cut_catches_up_on_what_it_missed(
    open_replica: Open, redis_server: RedisServer
) -> None:
    writer, reader = await open_replica(), await open_replica()
    heard = listen(reader)
    await create(writer, "s")
    await eventually(lambda: len(heard) == 1)
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        await admin.client_kill_filter(_type="pubsub")
    missed = [await replace(writer, "s", f"while away {n}") for n in range(3)]
    await eventually(lambda: len(heard) == 4)
    assert summary(heard[1:]) == summary(missed)


async def test_a_replica_the_feed_was_trimmed_past_resets_every_watcher(open_replica: Open) -> None:
    writer, reader = await open_replica(feed_history=2), await open_replica(feed_history=2)
    heard = listen(reader)
    await create(writer, "s")
    await eventually(lambda: len(heard) == 1)
    await pause_following(reader)
    for n in range(4):
        last = await replace(writer, "s", f"lost {n}")
    resume_following(reader)
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].session_id, heard[1].cursor) == (ChangeKind.RESET, "", last.cursor)


async def test_create_and_remove_forced_to_interleave_leave_no_half_session(
    open_replica: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.1 created a session in two steps (index, then data): a RemoveAllSessions between them left
    a session readable and writable but unlisted, uncounted and unremovable. Here the creation is
    held at its only await point while another replica removes everything, in both orders."""
    creator, remover = await open_replica(), await open_replica()
    create_script = creator._scripts.create
    for remove_first in (True, False):
        release, reached = asyncio.Event(), asyncio.Event()

        async def held_create(*args: Any, release: asyncio.Event = release, reached: asyncio.Event = reached) -> Any:
            reached.set()
            await release.wait()
            return await create_script(*args)

        monkeypatch.setattr(creator._scripts, "create", held_create)
        await create(remover, "parent")
        creating = asyncio.create_task(create(creator, "child", "parent"))
        await reached.wait()
        if remove_first:
            await remover.remove_all_sessions()
            release.set()
            with pytest.raises(SessionNotFound):
                await creating
        else:
            release.set()
            await creating
            await remover.remove_all_sessions()
        monkeypatch.setattr(creator._scripts, "create", create_script)
        for store in (creator, remover):
            assert await store.get("child") is None
            assert await store.get("parent") is None
            assert await store.list_sessions("", 10, EVERY_SESSION) == []
        assert await create(remover, "fresh", max_sessions=1) is not None  # nothing left counted
        assert await remover.remove_all_sessions() != []


async def test_creates_and_removes_racing_on_two_replicas_keep_index_and_data_in_step(
    open_replica: Open, redis_server: RedisServer
) -> None:
    a, b = await open_replica(), await open_replica()
    for round_ in range(5):
        jobs: list[Awaitable[Any]] = [create([a, b][n % 2], f"s{n}", max_sessions=1000) for n in range(20)]
        jobs += [b.remove_all_sessions(), a.remove_all_sessions()]
        jobs += [a.remove_session(f"s{n}", RemovalReason.REMOVED) for n in range(0, 20, 3)]
        await asyncio.gather(*jobs)
        listed = {s.session_id for s in await a.list_sessions("", 1000, EVERY_SESSION)}
        readable = {f"s{n}" for n in range(20) if await b.get(f"s{n}") is not None}
        assert listed == readable, f"round {round_}"
        async with redis.asyncio.Redis(port=redis_server.port) as admin:
            assert await admin.zcard("sessiontodo:{st}:sessions") == len(listed) + 1  # and the global list
        await a.remove_all_sessions()


async def test_an_expired_session_is_removed_once_whichever_replicas_reap_it(open_replica: Open) -> None:
    reapers = [await open_replica(), await open_replica()]
    watcher = await open_replica()
    heard = listen(watcher)
    await reapers[0].create_session("idle", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    due = await asyncio.gather(*(r.expired(200.0) for r in reapers))
    assert sorted(due[0] + due[1]) == ["idle"]  # claimed by one of them
    removed = [
        change
        for reaper, ids in zip(reapers, due, strict=True)
        for session_id in ids
        for change in await reaper.remove_session(session_id, RemovalReason.EXPIRED)
    ]
    assert [c.reason for c in removed] == [RemovalReason.EXPIRED]
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)


async def test_the_global_list_of_the_01_layout_is_carried_over(redis_server: RedisServer) -> None:
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        change = json.dumps([7, "todos_replaced", "", [["a", "kept", "completed", "high"]]])
        await admin.hset("sessiontodo:{s:}:state", mapping={"revision": 7, "change": change, "incarnation": 0})
    store = RedisStore(redis_server.url)
    await store.open()
    try:
        state = await store.get(GLOBAL_SESSION_ID)
        assert state is not None
        assert state.revision == 8
        assert [(t.id, t.content, t.status.value) for t in state.todos] == [("a", "kept", "completed")]
    finally:
        await store.close()
    async with redis.asyncio.Redis(port=redis_server.port) as admin:
        assert await admin.exists("sessiontodo:{s:}:state") == 0


async def test_stores_with_different_prefixes_share_one_redis_without_seeing_each_other(
    open_replica: Open, redis_server: RedisServer
) -> None:
    blue = await open_replica(f"{redis_server.url}?prefix=blue:")
    green = await open_replica(f"{redis_server.url}?prefix=green:")
    await create(blue, "s")
    await replace(blue, "s", "blue only")
    assert await green.get("s") is None
    assert await green.list_sessions("", 10, EVERY_SESSION) == []
    async with redis.asyncio.Redis(port=redis_server.port, decode_responses=True) as admin:
        keys = [str(key) for key in await admin.keys("*")]
    assert keys
    assert all(key.startswith(("blue:", "green:")) for key in keys)


async def test_every_operation_keeps_to_one_cluster_slot(tmp_path: Path) -> None:
    """On a (one-node) Redis Cluster a script touching two slots fails with CROSSSLOT."""
    with RedisServer(tmp_path / "cluster", cluster_node=True) as node:
        store = RedisStore(node.url, 4)
        await store.open()
        try:
            await create(store, "parent")
            await create(store, "child", "parent")
            add = AddTodo(Todo("t", "x"), None, True)
            await store.write(Write("child", add), WriteContext("r", "", 1.0, LIMITS))
            assert await store.changes_after("child", 0) is not None
            assert [s.session_id for s in await store.list_sessions("", 10, EVERY_SESSION)] == ["child", "parent"]
            assert await store.feed_after(0) is not None
            assert (await store.snapshot())[0] == 3
            assert await store.expired(1.0) == []
            assert len(await store.remove_session("parent", RemovalReason.REMOVED)) == 2
            await create(store, "again")
            assert len(await store.remove_all_sessions()) == 1
        finally:
            await store.close()


async def test_a_redis_error_naming_an_internal_address_reaches_clients_as_unavailable_without_it(
    open_replica: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = await open_replica()
    await create(store, "s")

    async def moved(*args: Any) -> Any:
        raise redis.exceptions.ResponseError("MOVED 3999 10.1.2.3:6380")

    monkeypatch.setattr(store._scripts, "write", moved)
    with pytest.raises(Unavailable) as refused:
        await replace(store, "s", "x")
    assert "10.1.2.3" not in str(refused.value)

"""Tenants on the Redis store: the tenant is part of every session key (in the store's one hash
tag), and two tenants' identical session ids stay two sessions for reads, listings and removal."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
import redis.asyncio as redis

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import ChannelSecurity, NotFound, Todo, TodoClient
from sessiontodo_server.app import RunningServer
from sessiontodo_server.domain.values import SessionFilter, SessionInfo
from sessiontodo_server.stores.redis import RedisStore
from tests.support.certificates import auth_toml
from tests.support.redis_server import RedisServer

TOKENS = {tenant: f"{tenant}-admin-token-0123456789" for tenant in ("acme", "globex")}


async def test_two_tenants_with_the_same_ids_stay_apart_on_redis(
    start: Callable[..., Any], redis_server: RedisServer, tmp_path: Path
) -> None:
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(
        "".join(
            f'[[token]]\nsha256 = "{hashlib.sha256(token.encode()).hexdigest()}"\ntenant = "{tenant}"\nrole = "admin"\n'
            for tenant, token in TOKENS.items()
        )
    )
    server: RunningServer = await start(store=redis_server.url, auth_file=auth_file)

    def connect(tenant: str) -> TodoClient:
        return TodoClient.connect(server.address, security=ChannelSecurity(token=TOKENS[tenant]))

    async with connect("acme") as acme, connect("globex") as globex:
        for client, name in ((acme, "acme"), (globex, "globex")):
            await client.create_session("ses_1")
            await client.replace_todos("ses_1", [Todo(content=f"{name}'s plan")])
        await acme.create_session("acme_only")

        assert [t.content for t in (await globex.get_todos("ses_1")).todos] == ["globex's plan"]
        assert [s.session_id for s in await globex.list_sessions()] == ["ses_1"]
        with pytest.raises(NotFound):
            await globex.get_todos("acme_only")
        async with redis.Redis.from_url(redis_server.url) as raw:
            keys = {key.decode() async for key in raw.scan_iter(match="*:s:*")}
        assert {"sessiontodo:{st}:s:acme/ses_1", "sessiontodo:{st}:s:globex/ses_1"} <= keys

        assert await globex.remove_all_sessions() == 1
        assert sorted(s.session_id for s in await acme.list_sessions()) == ["acme_only", "ses_1"]


async def _keys_read(raw: redis.Redis, reading: Awaitable[object]) -> int:
    """How many keys Redis looked up (scripts' lookups included) while ``reading`` ran."""
    await raw.config_resetstat()
    await reading
    stats = await raw.info("stats")
    return int(stats["keyspace_hits"]) + int(stats["keyspace_misses"])


async def test_a_tenants_listing_and_feed_snapshot_read_none_of_another_tenants_sessions(
    start: Callable[..., Any], redis_server: RedisServer, tmp_path: Path
) -> None:
    """Another tenant's 300 sessions cost a tenant's reads nothing: no slowdown, no timing channel."""
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(auth_toml(*((token, tenant, "admin") for tenant, token in TOKENS.items())))
    server: RunningServer = await start(store=redis_server.url, auth_file=auth_file)
    async with (
        TodoClient.connect(server.address, security=ChannelSecurity(token=TOKENS["acme"])) as acme,
        TodoClient.connect(server.address, security=ChannelSecurity(token=TOKENS["globex"])) as globex,
        redis.Redis.from_url(redis_server.url) as raw,
    ):
        await asyncio.gather(*(acme.create_session(f"ses_{n:03}") for n in range(300)))
        await globex.create_session("mine")
        metadata = (("authorization", f"Bearer {TOKENS['globex']}"),)
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = pb_grpc.TodoServiceStub(channel)
            listing = stub.ListSessions(pb.ListSessionsRequest(page_size=1), metadata=metadata, timeout=10)
            listed = await _keys_read(raw, listing)
            feed = stub.WatchChanges(pb.WatchChangesRequest(include_snapshot=True), metadata=metadata)
            snapshot = await _keys_read(raw, _until_bookmark(feed))
            feed.cancel()
    assert listed < 20
    assert snapshot < 20


async def _until_bookmark(feed: Any) -> None:
    while (await asyncio.wait_for(feed.read(), 10)).kind != pb.CHANGE_KIND_PROGRESS:
        pass


async def test_a_store_written_before_the_tenant_indexes_gets_them_when_opened(redis_server: RedisServer) -> None:
    store = RedisStore(redis_server.url)
    await store.open()
    for session_id in ("acme/a", "acme/b", "globex/a", "plain"):
        await store.create_session(session_id, SessionInfo(), 100, "")
    await store.close()
    async with redis.Redis.from_url(redis_server.url) as raw:  # as 0.3 left it: no index, no mark
        await raw.delete(*[key async for key in raw.scan_iter(match="sessiontodo:{st}:tenant:*")])
        await raw.hdel("sessiontodo:{st}:counters", "tenants")

    reopened = RedisStore(redis_server.url)
    await reopened.open()
    try:
        acme = await reopened.list_sessions("", 10, SessionFilter(tenant="acme"))
        default = await reopened.list_sessions("", 10, SessionFilter(tenant=""))
    finally:
        await reopened.close()
    assert [s.session_id for s in acme] == ["acme/a", "acme/b"]
    assert [s.session_id for s in default] == ["plain"]

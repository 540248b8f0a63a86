"""Tenants on the Redis store: the tenant is part of every session key (in the store's one hash
tag), and two tenants' identical session ids stay two sessions for reads, listings and removal."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from sessiontodo_client import ChannelSecurity, NotFound, Todo, TodoClient
from sessiontodo_server.app import RunningServer
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

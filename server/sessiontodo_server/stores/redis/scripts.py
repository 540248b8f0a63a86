"""The store's Lua scripts (``lua/*.lua``, shipped in the wheel), each with the shared ``lib.lua`` in front."""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis
from redis.commands.core import AsyncScript

_LUA = files(__package__) / "lua"


class Scripts:
    """One registered script per file: called with its keys and arguments, run by EVALSHA."""

    def __init__(self, redis: Redis) -> None:
        lib = (_LUA / "lib.lua").read_text()

        def load(name: str) -> AsyncScript:
            return redis.register_script(f"{lib}\n{(_LUA / f'{name}.lua').read_text()}")

        self.init = load("init")
        self.create = load("create")
        self.remove = load("remove")
        self.write = load("write")
        self.batch = load("batch")
        self.read = load("read")
        self.since = load("since")
        self.entry = load("entry")
        self.snapshot = load("snapshot")
        self.feed = load("feed")
        self.claim = load("claim")
        self.heartbeat = load("heartbeat")

"""``sessiontodo-opencode-mirror`` following the real OpenCode, driven by the stub model.

Several sessions in two directories get lists from the model's ``todowrite`` calls, one is
deleted, OpenCode restarts while changes are made that the mirror cannot see live; every list
arrives in sessiontodo, on WatchTodos and on the feed, in order, and nothing is lost. Sessions
OpenCode held before the mirror started, more than it lists by default, arrive by its first
resync, in one ``BatchWrite``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiontodo_client import ChangeKind, FeedEvent, TodoClient, WatchEvent
from sessiontodo_server.app import RunningServer
from tests.peers.opencode_real.opencode_peer import OpenCodeServer, contents_in_sessiontodo
from tests.support import ROOT, eventually, write_calls

pytestmark = [pytest.mark.slow, pytest.mark.process]


def plan(*contents: str, status: str = "pending") -> list[dict[str, str]]:
    return [{"content": content, "status": status, "priority": "high"} for content in contents]


MORE_THAN_LISTED_BY_DEFAULT = 110
"""Sessions beyond the 100 that OpenCode's ``GET /session`` lists unless given a ``limit``."""

A1, A2, A3 = plan("a: read the code"), plan("a: read the code", "a: fix it"), plan("a: ship", status="blocked")
B1, C1, D1 = plan("b: only list"), plan("c: other directory"), plan("d: after the restart")


class MirrorProcess:
    """``python -m sessiontodo_opencode.mirror_main`` (the console script's module), logs to a file."""

    def __init__(self, opencode_url: str, sessiontodo_address: str, log_path: Path) -> None:
        self._args = ["--opencode", opencode_url, "--sessiontodo-address", sessiontodo_address]
        self._log_path = log_path
        self.process: asyncio.subprocess.Process | None = None

    def log(self) -> str:
        return self._log_path.read_text(errors="replace") if self._log_path.exists() else ""

    async def start(self) -> None:
        with self._log_path.open("wb") as log_file:
            self.process = await asyncio.create_subprocess_exec(
                *(sys.executable, "-m", "sessiontodo_opencode.mirror_main", *self._args),
                cwd=ROOT,
                stdout=log_file,
                stderr=log_file,
                env={**os.environ, "SESSIONTODO_OPENCODE_MIRROR_LOG_LEVEL": "INFO"},
            )

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    async def stop(self) -> int:
        assert self.process is not None
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 15)
            except TimeoutError:
                self.process.kill()
        return await self.process.wait()


@pytest.fixture
async def mirror(opencode: OpenCodeServer, server: RunningServer, tmp_path: Path) -> AsyncIterator[MirrorProcess]:
    process = MirrorProcess(opencode.url, server.address, tmp_path / "mirror.log")
    await process.start()
    yield process
    await process.stop()


@pytest.mark.timeout(300)
async def test_the_mirror_copies_every_sessions_lists_and_lifecycle_across_an_opencode_restart(
    opencode: OpenCodeServer, server: RunningServer, mirror: MirrorProcess
) -> None:
    other = opencode.home.new_project("other")
    async with TodoClient.connect(server.address) as client, httpx.AsyncClient(base_url=opencode.url) as http:
        feed: list[FeedEvent] = []

        async def follow() -> None:
            async for event in client.watch_changes():
                feed.append(event)

        following = asyncio.create_task(follow())
        await eventually(lambda: "resynced" in mirror.log(), timeout=30)

        async def new_session(directory: Path) -> str:
            response = await http.post("/session", json={}, params={"directory": str(directory)})
            session_id: str = response.json()["id"]
            return session_id

        async def mirrored(session_id: str, expected: list[dict[str, str]] | None) -> None:
            async def same() -> bool:
                return await contents_in_sessiontodo(client, session_id) == expected

            await eventually(same, timeout=30, interval=0.1)

        a, b, c = (
            await new_session(opencode.home.project),
            await new_session(opencode.home.project),
            await new_session(other),
        )
        await mirrored(a, [])
        watching_a: list[WatchEvent] = []

        async def watch_a() -> None:
            async for event in client.watch(a, after_revision=0):
                watching_a.append(event)

        watching = asyncio.create_task(watch_a())
        for session_id, written, directory in ((a, A1, None), (b, B1, None), (c, C1, other), (a, A2, None)):
            await opencode.write_todos(session_id, written, directory)
        for session_id, written in ((a, A2), (b, B1), (c, C1)):
            await mirrored(session_id, written)
        stored_c = await client.get_session(c)
        assert stored_c.labels["directory"] == str(other)
        assert stored_c.labels["project"] == "global"
        assert stored_c.labels["title"]  # OpenCode's generated title

        assert (await http.delete(f"/session/{b}")).json() is True
        await mirrored(b, None)

        # The mirror is frozen while OpenCode restarts and changes happen: it sees none of them live.
        mirror.signal(signal.SIGSTOP)
        await opencode.restart()
        await opencode.write_todos(a, A3)
        assert (await http.delete(f"/session/{c}", params={"directory": str(other)})).json() is True
        d = await new_session(opencode.home.project)
        await opencode.write_todos(d, D1)
        mirror.signal(signal.SIGCONT)

        for session_id, expected in ((a, A3), (c, None), (d, D1)):
            await mirrored(session_id, expected)
        assert mirror.log().count("resynced") >= 2, mirror.log()
        following.cancel()
        watching.cancel()

    lists_of_a = [
        [t.content for t in e.todos] for e in feed if e.session_id == a and e.kind is ChangeKind.TODOS_REPLACED
    ]
    assert lists_of_a == [[t["content"] for t in todos] for todos in (A1, A2, A3)]
    assert [[t.content for t in e.todos] for e in watching_a if e.kind is ChangeKind.TODOS_REPLACED] == lists_of_a
    lifecycle = [
        (e.kind, e.session_id) for e in feed if e.kind in (ChangeKind.SESSION_CREATED, ChangeKind.SESSION_REMOVED)
    ]
    assert lifecycle == [
        (ChangeKind.SESSION_CREATED, a),
        (ChangeKind.SESSION_CREATED, b),
        (ChangeKind.SESSION_CREATED, c),
        (ChangeKind.SESSION_REMOVED, b),
        (ChangeKind.SESSION_REMOVED, c),
        (ChangeKind.SESSION_CREATED, d),
    ]
    written_by = {e.origin for e in feed if e.session_id in (a, b, c, d)}
    assert written_by == {"opencode"}


@pytest.mark.timeout(300)
async def test_the_sessions_opencode_held_before_the_mirror_started_arrive_in_one_batch_with_their_lists(
    opencode: OpenCodeServer, start: Callable[..., Any], tmp_path: Path
) -> None:
    server: RunningServer = await start(metrics_port=0)
    other = opencode.home.new_project("other")
    async with httpx.AsyncClient(base_url=opencode.url) as http:
        sessions = {}
        for name, directory in (("a", opencode.home.project), ("b", other), ("c", opencode.home.project)):
            response = await http.post("/session", json={}, params={"directory": str(directory)})
            sessions[name] = response.json()["id"]
        empty = [(await http.post("/session", json={})).json()["id"] for _ in range(MORE_THAN_LISTED_BY_DEFAULT)]
        await opencode.write_todos(sessions["a"], A2)
        await opencode.write_todos(sessions["b"], C1, other)
    mirror = MirrorProcess(opencode.url, server.address, tmp_path / "mirror.log")
    await mirror.start()
    try:
        await eventually(lambda: "resynced" in mirror.log(), timeout=60)
    finally:
        await mirror.stop()

    async with TodoClient.connect(server.address) as client:
        held = {name: await contents_in_sessiontodo(client, session_id) for name, session_id in sessions.items()}
        mirrored = {session.session_id for session in await client.list_sessions()}
    assert held == {"a": A2, "b": C1, "c": []}
    assert mirrored == {*sessions.values(), *empty}
    assert write_calls(server) == {"BatchWrite": 1}

"""The OpenCode plugin inside the real OpenCode 1.18.33, driven by the stub model.

OpenCode loads the plugin from its folder, named in each project's ``opencode.json``, as
installed from the packed tarballs. Sessions in two directories get lists from the model's
``todowrite`` calls and one is deleted: every list and every session, with its labels, arrives
in sessiontodo, in order, with no process but OpenCode. Lists written while sessiontodo is down
are stored once it is back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from sessiontodo_client import ChangeKind, FeedEvent, TodoClient
from sessiontodo_server.app import RunningServer
from tests.peers.opencode_real.opencode_peer import OpenCodeHome, OpenCodeServer, contents_in_sessiontodo
from tests.peers.opencode_real.stub_model import TITLE, StubModel
from tests.support import ROOT, ServerProcess, eventually, run_node_suite

pytestmark = [pytest.mark.slow, pytest.mark.process]

STORED_WITHIN = 30.0
# A directory's first request bootstraps its OpenCode instance, plugins included: seconds, not milliseconds.
OPENCODE_TIMEOUT = 30.0


def plan(*contents: str, status: str = "pending") -> list[dict[str, str]]:
    return [{"content": content, "status": status, "priority": "high"} for content in contents]


A1, A2, B1 = plan("a: read the code"), plan("a: read the code", "a: fix it"), plan("b: only list")
C1 = [{"content": "c: other directory", "status": "blocked", "priority": "urgent"}]
D1, D2, D3 = plan("d: before"), plan("d: during the outage"), plan("d: the latest", status="in_progress")


def opencode_home(root: Path, stub_model: StubModel, plugin: Path, address: str) -> OpenCodeHome:
    """A home whose projects list the plugin by its folder, with the sessiontodo address as option."""
    return OpenCodeHome(root, stub_model.base_url, plugins=[[str(plugin), {"address": address}]])


async def new_session(http: httpx.AsyncClient, directory: Path) -> str:
    response = await http.post("/session", json={}, params={"directory": str(directory)})
    session_id: str = response.json()["id"]
    return session_id


async def stored(client: TodoClient, session_id: str, expected: list[dict[str, str]] | None) -> None:
    """Wait until sessiontodo holds ``expected`` for the session (None: no such session)."""

    async def same() -> bool:
        return await contents_in_sessiontodo(client, session_id) == expected

    await eventually(same, timeout=STORED_WITHIN, interval=0.1)


@pytest.fixture
async def opencode(
    tmp_path: Path, stub_model: StubModel, installed_plugin: Path, server: RunningServer
) -> AsyncIterator[OpenCodeServer]:
    home = opencode_home(tmp_path / "opencode", stub_model, installed_plugin, server.address)
    async with OpenCodeServer(home) as running:
        yield running


async def test_every_list_and_session_reaches_sessiontodo_through_the_plugin(
    opencode: OpenCodeServer, server: RunningServer
) -> None:
    other = opencode.home.new_project("other")
    async with (
        TodoClient.connect(server.address) as client,
        httpx.AsyncClient(base_url=opencode.url, timeout=OPENCODE_TIMEOUT) as http,
    ):
        feed: list[FeedEvent] = []

        async def follow() -> None:
            async for event in client.watch_changes():
                feed.append(event)

        following = asyncio.create_task(follow())
        a, b = await new_session(http, opencode.home.project), await new_session(http, opencode.home.project)
        c = await new_session(http, other)
        for session_id, written, directory in ((a, A1, None), (b, B1, None), (c, C1, other), (a, A2, None)):
            await opencode.write_todos(session_id, written, directory)
        for session_id, written in ((a, A2), (b, B1), (c, C1)):
            await stored(client, session_id, written)

        async def titled() -> bool:
            return (await client.get_session(c)).labels.get("title") == TITLE

        await eventually(titled, timeout=STORED_WITHIN, interval=0.1)
        labels_of_c = (await client.get_session(c)).labels
        assert (await http.delete(f"/session/{b}")).json() is True
        await stored(client, b, None)
        following.cancel()

    assert labels_of_c == {"title": TITLE, "directory": str(other), "project": "global"}
    lists_of_a = [
        [t.content for t in e.todos] for e in feed if e.session_id == a and e.kind is ChangeKind.TODOS_REPLACED
    ]
    assert lists_of_a == [[t["content"] for t in todos] for todos in (A1, A2)]
    lifecycle = [
        (e.kind, e.session_id) for e in feed if e.kind in (ChangeKind.SESSION_CREATED, ChangeKind.SESSION_REMOVED)
    ]
    assert lifecycle == [
        (ChangeKind.SESSION_CREATED, a),
        (ChangeKind.SESSION_CREATED, b),
        (ChangeKind.SESSION_CREATED, c),
        (ChangeKind.SESSION_REMOVED, b),
    ]
    assert {e.origin for e in feed if e.session_id in (a, b, c) and e.kind is not ChangeKind.PROGRESS} == {"opencode"}


async def test_lists_written_while_sessiontodo_is_down_are_stored_once_it_is_back(
    tmp_path: Path, stub_model: StubModel, installed_plugin: Path
) -> None:
    store = ("--store", f"sqlite:///{tmp_path / 'todos.db'}")
    sessiontodo = await asyncio.to_thread(ServerProcess(*store).start)
    home = opencode_home(tmp_path / "opencode", stub_model, installed_plugin, sessiontodo.address)
    try:
        async with (
            OpenCodeServer(home) as opencode,
            TodoClient.connect(sessiontodo.address) as client,
            httpx.AsyncClient(base_url=opencode.url, timeout=OPENCODE_TIMEOUT) as http,
        ):
            d = await new_session(http, home.project)
            await opencode.write_todos(d, D1)
            await stored(client, d, D1)

            await asyncio.to_thread(sessiontodo.stop)
            await opencode.write_todos(d, D2)
            await opencode.write_todos(d, D3)
            sessiontodo = await asyncio.to_thread(ServerProcess(*store, port=sessiontodo.port).start)
            await stored(client, d, D3)
    finally:
        sessiontodo.__exit__(None, None, None)


async def test_the_plugins_options_and_translation_pass_their_node_suite(installed_plugin: Path) -> None:
    run = await run_node_suite(
        ROOT / "tests" / "peers" / "opencode_plugin" / "plugin.test.mjs",
        {"SESSIONTODO_PLUGIN_DIR": str(installed_plugin)},
    )

    run.assert_all_passed(at_least=5)

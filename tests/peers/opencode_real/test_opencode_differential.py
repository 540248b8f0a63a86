"""The same ``@opencode-ai/sdk`` script against the real ``opencode serve`` and against the sidecar.

Sessions (listing queries and children included), events (``sync`` frames included), errors,
``/session/status``, ``/global/health``, ``/path`` and ``/project`` must have the same types,
fields and field types. The only
differences allowed are ``DOCUMENTED_DIFFERENCES`` (docs/opencode.md says why); the test also
fails when one disappears, so the list stays exact. The sidecar's lists are written over gRPC,
as another backend would.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sessiontodo_client import TodoClient
from sessiontodo_opencode import Settings, Todo, start_sidecar
from sessiontodo_opencode.translate import todo_to_service
from sessiontodo_server.app import RunningServer
from tests.peers.opencode_real.differential import differences, sdk_report
from tests.peers.opencode_real.opencode_peer import OpenCodeServer

pytestmark = [pytest.mark.slow, pytest.mark.process]

DOCUMENTED_DIFFERENCES = {
    # Every todo the sidecar lists has an id: the default client's Todo type requires one.
    "todo.v1.data[*].id",
    "todo.v2.data[*].id",
    *(f"events.{stream}.shapes.todo.updated.properties.todos[*].id" for stream in ("v1", "v2", "global")),
    # A session that ran a prompt upstream carries its agent, model and diff summary: the sidecar runs no model.
    *(f"update.v2.data.{field}" for field in ("agent", "model", "summary")),
    *(
        f"events.{stream}.shapes.session.updated.properties.info.{field}"
        for stream in ("v1", "v2", "global")
        for field in ("agent", "model", "summary")
    ),
    *(
        f"events.globalSync.shapes.session.updated.1.syncEvent.data.info.{field}"
        for field in ("agent", "model", "summary")
    ),
    # Upstream's 400 for a bad POST /session body is a bare {"_tag": "BadRequest"}: the sidecar says what is wrong.
    "createBadBody.v2.error.message",
    # Upstream inspects the project's directory for its VCS: the sidecar never looks at the directories it is told.
    "project.list.data[*].vcs",
    "project.current.data.vcs",
}

CATCH_UP_WINDOW = 0.5
"""Shorter than the script's pause before its late subscriber, which must then get no replay."""


async def test_the_sdk_sees_the_same_sessions_events_and_errors_from_the_sidecar_as_from_opencode(
    opencode: OpenCodeServer, server: RunningServer, tmp_path: Path
) -> None:
    upstream = await sdk_report(opencode.url, str(opencode.home.project), opencode.write_todos)
    async with TodoClient.connect(server.address) as client:
        settings: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "catch_up_window": CATCH_UP_WINDOW}
        sidecar = await start_sidecar(Settings(**settings), client)

        async def give_todos(session_id: str, todos: list[dict[str, str]]) -> None:
            await client.replace_todos(session_id, [todo_to_service(Todo(**todo)) for todo in todos], origin="backend")

        try:
            ours = await sdk_report(sidecar.url, str(tmp_path), give_todos)
        finally:
            await sidecar.stop()

    found = differences(upstream, ours)
    unexpected = {path: found[path] for path in found.keys() - DOCUMENTED_DIFFERENCES}
    assert not unexpected, json.dumps(unexpected, indent=1)
    assert found.keys() == DOCUMENTED_DIFFERENCES, sorted(DOCUMENTED_DIFFERENCES - found.keys())

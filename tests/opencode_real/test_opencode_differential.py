"""The same ``@opencode-ai/sdk`` script against the real ``opencode serve`` and against the sidecar.

Sessions, events and errors must have the same types, fields and field types. The only
differences allowed are ``DOCUMENTED_DIFFERENCES`` (docs/opencode.md says why) and, until the
sidecar follows the core feed, ``SIDECAR_GAPS``: the test fails when one disappears, too, so
the lists stay exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from opencode_real.differential import differences, sdk_report
from opencode_real.opencode_peer import OpenCodeServer
from sessiontodo_client import Todo, TodoClient, TodoPriority, TodoStatus
from sessiontodo_opencode import Settings, start_sidecar
from sessiontodo_server.app import RunningServer

DOCUMENTED_DIFFERENCES = {
    # Every todo the sidecar lists has an id: the default client's Todo type requires one.
    "todo.v1.data[*].id",
    "todo.v2.data[*].id",
    "events.v1.shapes.todo.updated.properties.todos[*].id",
    "events.v2.shapes.todo.updated.properties.todos[*].id",
}

SIDECAR_GAPS = {
    # Sessions are only {id, parentID}; GET/PATCH /session and GET /session/{id} are missing.
    *(
        f"create.{client}.data.{field}"
        for client in ("v1", "v2")
        for field in ("cost", "directory", "path", "projectID", "slug", "time", "title", "tokens", "version")
    ),
    "create.v2Title",
    *(
        f"{call}.{part}"
        for call in ("getSession.v1", "listSessions.v2", "update.v2")
        for part in ("data", "error", "errorName", "status")
    ),
    "update.v2Title",
    "errors.getV2.errorName",
    "errors.getV2.status",
    # No session.created/updated/deleted events, no /global/event.
    *(
        f"events.{stream}.shapes.session.{kind}"
        for stream in ("v1", "v2")
        for kind in ("created", "updated", "deleted")
    ),
    "events.v1.order",
    "events.v2.order",
    "events.global.order",
    *(
        f"events.global.shapes.{kind}"
        for kind in ("server.connected", "session.created", "session.updated", "session.deleted", "todo.updated")
    ),
    "events.globalDirectoryIsTheClients",
    "events.globalEnvelopes",
    # Only the known status and priority words are stored.
    *(
        f"{where}[*].{field}"
        for where in ("todo.v1Values", "todo.v2Values", "events.lastTodosValues")
        for field in ("status", "priority")
    ),
}

CATCH_UP_WINDOW = 0.5
"""Shorter than the script's pause before its late subscriber, which must then get no replay."""

KNOWN_STATUSES = {status.value for status in TodoStatus}
KNOWN_PRIORITIES = {priority.value for priority in TodoPriority}


def service_todo(todo: dict[str, str]) -> Todo:
    """The todo as a backend writes it over gRPC; the old core keeps only the known words."""
    status = todo["status"] if todo["status"] in KNOWN_STATUSES else "pending"
    priority = todo["priority"] if todo["priority"] in KNOWN_PRIORITIES else "low"
    return Todo(content=todo["content"], status=TodoStatus(status), priority=TodoPriority(priority))


async def test_the_sdk_sees_the_same_sessions_events_and_errors_from_the_sidecar_as_from_opencode(
    opencode: OpenCodeServer, server: RunningServer, tmp_path: Path
) -> None:
    upstream = await sdk_report(opencode.url, str(opencode.home.project), opencode.write_todos)
    async with TodoClient.connect(server.address) as client:
        settings: dict[str, Any] = {"host": "127.0.0.1", "port": 0, "catch_up_window": CATCH_UP_WINDOW}
        sidecar = await start_sidecar(Settings(**settings), client)

        async def give_todos(session_id: str, todos: list[dict[str, str]]) -> None:
            await client.replace_todos(session_id, [service_todo(todo) for todo in todos])

        try:
            ours = await sdk_report(sidecar.url, str(tmp_path), give_todos)
        finally:
            await sidecar.stop()

    found = differences(upstream, ours)
    unexpected = {path: found[path] for path in found.keys() - DOCUMENTED_DIFFERENCES - SIDECAR_GAPS}
    assert not unexpected, json.dumps(unexpected, indent=1)
    assert found.keys() == DOCUMENTED_DIFFERENCES | SIDECAR_GAPS, sorted(
        (DOCUMENTED_DIFFERENCES | SIDECAR_GAPS) - found.keys()
    )

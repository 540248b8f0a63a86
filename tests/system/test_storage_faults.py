"""The sqlite store under faults: one owner per file, refused writes are UNAVAILABLE and
change nothing, health follows whether the file accepts writes, a bad file is one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from sessiontodo_client import Todo, TodoClient, Unavailable
from sessiontodo_server.app import RunningServer
from sessiontodo_server.stores import sqlite
from tests.support import ROOT, ServerProcess, eventually, free_port


@pytest.fixture(autouse=True)
def quick_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite, "PROBE_INTERVAL", 0.05)


def sql(server: RunningServer, statement: str) -> None:
    """Run SQL on the server's own connection: the way to make SQLite refuse writes in-process."""
    server.store._journal._db.execute(statement)  # type: ignore[attr-defined]


async def health(server: RunningServer) -> int:
    async with grpc.aio.insecure_channel(server.address) as channel:
        response = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        return response.status


@pytest.mark.parametrize(
    ("refuse", "allow", "why"),
    [
        ("PRAGMA max_page_count = 1", "PRAGMA max_page_count = 1000000", "database or disk is full"),
        ("PRAGMA query_only = 1", "PRAGMA query_only = 0", "readonly"),
    ],
)
@pytest.mark.parametrize("durability", ["process", "fsync"])
async def test_a_refused_write_is_unavailable_changes_nothing_and_health_recovers(
    start: Callable[..., Any], tmp_path: Path, refuse: str, allow: str, why: str, durability: str
) -> None:
    server: RunningServer = await start(store=f"sqlite:///{tmp_path / 'todos.db'}", durability=durability)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        kept = await client.replace_todos("s", [Todo(id="a", content="kept")])
        sql(server, refuse)
        with pytest.raises(Unavailable) as raised:
            await client.replace_todos("s", [Todo(content="x" * 4000) for _ in range(100)])
        assert why in str(raised.value)
        assert "Traceback" not in str(raised.value)
        assert await client.get_todos("s") == kept
        await eventually(async_equals(health, server, health_pb2.HealthCheckResponse.NOT_SERVING), timeout=10)

        sql(server, allow)
        await eventually(async_equals(health, server, health_pb2.HealthCheckResponse.SERVING), timeout=10)
        written = await client.replace_todos("s", [Todo(content="after")])
        assert written.revision == kept.revision + 1


@pytest.mark.parametrize("durability", ["process", "fsync"])
async def test_a_write_the_full_disk_refused_left_nothing_of_itself_in_the_file(
    start: Callable[..., Any], tmp_path: Path, durability: str
) -> None:
    """The file, reopened, holds the list as it was: not half of the refused write."""
    path = tmp_path / "todos.db"
    server: RunningServer = await start(store=f"sqlite:///{path}", durability=durability)
    async with TodoClient.connect(server.address) as client:
        await client.create_session("s")
        kept = await client.replace_todos("s", [Todo(id=f"t{n}", content=f"kept {n}") for n in range(20)])
        sql(server, "PRAGMA max_page_count = 1")
        with pytest.raises(Unavailable):
            await client.replace_todos("s", [Todo(content="x" * 4000) for _ in range(100)])
    await server.stop()

    reopened = sqlite.open_sqlite_store(path, 4, 16)
    await reopened.open()
    try:
        stored = await reopened.get("s")
    finally:
        await reopened.close()
    assert stored is not None
    assert (stored.revision, [t.content for t in stored.todos]) == (kept.revision, [t.content for t in kept.todos])


def async_equals(probe: Callable[[RunningServer], Any], server: RunningServer, expected: object) -> Callable[[], Any]:
    async def check() -> bool:
        return bool(await probe(server) == expected)

    return check


def run_server(store: str) -> subprocess.CompletedProcess[str]:
    """A server that is expected to refuse to start: its exit code and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "sessiontodo_server", "--port", str(free_port()), "--store", store],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.process
def test_a_second_server_on_the_same_file_exits_with_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "todos.db"
    with ServerProcess("--store", f"sqlite:///{path}"):
        second = run_server(f"sqlite:///{path}")
    assert second.returncode != 0
    lines = second.stderr.strip().splitlines()
    assert len(lines) == 1, second.stderr
    assert str(path) in lines[0]
    assert "in use by another sessiontodo server" in lines[0]


@pytest.mark.process
def test_a_corrupted_file_is_one_line_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "todos.db"
    path.write_bytes(b"this is not a database, just bytes " * 200)
    result = run_server(f"sqlite:///{path}")
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0]
    assert "Traceback" not in result.stderr


async def test_the_lock_is_released_when_the_server_stops(start: Callable[..., Any], tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    first: RunningServer = await start(store=store)
    await first.stop()
    second: RunningServer = await start(store=store)
    assert await health(second) == health_pb2.HealthCheckResponse.SERVING

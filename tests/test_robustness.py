"""The watch contract and durability under faults, checked by the etcd-style validators:
the sqlite server killed with SIGKILL, stopped with SIGTERM, and restarted under load; and
attacks: an HTTP/2 rapid reset flood."""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

import pytest

from fault_run import race_writes_against_expiry, run_through_faults
from sessiontodo_client import ChangeKind, Todo, TodoClient, WatchEvent
from sessiontodo_server.app import MAX_REQUESTS_PER_READ, _server_options
from support import ROOT, ServerProcess, make_settings
from watch_validators import SessionLog, validate


async def test_watchers_and_writes_survive_kill_9_and_sigterm_restarts(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'todos.db'}"
    flags = ("--store", store, "--watch-buffer", "4", "--shutdown-grace", "1")

    async def kill_9_and_restart(server: ServerProcess) -> ServerProcess:
        server.kill()
        return ServerProcess(*flags, port=server.port).start()

    async def sigterm_and_restart(server: ServerProcess) -> ServerProcess:
        assert server.stop() == 0
        return ServerProcess(*flags, port=server.port).start()

    await run_through_faults(
        lambda: ServerProcess(*flags).start(), [kill_9_and_restart, sigterm_and_restart, kill_9_and_restart]
    )


def event(kind: ChangeKind, revision: int, *contents: str, session_id: str = "s") -> WatchEvent:
    todos = [Todo(id=f"t{n}", content=content) for n, content in enumerate(contents)]
    return WatchEvent(session_id=session_id, kind=kind, revision=revision, todos=todos)


def test_the_validators_catch_every_broken_guarantee() -> None:
    log = SessionLog("s", acknowledged={2: (("t0", "s/2"),), 3: (("t0", "s/3"),), 4: (("t0", "s/4"),)})
    log.watchers["good"] = [
        event(ChangeKind.SNAPSHOT, 1),
        event(ChangeKind.RESET, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["gap"] = [
        event(ChangeKind.SNAPSHOT, 1),
        event(ChangeKind.TODOS_REPLACED, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["twice"] = [
        event(ChangeKind.SNAPSHOT, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["foreign"] = [
        event(ChangeKind.SNAPSHOT, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "other/4", session_id="other"),
    ]
    log.watchers["torn"] = [event(ChangeKind.SNAPSHOT, 3, "s/3"), event(ChangeKind.TODOS_REPLACED, 4, "s/4", "s/extra")]
    log.watchers["behind"] = [event(ChangeKind.SNAPSHOT, 1), event(ChangeKind.TODOS_REPLACED, 2, "s/2")]
    problems = validate(log, final_revision=4)
    culprits = {problem.split(":")[0].removeprefix("s/") for problem in problems}
    assert culprits == {"gap", "twice", "foreign", "torn", "behind"}, problems


async def _median_ms(client: TodoClient, calls: int) -> float:
    """Median latency of ``calls`` reads one after the other (reported, never asserted)."""
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        await client.get_todos("s")
        took.append(time.perf_counter() - started)
    return statistics.median(took) * 1000


async def test_a_rapid_reset_flood_on_one_connection_leaves_other_clients_served(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """HEADERS then RST_STREAM in a loop (bounded: 8 s, 200,000 resets) from another process;
    a client on its own connection is answered throughout. Medians go to the output."""
    with ServerProcess("--store", "memory://") as server:
        async with TodoClient.connect(server.address) as client:
            await client.create_session("s")
            await client.replace_todos("s", [Todo(content="x")])
            before = await _median_ms(client, 200)
            attack = await asyncio.create_subprocess_exec(
                sys.executable,
                str(ROOT / "tests" / "rapid_reset.py"),
                str(server.port),
                "8",
                "200000",
                stdout=asyncio.subprocess.PIPE,
            )
            during = await _median_ms(client, 200)
            seen = json.loads((await attack.communicate())[0])
            after = await _median_ms(client, 200)
            served = await client.get_todos("s")
    with capsys.disabled():
        medians = f"{before:.2f} ms before, {during:.2f} during, {after:.2f} after"
        print(f"\nrapid reset: {seen}; the other client's median read: {medians}")
    assert seen["resets"] > 0
    assert [t.content for t in served.todos] == ["x"]


def test_the_server_turns_on_grpc_cores_rapid_reset_protections() -> None:
    options = dict(_server_options(make_settings(), 100))

    assert options["grpc.http2.max_requests_per_read"] == MAX_REQUESTS_PER_READ < 32
    assert options["grpc.http.overload_protection"] == 1
    assert options["grpc.http2.ping_on_rst_stream_percent"] == 100


@pytest.mark.parametrize("store", ["memory", "sqlite-process", "sqlite-fsync"])
async def test_a_fast_expiry_sweep_never_erases_an_acknowledged_write(store: str, tmp_path: Path) -> None:
    flags = {
        "memory": ("--store", "memory://"),
        "sqlite-process": ("--store", f"sqlite:///{tmp_path / 'todos.db'}"),
        "sqlite-fsync": ("--store", f"sqlite:///{tmp_path / 'todos.db'}", "--durability", "fsync"),
    }[store]
    with ServerProcess(*flags, "--expiry-interval", "0.005") as server:
        erased = await race_writes_against_expiry(server.address)
    assert not erased, "\n".join(erased)

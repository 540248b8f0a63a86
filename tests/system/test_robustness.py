"""The watch contract and durability under faults, checked by the etcd-style validators:
the sqlite server killed with SIGKILL, stopped with SIGTERM, and restarted under load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import ServerProcess
from tests.support.fault_run import run_through_faults

pytestmark = [pytest.mark.slow, pytest.mark.process]


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

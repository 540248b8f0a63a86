"""Five ways in, six ways out, one session, interleaved writers: the ordering and convergence rules.

Every way out shows lists in revision order (never an older list after a newer one), shows only
lists the session went through, and ends on the last acknowledged write, also after sessiontodo
restarts; the streams miss no write. No timing is asserted (``make bench``, figure 17, measures it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support import ServerProcess, free_port
from tests.support.ways import STREAMS, WAYS_IN, WAYS_OUT, run_matrix, score

pytestmark = [pytest.mark.process, pytest.mark.peer]


@pytest.mark.timeout(600)
async def test_interleaved_writers_through_every_way_in_end_on_the_last_write_on_every_way_out_in_order(
    tmp_path: Path,
) -> None:
    with ServerProcess("--store", f"sqlite:///{tmp_path / 'todos.db'}", port=free_port()) as service:

        async def restart() -> None:
            await asyncio.to_thread(service.stop)
            await asyncio.to_thread(service.start)

        matrix = await run_matrix(service.address, tmp_path, writes=4, gap=0.02, interleaved=True, restart=restart)
    result = score(matrix)

    assert result.writes == dict.fromkeys(WAYS_IN, 4)
    assert result.converged == dict.fromkeys(WAYS_OUT, True), "every way out ends on the last acknowledged write"
    assert result.out_of_order == dict.fromkeys(WAYS_OUT, 0)
    assert result.wrong == dict.fromkeys(WAYS_OUT, 0)
    assert {way: count for way, count in result.undone.items() if way != "sidecar"} == dict.fromkeys(
        ("grpc", "mcp", "acp", "web"), 0
    ), "no write but OpenCode's full replace undoes an acknowledged write"
    assert {cell: count for cell, count in result.missing.items() if cell[1] in STREAMS and count} == {}
    assert [out for out, latency in result.after_restart.items() if latency is None] == [], "all shown after a restart"

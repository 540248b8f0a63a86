"""Figure 17: one session, five ways in, six ways out (bench/run.py calls ``measure_ways``).

Writes go in through gRPC, MCP, the OpenCode sidecar, an ACP agent behind the proxy and the web
board; ``WatchTodos``, ``WatchChanges``, the sidecar's ``/event``, the board's SSE, an MCP resource
subscription and an ACP editor all observe the same session (``tests/support/ways.py``, shared with
the system test that asserts the rules). Once with one way in after another, once with all five
writing at once, then the first write after sessiontodo restarts (timed from the restarted server
serving again: the gateways' reconnections included). For each pair: the time from a write's
acknowledgement to that way out showing that exact list (negative: shown before the writer had its
answer, as the sidecar and the board answer once their feed delivered the write), and how many
lists were missed, shown out of order or never written.

Every latency is compared with ``WatchTodos``'s for gRPC writes in the same run; the counts with
the number of writes (target: none).

    python bench/ways.py --writes 20     # this figure alone, with the whole 5 x 6 matrix printed
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

from processes import ROOT, CpuPlan, ServerProcess, pinned
from report import Row, median, percentile

sys.path.append(str(ROOT))  # the harness shared with the system test
from tests.support.ways import STREAMS, WAYS_IN, WAYS_OUT, Score, run_matrix, score

FIGURE = "17. ways in and out"
MODES = ("sequential", "interleaved")


async def measure_ways(
    writes: int, gap: float, cpus: set[int], scratch: Path, modes: tuple[str, ...] = MODES
) -> dict[str, Any]:
    """The runs of ``modes`` (the interleaved one followed by a restart of sessiontodo), scored."""
    results: dict[str, Any] = {}
    for mode in modes:
        folder = scratch / f"ways-{mode}"
        folder.mkdir()
        server = ServerProcess.sessiontodo(f"ways-{mode}", f"sqlite:///{folder / 'todos.db'}", cpus, folder)
        await server.start()

        async def restart(server: ServerProcess = server) -> None:
            await server.stop()
            await server.start()

        try:
            matrix = await run_matrix(
                server.address,
                folder,
                writes=writes,
                gap=gap,
                interleaved=mode == "interleaved",
                command=lambda argv: pinned(cpus, argv),
                restart=restart if mode == "interleaved" else None,
            )
        finally:
            await server.stop()
        results[mode] = {"score": score(matrix), "conflicts": matrix.conflicts}
    return results


def _or_nan(value: float | None) -> float:
    """A latency never measured (the way out never showed the write) is not a number: the row says so."""
    return float("nan") if value is None else value


def _p(values: list[float], fraction: float) -> float:
    return percentile(values, fraction) if values else 0.0


def ways_rows(results: dict[str, Any]) -> list[Row]:
    baseline_score: Score = next(iter(results.values()))["score"]
    baseline = _p(baseline_score.latencies[("grpc", "WatchTodos")], 0.99)
    rows: list[Row] = []
    for mode in results:
        result: Score = results[mode]["score"]
        total = sum(result.writes.values())
        for out in WAYS_OUT:
            worst = max((_p(result.latencies[(way, out)], 0.99) for way in WAYS_IN), default=0.0)
            rows.append(
                Row(
                    FIGURE,
                    f"{mode}: p99 write acknowledged -> {out} shows it, worst way in",
                    worst,
                    "ms",
                    baseline,
                    "gRPC -> WatchTodos p99",
                )
            )
        counts = (
            ("lists missed by the four streams", sum(result.missing[(w, o)] for w in WAYS_IN for o in STREAMS), 4),
            ("lists shown out of order, every way out", sum(result.out_of_order.values()), len(WAYS_OUT)),
            ("lists shown that no write made", sum(result.wrong.values()), len(WAYS_OUT)),
            (
                "writes that undid another's (all but the sidecar's full replace)",
                sum(count for way, count in result.undone.items() if way != "sidecar"),
                1,
            ),
        )
        for measure, value, per_write in counts:
            rows.append(Row(FIGURE, f"{mode}: {measure}", value, "", total * per_write, "writes", ("<=", 0.0)))
        rows.append(
            Row(
                FIGURE,
                f"{mode}: ways out not ending on the last write",
                sum(not ok for ok in result.converged.values()),
                "",
                len(WAYS_OUT),
                "ways out",
                ("<=", 0.0),
            )
        )
    restarted: Score = results["interleaved"]["score"]
    shown = [latency for latency in restarted.after_restart.values() if latency is not None]
    rows.append(
        Row(
            FIGURE,
            "after a restart: sessiontodo serving again -> the ACP editor shows the first write",
            _or_nan(restarted.after_restart["ACP editor"]),
            "ms",
            _or_nan(restarted.after_restart["WatchTodos"]),
            "-> WatchTodos",
        )
    )
    rows.append(
        Row(
            FIGURE,
            "after a restart: ways out that never showed the write",
            len(WAYS_OUT) - len(shown),
            "",
            len(WAYS_OUT),
            "ways out",
            ("<=", 0.0),
        )
    )
    return rows


def matrix_table(results: dict[str, Any]) -> str:
    """Every cell: p50 / p99 ms, and missed lists where any (the MCP subscription and the ACP editor skip a
    list a newer one overtook)."""
    lines = []
    for mode in results:
        result: Score = results[mode]["score"]
        lines += [
            f"\n{mode} (board conflicts: {results[mode]['conflicts']})\n",
            "| way in \\ way out | " + " | ".join(WAYS_OUT) + " |",
            "|---" * (len(WAYS_OUT) + 1) + "|",
        ]
        for way in WAYS_IN:
            cells = []
            for out in WAYS_OUT:
                values = result.latencies[(way, out)]
                cell = f"{median(values):.1f} / {_p(values, 0.99):.1f}" if values else "-"
                if result.missing[(way, out)]:
                    cell += f" ({result.missing[(way, out)]} skipped)"
                cells.append(cell)
            lines.append(f"| {way} | " + " | ".join(cells) + " |")
    restarted: Score = results["interleaved"]["score"]
    lines.append(
        "\nafter a restart, ms: "
        + ", ".join(
            f"{out} {latency:.0f}" if latency is not None else f"{out} never"
            for out, latency in restarted.after_restart.items()
        )
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=20, help="writes per way in, per run")
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between a way in's writes")
    arguments = parser.parse_args()
    cpus = CpuPlan.of_this_machine()
    with tempfile.TemporaryDirectory(prefix="sessiontodo-bench-ways-") as scratch:
        results = asyncio.run(measure_ways(arguments.writes, arguments.gap, cpus.server, Path(scratch)))
    for row in ways_rows(results):
        print(f"{row.measure}: {row.value:.1f} {row.unit} (baseline {row.baseline:.1f}: {row.ratio})")
    print(matrix_table(results))


if __name__ == "__main__":
    main()

"""``make bench`` in quick mode: the harness runs end to end and reports every figure.

Timings are never asserted here (they belong to ``make bench`` itself): only that each
figure is measured, compared with its baseline, and written out as table, JSON and plot.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.peer, pytest.mark.process]

FIGURES = (
    "1. write throughput",
    "2. isolation",
    "3. fan-out",
    "4. memory",
    "5. list size",
    "6. replicas",
    "7. opencode sidecar",
    "8. redis",
    "9. vs etcd",
    "10. durability",
    "11. event loop",
    "12. big lists",
    "13. web board",
    "14. etcd store",
    "15. batched writes",
    "16. task graphs",
    "17. ways in and out",
    "18. claude code",
)
UNTARGETED = {"9. vs etcd", "11. event loop", "14. etcd store", "18. claude code"}
"""Figures reported as ratios without a target."""


@pytest.mark.timeout(300)
def test_a_quick_bench_run_reports_every_figure_against_its_baseline(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, f"stdout:\n{run.stdout}\nstderr:\n{run.stderr}"

    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert {row["figure"] for row in rows} == set(FIGURES)
    assert all(math.isfinite(row["value"]) for row in rows)
    targeted = [row for row in rows if row["target"] is not None]
    assert {row["figure"] for row in targeted} == set(FIGURES) - UNTARGETED
    assert all(row["baseline"] for row in rows if row["figure"] in UNTARGETED)
    assert all(row["baseline"] for row in targeted)
    assert all(row["met"] is not None for row in targeted)
    table = (tmp_path / "results.md").read_text()
    assert all(f"| {figure} |" in table for figure in FIGURES)
    assert table.split("| figure |", 1)[1] in run.stdout  # the same table is printed
    assert (tmp_path / "bench.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")

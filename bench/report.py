"""Rows of figures, the markdown table, the machine description and the PNG plot."""

from __future__ import annotations

import operator
import os
import platform
import shutil
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

_COMPARISONS = {">=": operator.ge, "<=": operator.le}


@dataclass(frozen=True)
class Row:
    """One measured figure, with the baseline it is compared to and the target on their ratio."""

    figure: str
    measure: str
    value: float
    unit: str
    baseline: float | None = None
    baseline_name: str = ""
    target: tuple[str, float] | None = None
    """(">=" or "<=", threshold) on ``ratio``."""

    @property
    def ratio(self) -> float | None:
        return None if not self.baseline else self.value / self.baseline

    @property
    def met(self) -> bool | None:
        if self.target is None or self.ratio is None:
            return None
        comparison, threshold = self.target
        return _COMPARISONS[comparison](self.ratio, threshold)

    def as_json(self) -> dict[str, Any]:
        return {
            "figure": self.figure,
            "measure": self.measure,
            "value": self.value,
            "unit": self.unit,
            "baseline": self.baseline,
            "baseline_name": self.baseline_name,
            "ratio": self.ratio,
            "target": None if self.target is None else f"{self.target[0]} {self.target[1]}x",
            "met": self.met,
        }


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered) + 0.5) - 1))]


def number(value: float) -> str:
    """A figure as the tables print it: three significant digits or so, thousands separated."""
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def markdown_table(rows: Sequence[Row]) -> str:
    lines = [
        "| figure | measure | sessiontodo | baseline | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for row in rows:
        baseline = f"{number(row.baseline)} {row.unit} ({row.baseline_name})" if row.baseline else ""
        ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
        target = f"{row.target[0]} {row.target[1]:g}x" if row.target else ""
        met = {True: "yes", False: "**no**", None: ""}[row.met]
        value = f"{number(row.value)} {row.unit}"
        lines.append(f"| {row.figure} | {row.measure} | {value} | {baseline} | {ratio} | {target} | {met} |")
    return "\n".join(lines)


def machine() -> dict[str, str]:
    """What the figures were measured on: they only compare within one run on one machine."""
    model = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    h2load_version = ""
    if h2load := shutil.which("h2load"):
        h2load_version = subprocess.run([h2load, "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "cpu": model,
        "cores": str(os.cpu_count()),
        "memory": f"{_total_memory_gib():.0f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "grpcio": grpc.__version__,
        "load generator": h2load_version,
    }


def _total_memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) / 1024 / 1024
    return 0.0


def plot(results: dict[str, Any], path: Path) -> None:
    """Latency vs sessions, throughput vs the echo baseline, fan-out delivery vs watchers, and
    (when etcd was measured) each server's figures as ratios to etcd's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    versus = results.get("versus_etcd")
    figure, panels = plt.subplots(1, 4 if versus else 3, figsize=(23 if versus else 17, 5))
    latency, throughput, fanout = panels[:3]

    isolation = results["isolation"]
    latency.plot(isolation["sessions"], isolation["p50_ms"], "o-", label="p50")
    latency.plot(isolation["sessions"], isolation["p99_ms"], "s--", label="p99")
    latency.set_xscale("log")
    latency.set_ylim(bottom=0)
    latency.set_xlabel("sessions, each with one idle watcher")
    latency.set_ylabel("write-to-watcher latency (ms)")
    latency.set_title("Isolation: latency vs number of sessions")
    latency.legend()

    rates = results["throughput"]
    operations = list(rates)
    subjects = list(next(iter(rates.values())))
    width = 0.8 / len(subjects)
    for index, subject in enumerate(subjects):
        positions = [position + index * width for position in range(len(operations))]
        throughput.bar(positions, [rates[operation][subject] for operation in operations], width, label=subject)
    throughput.set_xticks([position + width * (len(subjects) - 1) / 2 for position in range(len(operations))])
    throughput.set_xticklabels(operations, rotation=15, fontsize=8)
    throughput.set_ylabel("requests per second (h2load)")
    throughput.set_title("Unary throughput vs bare echo server")
    throughput.legend()

    delivery = results["fanout"]
    for subject, values in delivery["rates"].items():
        fanout.plot(delivery["watchers"], values, "o-", label=subject)
    fanout.set_xscale("log")
    fanout.set_ylim(bottom=0)
    fanout.set_xlabel("watchers of one session")
    fanout.set_ylabel("watcher-messages per second")
    fanout.set_title("Fan-out delivery rate")
    fanout.legend()

    if versus:
        _plot_versus(panels[3], versus["ratios"])

    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _plot_versus(axes: Any, ratios: dict[str, dict[str, float]]) -> None:
    """Grouped bars: for each measure, each server's value divided by etcd's (1 = etcd)."""
    names = list(ratios)
    measures = list(next(iter(ratios.values())))
    width = 0.8 / len(names)
    for index, name in enumerate(names):
        positions = [position + index * width for position in range(len(measures))]
        axes.bar(positions, [ratios[name].get(measure, 0) for measure in measures], width, label=name)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks([position + width * (len(names) - 1) / 2 for position in range(len(measures))])
    axes.set_xticklabels(measures, rotation=20, fontsize=8)
    axes.set_yscale("log")
    axes.set_ylabel("ratio to etcd (log; writes/s: higher is better, others: lower)")
    axes.set_title("Against etcd 3.4, same run, same core")
    axes.legend(fontsize=8)

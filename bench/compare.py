"""``make bench-compare BASE=<git ref>``: this checkout against another commit, in one run.

The other commit is built on its own: its tree (``git archive``) in a temporary folder, its own
virtualenv with its own ``pip install`` (from the configured index) and its protobuf code
generated there. Then the same loads run against this checkout's servers, the base's and the
bare ``grpc.aio`` echo (``echo_server.py``, the floor), all pinned to one core with h2load on the
other, in alternating rounds (each round in a rotated order, so the machine's drift hits every
server alike), and the ratios are printed:

- throughput: ReplaceTodos (10 todos) from h2load, 4 connections x 16 calls in flight;
- server CPU per write: the server's utime + stime from ``/proc/<pid>/stat`` over that run;
- write-to-watch p50: one writer and one watcher of one session, one write at a time.

Each store (memory, sqlite) is compared separately; every figure is the median over rounds of
the within-round ratio.

    python bench/compare.py 659bc10                     # this checkout against 0.1
    python bench/compare.py HEAD~1 --rounds 8           # a change against the commit before it
    python bench/compare.py 7aa28d6 --keep /tmp/builds  # reuse the base's build on later runs
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from loadgen import require_h2load
from processes import ROOT, Build, CpuPlan, ServerProcess
from report import median, number
from throughput import rotated
from versus import SessiontodoContender, sessiontodo_contender, write_run

IN_FLIGHT = 64
STORES = {"memory": "memory://", "sqlite": "sqlite:///{scratch}/{name}.db"}
FLOOR = "echo"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(argv: Sequence[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return done.stdout


def build(ref: str, into: Path) -> Build:
    """``ref`` built in ``into``: its tree, a virtualenv with it installed, its protobuf code.
    A folder that already holds this commit's build is reused."""
    commit = _run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"]).strip()
    home = into / commit[:12]
    source, venv = home / "src", home / "venv"
    python = venv / "bin" / "python"
    if (home / "built").exists():
        return Build(source, python)
    shutil.rmtree(home, ignore_errors=True)
    source.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive, check=True)
    _run([sys.executable, "-m", "venv", str(venv)])
    tools = importlib.metadata.version("grpcio-tools")  # the generator this checkout uses
    _run([str(python), "-m", "pip", "install", "--quiet", "-e", str(source), f"grpcio-tools=={tools}"])
    protos = sorted(str(path) for path in (source / "protos").glob("sessiontodo/v1/*.proto"))
    out = f"{source}/protos"
    generate = [str(python), "-m", "grpc_tools.protoc", f"-I{out}", f"--python_out={out}", f"--grpc_python_out={out}"]
    _run([*generate, *protos])
    (home / "built").touch()
    return Build(source, python)


@dataclass
class Figures:
    """Per server name: one rate, CPU per write and write-to-watch p50 per round."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    p50_ms: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, rate: float, cpu_us: float, p50_ms: float) -> None:
        self.rates.setdefault(name, []).append(rate)
        self.cpu_us.setdefault(name, []).append(cpu_us)
        self.p50_ms.setdefault(name, []).append(p50_ms)


def ratio(by_name: dict[str, list[float]], name: str, other: str) -> float:
    """The median over rounds of the within-round ratio."""
    return median([mine / theirs for mine, theirs in zip(by_name[name], by_name[other], strict=True)])


async def measure(
    contenders: Sequence[SessiontodoContender], rounds: int, seconds: float, samples: int, cpus: set[int]
) -> Figures:
    figures = Figures()
    for round_ in range(rounds):
        for contender in rotated(contenders, round_):
            run = await write_run(contender, IN_FLIGHT, seconds, cpus)
            latencies = await contender.watch_latencies(await contender.fresh_key("latency"), samples)
            figures.add(contender.name, run.rate, run.cpu_us, median(latencies) * 1e3)
        progress(f"round {round_ + 1} of {rounds} done")
    return figures


def table(figures: Figures, store: str, head: str, base: str) -> list[str]:
    lines = []
    for measure, by_name, unit in (
        ("ReplaceTodos(10) throughput", figures.rates, "req/s"),
        ("server CPU per write", figures.cpu_us, "µs"),
        ("write-to-watch p50", figures.p50_ms, "ms"),
    ):
        values = " | ".join(f"{number(median(by_name[name]))} {unit}" for name in (head, base, FLOOR))
        lines.append(
            f"| {store} | {measure} | {values} | {ratio(by_name, head, base):.2f}x"
            f" | {ratio(by_name, head, FLOOR):.2f}x | {ratio(by_name, base, FLOOR):.2f}x |"
        )
    return lines


async def compare(
    base: Build, base_name: str, stores: Sequence[str], rounds: int, seconds: float, samples: int, scratch: Path
) -> list[str]:
    cpus = CpuPlan.of_this_machine()
    os.sched_setaffinity(0, cpus.load)
    lines = [
        f"| store | measure | this checkout | {base_name} | echo | this / {base_name} | this / echo"
        f" | {base_name} / echo |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for store in stores:
        url = STORES[store]
        servers = [
            ServerProcess.echo(FLOOR, cpus.server, scratch),
            ServerProcess.sessiontodo("head", url.format(scratch=scratch, name="head"), cpus.server, scratch),
            ServerProcess.sessiontodo(
                "base", url.format(scratch=scratch, name="base"), cpus.server, scratch, build=base
            ),
        ]
        contenders = []
        try:
            for server in servers:
                await server.start()
                contenders.append(sessiontodo_contender(server))
            progress(f"{store}: {rounds} rounds of this checkout, {base_name} and the echo")
            figures = await measure(contenders, rounds, seconds, samples, cpus.load)
        finally:
            for contender in contenders:
                await contender.close()
            for server in servers:
                await server.stop()
        lines += table(figures, store, "head", "base")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description="This checkout against another commit, in one run.")
    parser.add_argument("base", help="a git ref: a commit, tag or branch")
    parser.add_argument("--stores", default="memory,sqlite", help="comma-separated: memory, sqlite")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=2.0, help="length of each h2load run")
    parser.add_argument("--samples", type=int, default=200, help="write-to-watch samples per round")
    parser.add_argument("--keep", type=Path, help="build the base here and keep it (default: a temporary folder)")
    arguments = parser.parse_args()
    require_h2load()
    stores = [store for store in arguments.stores.split(",") if store]
    if unknown := set(stores) - STORES.keys():
        parser.error(f"unknown stores: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as temporary:
        scratch = Path(temporary)
        progress(f"building {arguments.base} in its own virtualenv")
        base = build(arguments.base, arguments.keep or scratch / "builds")
        lines = asyncio.run(
            compare(base, arguments.base, stores, arguments.rounds, arguments.seconds, arguments.samples, scratch)
        )
    print("\n".join(lines))


if __name__ == "__main__":
    main()

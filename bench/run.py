"""``make bench``: measure the server against a bare grpc.aio echo server and against etcd, print a
markdown table, and write it (with the raw numbers and a PNG plot) to ``bench/results/``.

Servers run in their own processes pinned to one CPU; h2load and the watcher processes run
on the others. Absolute numbers drift on shared machines, so each figure is compared with a
baseline measured in the same run, interleaved, and the targets are on the ratios.

    python bench/run.py               # the full run (a few minutes)
    python bench/run.py --quick       # tiny sizes, well under a minute (also: BENCH_QUICK=1);
                                      # written to a fresh temporary folder, never over bench/results/
    python bench/run.py --out DIR     # write the results somewhere else
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc

from batching import batching_rows, measure_batching
from big_lists import big_list_isolation_rows, measure_big_list_isolation
from claude_code import claude_cli_available, claude_code_rows, measure_claude_code
from etcd import EtcdProcess, etcd_binary
from etcd_store import etcd_store_rows, measure_etcd_store
from graphs import measure_graphs
from loadgen import require_h2load
from memory import (
    MemoryResult,
    big_list_rows,
    churn,
    feed_rows,
    feed_versus_watches,
    memory_rows,
    per_bare_stream,
    per_mib_change,
    per_session_and_watcher,
)
from opencode import measure_opencode, opencode_rows
from processes import BENCH, CpuPlan, ServerProcess
from redis_store import measure_processes, measure_store_against_floor, redis_rows
from replicas import measure_cross_replica_latency
from report import Row, machine, markdown_table, median, plot
from throughput import OPERATIONS, Target, measure_list_sizes, measure_operations, scaling_rows, throughput_rows
from versus import (
    ON_ASYNCIO,
    Contender,
    EtcdContender,
    durability_rows,
    event_loop_rows,
    measure_versus,
    sessiontodo_contender,
    versus_rows,
)
from versus import plotted as versus_plotted
from watching import fanout_rows, isolation_rows, measure_fanout, measure_isolation
from ways import MODES, matrix_table, measure_ways, ways_rows
from web import browser_available, measure_web, web_rows


@dataclass(frozen=True)
class Sizes:
    rounds: int
    seconds: float
    adds_per_session: int
    list_sizes: tuple[int, ...]
    list_rounds: int
    list_seconds: float
    session_counts: tuple[int, ...]
    latency_samples: int
    watcher_counts: tuple[int, ...]
    fanout_rounds: int
    fanout_seconds: float
    reach_samples: int
    memory_sessions: int
    memory_watchers: int
    feed_sessions: int
    churn_sessions: int
    churn_cycles: int
    replica_samples: int
    big_list_writes: int
    big_list_rounds: int
    big_list_samples: int
    opencode_sessions: int
    opencode_samples: int
    claude_samples: int
    web_sessions: int
    web_todos: int
    web_pages: int
    web_samples: int
    web_renders: int
    etcd_store_writers: int
    graph_validations: int
    ways_writes: int


FULL = Sizes(
    rounds=4,
    seconds=3.0,
    adds_per_session=250,
    list_sizes=(1, 10, 100, 1000),
    list_rounds=2,
    list_seconds=2.0,
    session_counts=(1, 100, 1000, 10_000),
    latency_samples=400,
    watcher_counts=(1, 100, 1000),
    fanout_rounds=3,
    fanout_seconds=2.0,
    reach_samples=100,
    memory_sessions=10_000,
    memory_watchers=5000,
    feed_sessions=10_000,
    churn_sessions=100_000,
    churn_cycles=3,
    replica_samples=300,
    big_list_writes=200,
    big_list_rounds=3,
    big_list_samples=200,
    opencode_sessions=10_000,
    opencode_samples=300,
    claude_samples=200,
    web_sessions=1000,
    web_todos=20,
    web_pages=50,
    web_samples=100,
    web_renders=5,
    etcd_store_writers=32,
    graph_validations=300,
    ways_writes=50,
)
QUICK = Sizes(
    rounds=1,
    seconds=0.5,
    adds_per_session=50,
    list_sizes=(1, 10, 100),
    list_rounds=1,
    list_seconds=0.5,
    session_counts=(1, 10, 100),
    latency_samples=20,
    watcher_counts=(1, 10, 50),
    fanout_rounds=1,
    fanout_seconds=0.5,
    reach_samples=10,
    memory_sessions=300,
    memory_watchers=200,
    feed_sessions=200,
    churn_sessions=2000,
    churn_cycles=1,
    replica_samples=20,
    big_list_writes=10,
    big_list_rounds=1,
    big_list_samples=20,
    opencode_sessions=200,
    opencode_samples=20,
    claude_samples=20,
    web_sessions=50,
    web_todos=20,
    web_pages=2,
    web_samples=5,
    web_renders=1,
    etcd_store_writers=8,
    graph_validations=30,
    ways_writes=3,
)

SUBJECTS = ("memory", "sqlite")
BASELINE = "echo"


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


async def _started(servers: Sequence[ServerProcess]) -> list[Target]:
    for server in servers:
        await server.start()
    return [Target(server, grpc.aio.insecure_channel(server.address)) for server in servers]


async def _stopped(targets: Sequence[Target]) -> None:
    for target in targets:
        await target.channel.close()
        await target.server.stop()


async def measure(sizes: Sizes, scratch: Path) -> tuple[list[Row], dict[str, object]]:
    cpus = CpuPlan.of_this_machine()
    os.sched_setaffinity(0, cpus.load)
    figures: dict[int, list[Row]] = {}
    plotted: dict[str, object] = {}

    shared = [
        ServerProcess.echo(BASELINE, cpus.server, scratch),
        ServerProcess.sessiontodo("memory", "memory://", cpus.server, scratch),
        ServerProcess.sessiontodo("sqlite", f"sqlite:///{scratch}/bench.db", cpus.server, scratch),
    ]
    targets = await _started(shared)
    try:
        progress("figure 1: unary throughput (h2load), echo / memory / sqlite interleaved")
        operations = await measure_operations(targets, sizes.rounds, sizes.seconds, sizes.adds_per_session, cpus.load)
        figures[1] = throughput_rows(operations, SUBJECTS, BASELINE)
        plotted["throughput"] = {
            operation: {target.name: operations[operation].rate(target.name) for target in targets}
            for operation in OPERATIONS
        }
        plotted["throughput_rounds"] = {operation: operations[operation].rates for operation in OPERATIONS}
        progress("figure 5: ReplaceTodos cost by list size")
        by_size = await measure_list_sizes(targets, sizes.list_sizes, sizes.list_rounds, sizes.list_seconds, cpus.load)
        figures[5] = scaling_rows(by_size, SUBJECTS, BASELINE)
        plotted["list_size_rounds"] = {size: measured.rates for size, measured in by_size.items()}
        progress("figure 16: task graphs: 64 claimers on one list, ready reads, validating a graph")
        memory_target = next(target for target in targets if target.name == "memory")
        figures[16] = await measure_graphs(
            memory_target, sizes.rounds, sizes.seconds, cpus.load, sizes.graph_validations
        )
        progress("figure 3: fan-out to the watchers of one session")
        fanout = await measure_fanout(
            targets[:2], sizes.watcher_counts, sizes.fanout_rounds, sizes.fanout_seconds, sizes.reach_samples, cpus.load
        )
        figures[3] = fanout_rows(fanout, "memory", BASELINE)
        plotted["fanout"] = {
            "watchers": fanout.watchers,
            "rates": {name: [median(rates[w]) for w in fanout.watchers] for name, rates in fanout.rates.items()},
            "rounds": fanout.rates,
        }
    finally:
        await _stopped(targets)

    progress("figure 2: write-to-watcher latency as sessions with idle watchers grow")
    (isolated,) = await _started([ServerProcess.sessiontodo("isolation", "memory://", cpus.server, scratch)])
    try:
        isolation = await measure_isolation(isolated, sizes.session_counts, sizes.latency_samples, cpus.load)
    finally:
        await _stopped([isolated])
    figures[2] = isolation_rows(isolation)
    plotted["isolation"] = {
        "sessions": isolation.sessions,
        "p50_ms": [isolation.p50_ms(n) for n in isolation.sessions],
        "p99_ms": [isolation.p99_ms(n) for n in isolation.sessions],
    }

    progress("figure 12: reads of a small session while a 1 MB list is edited, memory / sqlite / sqlite-fsync")
    big_list_servers = [
        ServerProcess.sessiontodo("memory", "memory://", cpus.server, scratch),
        ServerProcess.sessiontodo("sqlite", f"sqlite:///{scratch}/big.db", cpus.server, scratch),
        ServerProcess.sessiontodo(
            "sqlite-fsync", f"sqlite:///{scratch}/big-fsync.db", cpus.server, scratch, "--durability", "fsync"
        ),
    ]
    big_list_targets = await _started(big_list_servers)
    try:
        big_lists = await measure_big_list_isolation(big_list_targets, sizes.big_list_rounds, sizes.big_list_samples)
    finally:
        await _stopped(big_list_targets)
    figures[12] = big_list_isolation_rows(big_lists)
    plotted["big_list_isolation"] = asdict(big_lists)

    progress("figure 4: memory per session, per watcher, and after churn")
    per_session, per_watcher = await per_session_and_watcher(
        scratch, sizes.memory_sessions, sizes.memory_watchers, cpus.server, cpus.load
    )
    bare = await per_bare_stream(scratch, sizes.memory_watchers, cpus.server, cpus.load)
    start, peak, after = await churn(scratch, sizes.churn_sessions, sizes.churn_cycles, cpus.server, cpus.load)
    memory = MemoryResult(
        sizes.memory_sessions,
        sizes.memory_watchers,
        per_session,
        per_watcher,
        bare,
        sizes.churn_sessions,
        start,
        peak,
        after,
    )
    progress("figure 4: memory for following every session: one feed vs one watch per session")
    watches, feed = await feed_versus_watches(scratch, sizes.feed_sessions, cpus.server, cpus.load)
    progress("figure 4: RSS per 1 MiB change on a watched session, and after its removal")
    big_list = await per_mib_change(scratch, sizes.big_list_writes, cpus.server, cpus.load)
    figures[4] = memory_rows(memory) + feed_rows(sizes.feed_sessions, watches, feed) + big_list_rows(big_list)
    plotted["memory"] = asdict(memory)
    plotted["feed"] = {"sessions": sizes.feed_sessions, "watches_bytes": watches, "feed_bytes": feed}
    plotted["big_list"] = asdict(big_list)

    progress("figure 7: the OpenCode sidecar: kept-alive requests, /event first byte with many sessions")
    sidecar = await measure_opencode(sizes.opencode_sessions, sizes.opencode_samples, cpus.server, scratch)
    figures[7] = opencode_rows(sidecar)
    plotted["opencode"] = sidecar

    if browser_available():
        progress("figure 13: the web board in chromium: first render, write-to-page p95 with 1 and many pages")
        web = await measure_web(
            sizes.web_sessions,
            sizes.web_todos,
            sizes.web_pages,
            sizes.web_samples,
            sizes.web_renders,
            cpus.server,
            scratch,
        )
        figures[13] = web_rows(web)
        plotted["web"] = web
    else:
        progress("figure 13 skipped: node, playwright-core (npm ci) or chromium is missing")

    if claude_cli_available():
        progress("figure 18: Claude Code's task tool call to the change on a WatchTodos stream (sessiontodo-claude)")
        figures[18] = claude_code_rows(await measure_claude_code(sizes.claude_samples), sizes.claude_samples)
    else:
        progress("figure 18 skipped: the Claude Code CLI is missing (npm ci)")

    progress("figure 15: batched writes: 50 single-todo writes per BatchWrite against unary calls and etcd puts")
    figures[15] = await measure_batched(sizes, scratch, cpus)

    progress("figure 17: one session, five ways in x six ways out, one way after another and all at once")
    ways = await measure_ways(  # quick: all five at once only (the run the rules are about), then the restart
        sizes.ways_writes, 0.05, cpus.server, scratch, modes=MODES if sizes == FULL else ("interleaved",)
    )
    figures[17] = ways_rows(ways)
    plotted["ways"] = matrix_table(ways)

    if etcd_binary():
        progress("figures 9-11: against etcd (throughput, CPU, write-to-watch, fan-out), fsync vs process, event loops")
        rows, ratios = await measure_against_etcd(sizes, scratch, cpus)
        figures[9] = rows
        plotted["versus_etcd"] = ratios
    else:
        progress("figures 9-11 skipped: etcd is not installed (apt-get install etcd-server)")

    if shutil.which("redis-server"):
        progress("figure 6: write-to-watcher latency across replicas sharing one Redis (bench/replicas.py)")
        replicas = await measure_cross_replica_latency(sizes.replica_samples, server_cpus=cpus.server, log_dir=scratch)
        figures[6] = replica_rows(replicas)
        plotted["replicas"] = replicas
        progress("figure 8: the Redis store against a hand-rolled redis-py floor; one and two processes")
        floor = await measure_store_against_floor(
            sizes.replica_samples * 5, sizes.rounds, sizes.replica_samples, server_cpus=cpus.server, log_dir=scratch
        )
        processes = await measure_processes(sizes.seconds, sizes.rounds, load_cpus=cpus.load, log_dir=scratch)
        figures[8] = redis_rows(floor, processes)
        plotted["redis"] = {"store_against_floor": floor, "processes": processes}
    else:
        progress("figures 6 and 8 skipped: redis-server is not installed")

    if etcd_binary() and shutil.which("redis-server"):
        progress("figure 14: the etcd store against raw etcd Puts on one 3-member cluster, and against the Redis store")
        etcd_store = await measure_etcd_store(
            sizes.replica_samples * 5,
            sizes.rounds,
            sizes.replica_samples,
            sizes.etcd_store_writers,
            sizes.seconds,
            server_cpus=cpus.server,
            log_dir=scratch,
        )
        figures[14] = etcd_store_rows(etcd_store)
        plotted["etcd_store"] = etcd_store
    else:
        progress("figure 14 skipped: etcd or redis-server is not installed")
    return [row for figure in sorted(figures) for row in figures[figure]], plotted


VERSUS_SUBJECTS = ("memory", "sqlite", "sqlite-fsync")


async def measure_batched(sizes: Sizes, scratch: Path, cpus: CpuPlan) -> list[Row]:
    targets = await _started(
        [
            ServerProcess.sessiontodo("memory", "memory://", cpus.server, scratch),
            ServerProcess.sessiontodo("sqlite", f"sqlite:///{scratch}/batched.db", cpus.server, scratch),
        ]
    )
    competitor = None
    if etcd_binary():
        competitor = EtcdContender(await EtcdProcess.etcd("etcd-batched", cpus.server, scratch).start())
    try:
        result = await measure_batching(targets, competitor, sizes.rounds, sizes.seconds / 2, cpus.load)
    finally:
        if competitor is not None:
            await competitor.close()
            await competitor.server.stop()
        await _stopped(targets)
    return batching_rows(result, BATCHED_SUBJECTS)


BATCHED_SUBJECTS = ("memory", "sqlite")


async def measure_against_etcd(sizes: Sizes, scratch: Path, cpus: CpuPlan) -> tuple[list[Row], dict[str, object]]:
    servers = [
        ServerProcess.echo(BASELINE, cpus.server, scratch),
        ServerProcess.sessiontodo("memory", "memory://", cpus.server, scratch),
        ServerProcess.sessiontodo("sqlite", f"sqlite:///{scratch}/versus.db", cpus.server, scratch),
        ServerProcess.sessiontodo(
            "sqlite-fsync", f"sqlite:///{scratch}/versus-fsync.db", cpus.server, scratch, "--durability", "fsync"
        ),
        EtcdProcess.etcd("etcd", cpus.server, scratch),
        ServerProcess.echo(BASELINE + ON_ASYNCIO, cpus.server, scratch, "--event-loop", "asyncio"),
        ServerProcess.sessiontodo("memory" + ON_ASYNCIO, "memory://", cpus.server, scratch, "--event-loop", "asyncio"),
    ]
    for server in servers:
        await server.start()
    contenders: list[Contender] = [
        EtcdContender(server) if isinstance(server, EtcdProcess) else sessiontodo_contender(server)
        for server in servers
    ]
    try:
        result = await measure_versus(
            contenders,
            fanned_out=("memory", BASELINE, "etcd"),
            writes_only=(BASELINE + ON_ASYNCIO, "memory" + ON_ASYNCIO),
            rounds=sizes.rounds,
            seconds=sizes.seconds,
            samples=sizes.latency_samples,
            reach_samples=sizes.reach_samples,
            watcher_counts=[count for count in sizes.watcher_counts if count > 1],
            cpus=cpus.load,
        )
    finally:
        for contender in contenders:
            await contender.close()
        for server in servers:
            await server.stop()
    rows = (
        versus_rows(result, VERSUS_SUBJECTS) + durability_rows(result) + event_loop_rows(result, (BASELINE, "memory"))
    )
    return rows, {"ratios": versus_plotted(result, [*VERSUS_SUBJECTS, BASELINE]), "raw": result.as_json()}


def replica_rows(result: dict[str, Any]) -> list[Row]:
    same, cross = result["same_replica"], result["cross_replica"]
    return [
        Row(
            "6. replicas",
            f"write-to-watcher {name}, watcher on another replica (Redis, appendfsync {result['appendfsync']})",
            cross[f"{name}_ms"],
            "ms",
            baseline=same[f"{name}_ms"],
            baseline_name="watcher on the writing replica",
            target=("<=", result["target_p50_ratio"]) if name == "p50" else None,
        )
        for name in ("p50", "p99")
    ]


def write_results(out: Path, rows: list[Row], plotted: dict[str, object], sizes: Sizes, elapsed: float) -> str:
    out.mkdir(parents=True, exist_ok=True)
    described = machine()
    table = markdown_table(rows)
    missed = [row for row in rows if row.met is False]
    lines = [
        "# sessiontodo benchmark results",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M %Z')} in {elapsed:.0f} s"
        + (" (quick mode: tiny sizes, not figures to quote)" if sizes != FULL else "")
        + ".",
        "",
        *(f"- {key}: {value}" for key, value in described.items()),
        "",
        table,
        "",
        f"Targets met: {sum(row.met is True for row in rows)} of {sum(row.met is not None for row in rows)}"
        + (f"; missed: {', '.join(row.measure for row in missed)}." if missed else "."),
        "",
    ]
    (out / "results.md").write_text("\n".join(lines))
    raw = {"machine": described, "sizes": asdict(sizes), "rows": [row.as_json() for row in rows], "plotted": plotted}
    (out / "results.json").write_text(json.dumps(raw, indent=2) + "\n")
    plot(plotted, out / "bench.png")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description="Benchmark sessiontodo against a bare grpc.aio echo server.")
    parser.add_argument("--quick", action="store_true", default=os.environ.get("BENCH_QUICK") == "1")
    parser.add_argument("--out", type=Path, help="default: bench/results/ (quick runs: a new temporary folder)")
    arguments = parser.parse_args()
    require_h2load()
    sizes = QUICK if arguments.quick else FULL
    # Quick figures are not figures to quote: they never overwrite the committed results.
    out = arguments.out or (
        Path(tempfile.mkdtemp(prefix="sessiontodo-bench-quick-")) if arguments.quick else BENCH / "results"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sessiontodo-bench-") as scratch:
        rows, plotted = asyncio.run(measure(sizes, Path(scratch)))
    print(write_results(out, rows, plotted, sizes, time.monotonic() - started))
    print(f"\nwritten to {out}/", file=sys.stderr)


if __name__ == "__main__":
    main()

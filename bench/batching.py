"""Figure 15: batched writes. One BatchWrite of 50 single-todo writes (a ReplaceTodos of one todo
to each of 50 sessions) against 50 unary ReplaceTodos calls, and against etcd's KV/Put of the
same single-todo write, in alternating rounds with h2load at 64 calls in flight.

A unary Python gRPC call costs the server 3-5x a whole etcd write however lean the service is
(figure 9): only amortising the per-call cost over many writes can reach etcd. Every write is a
real change (todos without ids get new ones on every call), and every run is checked against
the sessions' revisions, which must move once per write.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

import etcd
from loadgen import grpc_body, h2load
from report import Row, median
from sessiontodo.v1 import todo_service_pb2 as pb
from throughput import Target, rotated, todo_list
from versus import EtcdContender

BATCH = 50
"""Single-todo writes per BatchWrite."""
IN_FLIGHT = 64
WRITES_TARGET = 5.0
"""Batched writes a second at least this many times the unary calls'."""
CPU_TARGET = 1.5
"""Server CPU per batched write at most this many times etcd's per Put."""


@dataclass(frozen=True)
class Run:
    writes_per_second: float
    cpu_us: float
    """Server CPU time per write, microseconds."""


async def _sessions(target: Target, prefix: str, count: int) -> list[str]:
    return [await target.fresh_session(prefix, todos=1) for _ in range(count)]


async def _revisions(target: Target, session_ids: Sequence[str]) -> int:
    return sum([await target.revision(session_id) for session_id in session_ids])


async def _measured(target: Target, method: str, body: bytes, session_ids: list[str], writes_per_call: int,
                    seconds: float, cpus: set[int]) -> Run:  # fmt: skip
    await target.channel.unary_unary(f"/sessiontodo.v1.TodoService/{method}")(body[5:], timeout=10)
    before, cpu_before = await _revisions(target, session_ids), target.server.cpu_seconds()
    result = await h2load(target.server.address, method, body, cpus=cpus, duration=seconds, clients=4, streams=16)
    cpu = target.server.cpu_seconds() - cpu_before
    writes = result.succeeded * writes_per_call
    changed = await _revisions(target, session_ids) - before
    if not writes <= changed <= writes + IN_FLIGHT * writes_per_call:
        raise RuntimeError(f"{target.name}: h2load counted {writes} writes but the revisions moved {changed}")
    for session_id in session_ids:
        await target.remove(session_id)
    return Run(writes / result.seconds, cpu / writes * 1e6)


async def unary_run(target: Target, seconds: float, cpus: set[int]) -> Run:
    (session_id,) = await _sessions(target, "unary", 1)
    body = grpc_body(pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(1)))
    return await _measured(target, "ReplaceTodos", body, [session_id], 1, seconds, cpus)


async def batch_run(target: Target, seconds: float, cpus: set[int]) -> Run:
    session_ids = await _sessions(target, "batched", BATCH)
    writes = [
        pb.Write(replace_todos=pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(1)))
        for session_id in session_ids
    ]
    body = grpc_body(pb.BatchWriteRequest(writes=writes))
    return await _measured(target, "BatchWrite", body, session_ids, BATCH, seconds, cpus)


async def etcd_run(contender: EtcdContender, seconds: float, cpus: set[int]) -> Run:
    """etcd's KV/Put of the same single-todo write (a one-todo ReplaceTodos request as the value)."""
    key = await contender.fresh_key("batching")
    value = pb.ReplaceTodosRequest(session_id=key, todos=todo_list(1)).SerializeToString()
    body = grpc_body(etcd.PutRequest(key=key.encode(), value=value))
    await contender.check("/etcdserverpb.KV", "Put", body)
    before, cpu_before = await contender.revision(key), contender.server.cpu_seconds()
    result = await h2load(
        contender.server.address, "Put", body, cpus=cpus, duration=seconds, clients=4, streams=16,
        service="/etcdserverpb.KV",
    )  # fmt: skip
    cpu = contender.server.cpu_seconds() - cpu_before
    changed = await contender.revision(key) - before
    if not result.succeeded <= changed <= result.succeeded + IN_FLIGHT:
        raise RuntimeError(f"etcd: h2load counted {result.succeeded} puts but the revision moved {changed}")
    return Run(result.rate, cpu / result.succeeded * 1e6)


@dataclass
class Batching:
    """Runs by name ("memory unary", "memory batched", ..., "etcd"), one per round."""

    runs: dict[str, list[Run]] = field(default_factory=dict)

    def add(self, name: str, run: Run) -> None:
        self.runs.setdefault(name, []).append(run)

    def ratio(self, name: str, other: str, measure: str) -> float:
        """The median over rounds of the within-round ratio of ``measure``."""
        pairs = zip(self.runs[name], self.runs[other], strict=True)
        return median([getattr(mine, measure) / getattr(theirs, measure) for mine, theirs in pairs])

    def value(self, name: str, measure: str) -> float:
        return median([getattr(run, measure) for run in self.runs[name]])


async def measure_batching(
    targets: Sequence[Target], competitor: EtcdContender | None, rounds: int, seconds: float, cpus: set[int]
) -> Batching:
    result = Batching()
    for round_ in range(rounds):
        for target in rotated(targets, round_):
            result.add(f"{target.name} unary", await unary_run(target, seconds, cpus))
            result.add(f"{target.name} batched", await batch_run(target, seconds, cpus))
        if competitor is not None:
            result.add("etcd", await etcd_run(competitor, seconds, cpus))
    return result


def batching_rows(result: Batching, subjects: Sequence[str]) -> list[Row]:
    rows = []
    for subject in subjects:
        batched, unary = f"{subject} batched", f"{subject} unary"
        rows.append(
            Row(
                "15. batched writes",
                f"writes/s, {BATCH} single-todo writes per BatchWrite, {subject} store",
                result.value(batched, "writes_per_second"),
                "writes/s",
                baseline=result.value(batched, "writes_per_second") / result.ratio(batched, unary, "writes_per_second"),
                baseline_name="unary ReplaceTodos of one todo, same rounds",
                target=(">=", WRITES_TARGET),
            )
        )
        for name, against in itertools.product((batched, unary), ("etcd",) if "etcd" in result.runs else ()):
            rows.append(
                Row(
                    "15. batched writes",
                    f"server CPU per write, {name.replace(subject, subject + ' store,')}",
                    result.value(name, "cpu_us"),
                    "µs",
                    baseline=result.value(name, "cpu_us") / result.ratio(name, against, "cpu_us"),
                    baseline_name="etcd KV/Put of the same write, same rounds",
                    target=("<=", CPU_TARGET) if name == batched else None,
                )
            )
    return rows

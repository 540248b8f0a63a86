"""Figures 1 and 5: unary request rates under h2load, each subject interleaved with the echo baseline.

Every round measures every subject once per operation, in a rotating order, so the
machine's drift hits the baseline and the subjects alike; ratios are taken within a round
and the median over rounds is reported.

h2load sends one fixed body, so each operation is shaped to make every call a real change:
ReplaceTodos lists carry no todo ids (each call generates new ones, so no list equals the
last); AddTodo runs are bounded (``-n``) on fresh sessions of 10 todos, so lists stay short;
UpdateTodo comes from eight h2load processes, one call in flight each, each setting one
todo's content to its own value, so consecutive calls mostly differ; the share of calls
that changed something is reported (the others are no-ops).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import grpc

from loadgen import call_raw, grpc_body, h2load
from processes import ServerProcess
from report import Row, median
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

T = TypeVar("T")

CLIENTS = 4
STREAMS = 16
"""h2load concurrency: 4 connections with 16 calls in flight each keeps one server core busy."""
IN_FLIGHT = CLIENTS * STREAMS

REPLACE = "ReplaceTodos (10 todos)"
ADD = "AddTodo"
UPDATE = "UpdateTodo"
GET = "GetTodos (10 todos)"
OPERATIONS = (REPLACE, ADD, UPDATE, GET)
TARGETS = {("memory", REPLACE): 0.85, ("sqlite", REPLACE): 0.75}
"""Minimum ratio to the echo baseline, by (subject, operation)."""
CPU_TARGETS = {"memory": 1.25}
"""Maximum ratio of server CPU per ReplaceTodos(10) to the echo's, by subject."""


def todo_list(count: int, with_ids: bool = False) -> list[pb.Todo]:
    """``count`` todos shaped like an agent's plan (about 40 characters of content each)."""
    return [
        pb.Todo(id=f"t{number}" if with_ids else "", content=f"Step {number}: write the benchmark section")
        for number in range(count)
    ]


@dataclass
class Target:
    """A server under test, with a channel for set-up calls and checks."""

    server: ServerProcess
    channel: grpc.aio.Channel
    stub: pb_grpc.TodoServiceStub = field(init=False)
    _session_numbers: itertools.count[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.stub = pb_grpc.TodoServiceStub(self.channel)

    @property
    def name(self) -> str:
        return self.server.name

    async def fresh_session(self, prefix: str, todos: int = 10, with_ids: bool = False) -> str:
        session_id = f"{prefix}-{next(self._session_numbers)}"
        await self.stub.CreateSession(pb.CreateSessionRequest(session_id=session_id))
        request = pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(todos, with_ids))
        await self.stub.ReplaceTodos(request)
        return session_id

    async def remove(self, session_id: str) -> None:
        """Measurements clean up after themselves, so each one sees the same heap (GC cost grows with it)."""
        await self.stub.RemoveSession(pb.RemoveSessionRequest(session_id=session_id))

    async def revision(self, session_id: str) -> int:
        return (await self.stub.GetTodos(pb.GetTodosRequest(session_id=session_id))).revision


@dataclass
class Measured:
    """Rates by subject (one per round) and the share of calls that changed something."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    effective: dict[str, list[float]] = field(default_factory=dict)
    cpu_us: dict[str, list[float]] = field(default_factory=dict)
    """Server CPU per call, where measured."""

    def add(self, subject: str, rate: float, effective: float = 1.0, cpu_us: float | None = None) -> None:
        self.rates.setdefault(subject, []).append(rate)
        self.effective.setdefault(subject, []).append(effective)
        if cpu_us is not None:
            self.cpu_us.setdefault(subject, []).append(cpu_us)

    def cpu_ratio(self, subject: str, baseline: str) -> float:
        pairs = zip(self.cpu_us[subject], self.cpu_us[baseline], strict=True)
        return median([mine / theirs for mine, theirs in pairs])

    def rate(self, subject: str) -> float:
        return median(self.rates[subject])

    def ratio(self, subject: str, baseline: str) -> float:
        """The median over rounds of the within-round ratio."""
        pairs = zip(self.rates[subject], self.rates[baseline], strict=True)
        return median([mine / theirs for mine, theirs in pairs])


def rotated(targets: Sequence[T], by: int) -> list[T]:
    """Each round starts with a different target, so none is always measured first."""
    shift = by % len(targets)
    return [*targets[shift:], *targets[:shift]]


def _check_writes(target: Target, counted: int, changed: int, every_call_writes: bool) -> None:
    """h2load counts gRPC errors as successes: the revision tells how many calls really wrote."""
    low = counted if every_call_writes else 1
    if not low <= changed <= counted + IN_FLIGHT:
        raise RuntimeError(
            f"{target.name}: h2load counted {counted} successful writes but the revision moved {changed}"
        )


async def replace_rate(target: Target, todos: int, seconds: float, cpus: set[int]) -> tuple[float, float]:
    """(calls a second, server CPU per call in µs)."""
    session_id = await target.fresh_session("replace", todos)
    body = grpc_body(pb.ReplaceTodosRequest(session_id=session_id, todos=todo_list(todos)))
    await call_raw(target.channel, "ReplaceTodos", body)
    before, cpu_before = await target.revision(session_id), target.server.cpu_seconds()
    result = await h2load(
        target.server.address, "ReplaceTodos", body, cpus=cpus, duration=seconds, clients=CLIENTS, streams=STREAMS
    )
    cpu = target.server.cpu_seconds() - cpu_before
    _check_writes(target, result.succeeded, await target.revision(session_id) - before, every_call_writes=True)
    await target.remove(session_id)
    return result.rate, cpu / result.succeeded * 1e6


async def get_rate(target: Target, seconds: float, cpus: set[int]) -> float:
    session_id = await target.fresh_session("reader")
    body = grpc_body(pb.GetTodosRequest(session_id=session_id))
    await call_raw(target.channel, "GetTodos", body)
    result = await h2load(
        target.server.address, "GetTodos", body, cpus=cpus, duration=seconds, clients=CLIENTS, streams=STREAMS
    )
    await target.remove(session_id)
    return result.rate


async def add_rate(target: Target, seconds: float, adds_per_session: int, cpus: set[int]) -> float:
    """Bounded runs, each on a fresh session of 10 todos, until ``seconds`` of load are measured."""
    succeeded, elapsed = 0, 0.0
    while elapsed < seconds:
        session_id = await target.fresh_session("adder")
        body = grpc_body(pb.AddTodoRequest(session_id=session_id, todo=pb.Todo(content="Step n: one more thing")))
        await call_raw(target.channel, "AddTodo", body)
        before = await target.revision(session_id)
        result = await h2load(
            target.server.address, "AddTodo", body, cpus=cpus, requests=adds_per_session, clients=2, streams=8
        )
        changed = await target.revision(session_id) - before
        if changed != result.succeeded:
            raise RuntimeError(
                f"{target.name}: h2load counted {result.succeeded} adds but the revision moved {changed}"
            )
        succeeded += result.succeeded
        elapsed += result.seconds
        await target.remove(session_id)
    return succeeded / elapsed


UPDATERS = 8


async def update_rate(target: Target, seconds: float, cpus: set[int]) -> tuple[float, float]:
    """Processes that each set one todo's content to their own value; (rate, share of calls that changed it)."""
    session_id = await target.fresh_session("updater", with_ids=True)
    bodies = [
        grpc_body(pb.UpdateTodoRequest(session_id=session_id, todo_id="t0", content=f"Step 0: revision {number}"))
        for number in range(UPDATERS)
    ]
    for body in bodies:
        await call_raw(target.channel, "UpdateTodo", body)
    before = await target.revision(session_id)
    results = await asyncio.gather(
        *(
            h2load(target.server.address, "UpdateTodo", body, cpus=cpus, duration=seconds, clients=1, streams=1)
            for body in bodies
        )
    )
    counted = sum(result.succeeded for result in results)
    changed = await target.revision(session_id) - before
    _check_writes(target, counted, changed, every_call_writes=False)
    await target.remove(session_id)
    return sum(result.rate for result in results), min(1.0, changed / counted)


async def measure_operations(
    targets: Sequence[Target], rounds: int, seconds: float, adds_per_session: int, cpus: set[int]
) -> dict[str, Measured]:
    """Figure 1: every operation on every target, in a rotating order. ReplaceTodos, which has
    targets, gets twice the rounds at half the length: the machine's noise comes in bursts, and
    finer interleaving spreads them over the subjects more evenly."""
    measured = {operation: Measured() for operation in OPERATIONS}
    for round_ in range(2 * rounds):
        for target in rotated(targets, round_):
            rate, cpu_us = await replace_rate(target, 10, seconds / 2, cpus)
            measured[REPLACE].add(target.name, rate, cpu_us=cpu_us)
    for round_ in range(rounds):
        order = rotated(targets, round_)
        for target in order:
            measured[ADD].add(target.name, await add_rate(target, seconds, adds_per_session, cpus))
            measured[UPDATE].add(target.name, *await update_rate(target, seconds, cpus))
            measured[GET].add(target.name, await get_rate(target, seconds, cpus))
    return measured


async def measure_list_sizes(
    targets: Sequence[Target], sizes: Sequence[int], rounds: int, seconds: float, cpus: set[int]
) -> dict[int, Measured]:
    """Figure 5: ReplaceTodos with lists of each size, interleaved like figure 1."""
    measured = {size: Measured() for size in sizes}
    for round_ in range(rounds):
        order = rotated(targets, round_)
        for target in order:
            for size in sizes:
                measured[size].add(target.name, (await replace_rate(target, size, seconds, cpus))[0])
    return measured


def throughput_rows(measured: dict[str, Measured], subjects: Sequence[str], baseline: str) -> list[Row]:
    rows = []
    for operation in OPERATIONS:
        for subject in subjects:
            result = measured[operation]
            changed = median(result.effective[subject])
            note = f", {changed:.0%} of calls changed it" if operation == UPDATE else ""
            rows.append(
                Row(
                    "1. write throughput",
                    f"{operation}, {subject} store{note}",
                    result.rate(subject),
                    "req/s",
                    baseline=result.rate(subject) / result.ratio(subject, baseline),
                    baseline_name=f"{baseline}, same rounds",
                    target=(">=", TARGETS[(subject, operation)]) if (subject, operation) in TARGETS else None,
                )
            )
    replace = measured[REPLACE]
    for subject in subjects:
        rows.append(
            Row(
                "1. write throughput",
                f"server CPU per {REPLACE}, {subject} store",
                median(replace.cpu_us[subject]),
                "µs",
                baseline=median(replace.cpu_us[subject]) / replace.cpu_ratio(subject, baseline),
                baseline_name=f"{baseline}, same rounds",
                target=("<=", CPU_TARGETS[subject]) if subject in CPU_TARGETS else None,
            )
        )
    return rows


def scaling_rows(measured: dict[int, Measured], subjects: Sequence[str], baseline: str) -> list[Row]:
    """Cost per call by list size against the echo's; then the growth of cost from the
    second-largest to the largest size, against what linear growth would be."""
    sizes = sorted(measured)
    rows = []
    for subject in subjects:
        for size in sizes:
            result = measured[size]
            rows.append(
                Row(
                    "5. list size",
                    f"ReplaceTodos with {size} todos, {subject} store: server time per call",
                    1e6 / result.rate(subject),
                    "µs",
                    baseline=1e6 / result.rate(baseline),
                    baseline_name=baseline,
                )
            )
        small, large = sizes[-2], sizes[-1]
        growth = measured[small].rate(subject) / measured[large].rate(subject)
        rows.append(
            Row(
                "5. list size",
                f"{subject} store: cost growth from {small} to {large} todos (linear = {large / small:g}x)",
                growth,
                "x",
                baseline=large / small,
                baseline_name="linear",
                target=("<=", 1.0),
            )
        )
    return rows

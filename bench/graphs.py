"""Figure 16: task graphs (issue 32). Three ratios, each against a baseline measured in the same run:

- ClaimTodo from 64 claimers at once (h2load, 4 clients x 16 streams) on one list, bounded runs on
  fresh lists of ``CLAIM_LIST`` ready todos (every call claims the next one, and the session's
  revision must move once per call), against ReplaceTodos of 10 todos with the same load;
- GetTodos of a 1,000-todo graph (2,000 edges) filtered to ready todos, against the plain read
  of the same list (both carry the derived ``blocks``);
- the domain's validation of a 1,000-todo replace with 2,000 edges against the same replace
  without edges (in this process: ``todos.replace_all``, what the server runs per ReplaceTodos
  after decoding), for blockers named earlier in the list (how a plan is written) and, as a
  second row, for blockers anywhere in the list (the full cycle search).

    python bench/graphs.py [--quick]    # this figure alone, against its own memory-store server
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import grpc

from loadgen import call_raw, grpc_body, h2load, require_h2load
from processes import CpuPlan, ServerProcess
from report import Row, markdown_table, median
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_server.domain import todos as ops
from sessiontodo_server.domain.values import NO_ENTRIES, DraftFields, Limits
from throughput import CLIENTS, STREAMS, Target, replace_rate

FIGURE = "16. task graphs"
CLAIM_LIST = 200
"""Ready todos per claim run, as in the claim contract test: every call of the run claims one."""
GRAPH_TODOS = 1000
EDGES_PER_TODO = 2
CLAIM_TARGET = 0.8
READY_READ_TARGET = 2.0
VALIDATION_TARGET = 1.5


def graph(todos: int, *, in_list_order: bool, seed: int = 32) -> list[pb.Todo]:
    """``todos`` todos, each (past the first two) waiting on two others — named earlier in the list,
    or anywhere without making a cycle — and a third of them completed, so some are ready."""
    chosen = random.Random(seed)
    order = list(range(todos))
    if not in_list_order:
        chosen.shuffle(order)  # a topological order that is not the list's
    rank = {todo: position for position, todo in enumerate(order)}
    made = []
    for n in range(todos):
        earlier = order[: rank[n]]
        blockers = chosen.sample(earlier, min(EDGES_PER_TODO, len(earlier)))
        status = pb.TODO_STATUS_COMPLETED if n % 3 == 0 else pb.TODO_STATUS_PENDING
        made.append(
            pb.Todo(
                id=f"t{n}",
                content=f"Step {n}: write the benchmark section",
                status=status,
                blocked_by=[f"t{b}" for b in blockers],
            )
        )
    return made


async def claim_rate(target: Target, seconds: float, cpus: set[int]) -> float:
    """Bounded runs of ``CLAIM_LIST`` claims, each on a fresh list, until ``seconds`` of load."""
    succeeded, elapsed = 0, 0.0
    while elapsed < seconds:
        session_id = await target.fresh_session("claims", todos=CLAIM_LIST)
        body = grpc_body(pb.ClaimTodoRequest(session_id=session_id, owner="bench worker"))
        before = await target.revision(session_id)
        result = await h2load(
            target.server.address, "ClaimTodo", body, cpus=cpus, requests=CLAIM_LIST, clients=CLIENTS, streams=STREAMS
        )
        changed = await target.revision(session_id) - before
        if changed != result.succeeded:
            raise RuntimeError(
                f"{target.name}: h2load counted {result.succeeded} claims but the revision moved {changed}"
            )
        succeeded += result.succeeded
        elapsed += result.seconds
        await target.remove(session_id)
    return succeeded / elapsed


async def read_rates(target: Target, seconds: float, cpus: set[int]) -> tuple[float, float]:
    """GetTodos of one 1,000-todo graph: (ready todos only, the whole list), h2load for ``seconds`` each."""
    session_id = await target.fresh_session("graph", todos=0)
    await target.stub.ReplaceTodos(
        pb.ReplaceTodosRequest(session_id=session_id, todos=graph(GRAPH_TODOS, in_list_order=True))
    )
    rates = []
    for read in (pb.GetTodosRequest(session_id=session_id, filter=pb.TodoFilter(ready=True)),
                 pb.GetTodosRequest(session_id=session_id)):  # fmt: skip
        body = grpc_body(read)
        await call_raw(target.channel, "GetTodos", body)
        result = await h2load(
            target.server.address, "GetTodos", body, cpus=cpus, duration=seconds, clients=CLIENTS, streams=STREAMS
        )
        rates.append(result.rate)
    await target.remove(session_id)
    return rates[0], rates[1]


def _drafts(todos: list[pb.Todo], edges: bool) -> list[DraftFields]:
    return [
        (todo.id, todo.content, None, None, NO_ENTRIES, "", "", "", tuple(todo.blocked_by) if edges else ())
        for todo in todos
    ]


def validation_seconds(rounds: int, *, in_list_order: bool) -> tuple[float, float]:
    """Median seconds of ``todos.replace_all`` over a 1,000-todo list with its 2,000 edges and without,
    interleaved call by call."""
    todos = graph(GRAPH_TODOS, in_list_order=in_list_order)
    with_edges, without = _drafts(todos, edges=True), _drafts(todos, edges=False)
    limits = Limits()
    timed: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for edges, drafts in ((True, with_edges), (False, without)):
            start = time.perf_counter()
            ops.replace_all(drafts, limits)
            timed[edges].append(time.perf_counter() - start)
    return median(timed[True]), median(timed[False])


async def measure_graphs(
    target: Target, rounds: int, seconds: float, cpus: set[int], validation_rounds: int
) -> list[Row]:
    """Figure 16 on ``target`` (a sessiontodo server), each ratio's two sides interleaved round by round."""
    claims, replaces, ready, plain = [], [], [], []
    for _ in range(rounds):
        claims.append(await claim_rate(target, seconds, cpus))
        replaces.append((await replace_rate(target, 10, seconds, cpus))[0])
        ready_rate, plain_rate = await read_rates(target, seconds, cpus)
        ready.append(ready_rate)
        plain.append(plain_rate)
    ordered = validation_seconds(validation_rounds, in_list_order=True)
    anywhere = validation_seconds(validation_rounds, in_list_order=False)
    name = target.name
    return [
        Row(
            FIGURE,
            f"ClaimTodo, 64 claimers on one list, {name} store: claims a second",
            median(claims),
            "calls/s",
            baseline=median(replaces),
            baseline_name="ReplaceTodos (10 todos), same load",
            target=(">=", CLAIM_TARGET),
        ),
        Row(
            FIGURE,
            f"GetTodos of a {GRAPH_TODOS}-todo graph, ready todos only, {name} store: server time per call",
            1e6 / median(ready),
            "µs",
            baseline=1e6 / median(plain),
            baseline_name="the plain GetTodos of the same graph",
            target=("<=", READY_READ_TARGET),
        ),
        Row(
            FIGURE,
            f"validating a {GRAPH_TODOS}-todo replace with {EDGES_PER_TODO * GRAPH_TODOS} edges"
            " (blockers earlier in the list)",
            ordered[0] * 1e6,
            "µs",
            baseline=ordered[1] * 1e6,
            baseline_name="the same replace without edges",
            target=("<=", VALIDATION_TARGET),
        ),
        Row(
            FIGURE,
            f"validating a {GRAPH_TODOS}-todo replace with {EDGES_PER_TODO * GRAPH_TODOS} edges (blockers anywhere)",
            anywhere[0] * 1e6,
            "µs",
            baseline=anywhere[1] * 1e6,
            baseline_name="the same replace without edges",
        ),
    ]


async def _alone(quick: bool) -> list[Row]:
    cpus = CpuPlan.of_this_machine()
    os.sched_setaffinity(0, cpus.load)
    with tempfile.TemporaryDirectory(prefix="sessiontodo-bench-graphs-") as scratch:
        server = ServerProcess.sessiontodo("memory", "memory://", cpus.server, Path(scratch))
        await server.start()
        target = Target(server, grpc.aio.insecure_channel(server.address))
        try:
            return await measure_graphs(
                target, 1 if quick else 3, 0.5 if quick else 2.0, cpus.load, 50 if quick else 300
            )
        finally:
            await target.channel.close()
            await server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    require_h2load()
    rows = asyncio.run(_alone(parser.parse_args().quick))
    print(markdown_table(rows), file=sys.stdout)

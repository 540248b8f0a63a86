"""Figure 12: editing a big list costs the other sessions nothing.

One writer edits one todo of a 1,000 x 1 KB list in a loop (UpdateTodo: before the sqlite
journal kept a row per todo, each such write re-encoded and rewrote the whole megabyte in the
event loop) while the reader times GetTodos on another, small session. The baseline is the same
reads on the same server while the same writer edits a 10-todo list instead, in alternating
rounds, so drift hits both: the ratio is what the size of the edited list costs the others.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from report import Row, percentile
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from throughput import Target

BIG_TODOS = 1000
TODO_BYTES = 1000
READ_PAUSE = 0.002
"""Between reads: the reader samples the server, it does not load it."""
TARGET_P50 = 1.25


SMALL_TODOS = 10


@dataclass
class BigListResult:
    small_ms: dict[str, list[float]] = field(default_factory=dict)
    """Read latencies while a 10-todo list is edited, per server."""
    big_ms: dict[str, list[float]] = field(default_factory=dict)
    """Read latencies while the 1 MB list is edited, per server."""


async def _reads(stub: pb_grpc.TodoServiceStub, session_id: str, samples: int) -> list[float]:
    latencies = []
    request = pb.GetTodosRequest(session_id=session_id)
    for _ in range(samples):
        started = time.perf_counter()
        await stub.GetTodos(request)
        latencies.append((time.perf_counter() - started) * 1e3)
        await asyncio.sleep(READ_PAUSE)
    return latencies


async def _edit_until(stop: asyncio.Event, stub: pb_grpc.TodoServiceStub, session_id: str) -> None:
    edits = 0
    while not stop.is_set():
        content = f"{edits}".ljust(TODO_BYTES, "x")
        await stub.UpdateTodo(pb.UpdateTodoRequest(session_id=session_id, todo_id="t0", content=content))
        edits += 1


async def _reads_while_edited(target: Target, read: str, edited: str, samples: int) -> list[float]:
    stop = asyncio.Event()
    writer = asyncio.create_task(_edit_until(stop, target.stub, edited))
    try:
        return await _reads(target.stub, read, samples)
    finally:
        stop.set()
        await writer


async def _session_of(target: Target, todos: int) -> str:
    session_id = await target.fresh_session(f"list-of-{todos}", todos=0)
    listed = [pb.Todo(id=f"t{n}", content="x" * TODO_BYTES) for n in range(todos)]
    await target.stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=listed))
    return session_id


async def measure_big_list_isolation(targets: Sequence[Target], rounds: int, samples: int) -> BigListResult:
    result = BigListResult()
    for target in targets:
        big, small, read = [await _session_of(target, todos) for todos in (BIG_TODOS, SMALL_TODOS, 3)]
        for _ in range(rounds):
            result.small_ms.setdefault(target.name, []).extend(await _reads_while_edited(target, read, small, samples))
            result.big_ms.setdefault(target.name, []).extend(await _reads_while_edited(target, read, big, samples))
        for session_id in (big, small, read):
            await target.remove(session_id)
    return result


def big_list_isolation_rows(result: BigListResult) -> list[Row]:
    rows = []
    for name, big in result.big_ms.items():
        small = result.small_ms[name]
        for label, fraction in (("p50", 0.5), ("p99", 0.99)):
            rows.append(
                Row(
                    "12. big lists",
                    f"{name}: GetTodos {label} on another session while a 1 MB list is edited",
                    percentile(big, fraction),
                    "ms",
                    baseline=percentile(small, fraction),
                    baseline_name="while a 10-todo list is",
                    target=("<=", TARGET_P50) if label == "p50" else None,
                )
            )
    return rows

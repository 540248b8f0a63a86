"""A fault run: concurrent writers on several sessions, and for each session a following, a
slow and a cancelling-and-resuming consumer, while faults are applied to the server one after
the other; then no acknowledged write may be lost and every watcher's record must pass
``watch_validators.validate``. Shared by the sqlite and Redis robustness tests."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from sessiontodo_client import ServiceError, Todo, TodoClient
from support import ServerProcess, eventually
from watch_validators import SessionLog, as_list, validate

Fault = Callable[[ServerProcess], Awaitable[ServerProcess]]
"""Does something to the server; returns the server to use afterwards (a restarted one)."""

SESSIONS = ("alpha", "beta", "gamma")
WRITES_PER_PHASE = 25


async def write_until(client: TodoClient, log: SessionLog, stop: asyncio.Event) -> None:
    """Replace the list again and again; only acknowledged writes are recorded."""
    n = 0
    while not stop.is_set():
        n += 1
        todos = [Todo(id=f"t{i}", content=f"{log.session_id}/{n}/{i}") for i in range(n % 4 + 1)]
        try:
            written = await client.replace_todos(log.session_id, todos)
        except ServiceError:
            await asyncio.sleep(0.05)  # the server is down: this write was not acknowledged
            continue
        log.acknowledged[written.revision] = as_list(written.todos)


async def follow(client: TodoClient, log: SessionLog, delay: float = 0.0) -> None:
    """A consumer the client reconnects and resumes by itself; ``delay`` makes it slow."""
    seen = log.watcher("slow" if delay else "following")
    async for event in client.watch(log.session_id):
        seen.append(event)
        if delay:
            await asyncio.sleep(delay)


async def cancel_and_resume(client: TodoClient, log: SessionLog, rng: random.Random) -> None:
    """A consumer that keeps dropping its watch after a few events and resuming after the last one."""
    seen = log.watcher("cancelling")
    while True:
        after = seen[-1].revision if seen else None
        with contextlib.suppress(ServiceError):
            async with aclosing(client.watch(log.session_id, after_revision=after)) as events:
                wanted = rng.randint(1, 4)
                async for event in events:
                    seen.append(event)
                    wanted -= 1
                    if wanted == 0:
                        break
        await asyncio.sleep(rng.random() / 50)


async def run_through_faults(start: Callable[[], ServerProcess], faults: list[Fault]) -> None:
    """Writers and consumers on every session while each fault is applied in turn."""
    server = start()
    logs = {session_id: SessionLog(session_id) for session_id in SESSIONS}
    stop = asyncio.Event()
    rng = random.Random(11)
    async with TodoClient.connect(server.address) as client:
        for session_id in SESSIONS:
            await client.create_session(session_id)
        writers = [asyncio.create_task(write_until(client, log, stop)) for log in logs.values()]
        consumers = [
            asyncio.create_task(task)
            for log in logs.values()
            for task in (follow(client, log), follow(client, log, 0.01), cancel_and_resume(client, log, rng))
        ]
        try:

            async def written(count: int) -> None:
                goals = {sid: len(log.acknowledged) + count for sid, log in logs.items()}
                await eventually(lambda: all(len(log.acknowledged) >= goals[sid] for sid, log in logs.items()), 120)

            await written(WRITES_PER_PHASE)
            for fault in faults:
                server = await fault(server)
                await written(WRITES_PER_PHASE)
            stop.set()
            await asyncio.gather(*writers)

            finals = {sid: await client.get_todos(sid) for sid in SESSIONS}
            for sid, log in logs.items():
                last = max(log.acknowledged)
                assert finals[sid].revision == last, f"{sid}: acknowledged revision {last} lost"
                assert as_list(finals[sid].todos) == log.acknowledged[last]

            def converged() -> bool:
                return all(
                    events and events[-1].revision == finals[sid].revision
                    for sid, log in logs.items()
                    for events in log.watchers.values()
                )

            await eventually(converged, timeout=60)
        finally:
            stop.set()
            for task in [*writers, *consumers]:
                task.cancel()
            await asyncio.gather(*writers, *consumers, return_exceptions=True)
            server.__exit__(None, None, None)
    problems = [problem for sid, log in logs.items() for problem in validate(log, finals[sid].revision)]
    assert not problems, "\n".join(problems)
    assert all(len(log.watchers) == 3 for log in logs.values())

"""A fault run: concurrent writers on several sessions, and for each session a following, a
slow and a cancelling-and-resuming consumer, while faults are applied to the server one after
the other; then no acknowledged write may be lost and every watcher's record must pass
``watch_validators.validate``. Shared by the sqlite and Redis robustness tests, like the expiry
race (writes against a fast expiry sweep)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from contextlib import aclosing

from sessiontodo_client import ChangeKind, NotFound, RemovalReason, ServiceError, Todo, TodoClient
from tests.support import ServerProcess, eventually
from tests.support.watch_validators import SessionLog, as_list, validate

Fault = Callable[[ServerProcess], Awaitable[ServerProcess]]
"""Does something to the server; returns the server to use afterwards (a restarted one)."""

SESSIONS = ("alpha", "beta", "gamma")
BIG = "gamma"
"""The session whose list is big, and edited a todo at a time."""
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


async def edit_big_list_until(client: TodoClient, log: SessionLog, stop: asyncio.Event) -> None:
    """A list big enough for the sqlite journal's row-per-todo form, now and then a short one
    (the two forms in turn), edited one todo at a time in between: adds in the middle, updates,
    removals. After a write that was not acknowledged the list is replaced again, since whether
    that write landed is unknown."""
    n, known = 0, False
    todos: list[Todo] = []
    while not stop.is_set():
        n += 1
        try:
            if not known or n % 4 == 0:
                size = 3 if n % 12 == 0 else 18
                todos = [
                    Todo(id=f"t{n}-{i}", content=f"{log.session_id}/{n}/{i}".ljust(1000, ".")) for i in range(size)
                ]
                revision = (await client.replace_todos(log.session_id, todos)).revision
            elif n % 4 == 1:
                added = Todo(id=f"a{n}", content=f"{log.session_id}/{n}/added")
                result = await client.add_todo(log.session_id, added, index=len(todos) // 2)
                todos.insert(result.index, result.todo)
                revision = result.revision
            elif n % 4 == 2 or len(todos) < 2:
                target = todos[n % len(todos)]
                updated = await client.update_todo(log.session_id, target.id, content=f"{log.session_id}/{n}/edited")
                todos[todos.index(target)] = updated.todo
                revision = updated.revision
            else:
                target = todos[n % len(todos)]
                revision = await client.remove_todo(log.session_id, target.id)
                todos.remove(target)
        except ServiceError:
            known = False
            await asyncio.sleep(0.05)
            continue
        known = True
        log.acknowledged[revision] = as_list(todos)


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
        writers = [
            asyncio.create_task((edit_big_list_until if session_id == BIG else write_until)(client, log, stop))
            for session_id, log in logs.items()
        ]
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


IDLE_TTL = 1.0
"""The expiry race's sessions expire after a second without a write (the shortest TTL allowed)."""


async def race_writes_against_expiry(address: str, sessions: int = 40, seconds: float = 8.0) -> list[str]:
    """AddTodo on sessions with a one-second idle TTL, each write landing near its session's
    deadline (some just before, some just after), while the server sweeps for expired sessions
    every few milliseconds. A session removed as EXPIRED sooner than a TTL after the request of a
    write it acknowledged was sent has erased that write. Returns those erasures (none expected)
    and fails if the race never came close (no session expired at all)."""
    sent_at: dict[tuple[str, int], float] = {}
    """(session, revision of an acknowledged AddTodo) -> when its request was sent."""
    expired: list[tuple[str, int, float]] = []
    """(session, revision of its removal, when the feed reported it)."""
    loop = asyncio.get_running_loop()
    rng = random.Random(27)
    async with TodoClient.connect(address) as client:
        ids = [f"ttl{n}" for n in range(sessions)]
        for session_id in ids:
            await client.create_session(session_id, idle_ttl=IDLE_TTL)

        async def removals() -> None:
            async for event in client.watch_changes():
                if event.kind is ChangeKind.SESSION_REMOVED and event.removal_reason is RemovalReason.EXPIRED:
                    expired.append((event.session_id, event.revision, loop.time()))

        async def write_near_the_deadline(session_id: str, until: float) -> None:
            n = 0
            while loop.time() < until:
                await asyncio.sleep(IDLE_TTL * rng.uniform(0.9, 1.05))
                n += 1
                started = loop.time()
                try:
                    added = await client.add_todo(session_id, Todo(content=f"{session_id}/{n}"))
                except NotFound:  # it expired (rightly, if the write came late): start it again
                    await client.create_session(session_id, idle_ttl=IDLE_TTL)
                    continue
                sent_at[session_id, added.revision] = started

        watching = asyncio.create_task(removals())
        try:
            await asyncio.sleep(0.2)  # the feed is open before the first write
            until = loop.time() + seconds
            await asyncio.gather(*(write_near_the_deadline(session_id, until) for session_id in ids))
            await asyncio.sleep(IDLE_TTL * 2)  # the last removals reach the feed
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError, ServiceError):
                await watching
    assert expired, "no session expired: the writes never raced the sweep"
    return [
        f"{session_id}: expired {(seen - sent) * 1000:.0f} ms after its write at revision {revision - 1} was sent"
        for session_id, revision, seen in expired
        if (sent := sent_at.get((session_id, revision - 1))) is not None and seen - sent < IDLE_TTL
    ]

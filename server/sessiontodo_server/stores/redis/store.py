"""The Redis store: any number of stateless replicas sharing sessions, revisions, watches and the feed.

Every operation is one Lua script (``lua/``) run atomically in Redis, one round trip: a write
applies its list operation there (``mutations.apply``'s rules), bumps the revision, appends
the change to the session's history and to the server-wide feed (a stream numbered by an
integer cursor), records an AddTodo's request id and renews the idle-TTL deadline — so
unconditional writes never conflict, nothing is ever half-written, and creating or removing a
session (with its descendants) is as atomic as a write. Replicas follow the feed to deliver
each other's changes (``follower.py``). Key layout: ``keys.py``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError, ReadOnlyError, RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessiontodo_server.domain.batch import Batch, BatchWritten, Operation, Write, WriteContext
from sessiontodo_server.domain.errors import (
    BatchRequestIdReused,
    ClaimNotHeld,
    InvalidArgument,
    LimitExceeded,
    ParentMismatch,
    RequestIdReused,
    RevisionMismatch,
    SessionNotFound,
    TodoBlocked,
    TodoError,
    TodoNotFound,
    TodoNotPending,
    TodoTaken,
    Unavailable,
)
from sessiontodo_server.domain.mutations import (
    AddTodo,
    ClaimTodo,
    LapseLease,
    Mutation,
    ReleaseTodo,
    RemembersResult,
    RemoveTodo,
    RenewClaim,
    ReplaceTodos,
    UpdateSession,
    UpdateTodo,
)
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, AddResult, SessionState, Written
from sessiontodo_server.domain.tenancy import tenant_of
from sessiontodo_server.domain.todos import todo_bytes
from sessiontodo_server.domain.values import (
    EVERY_SESSION,
    NO_GRAPH_CHANGES,
    Change,
    ChangeKind,
    Limits,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    Todo,
    is_global_list,
)
from sessiontodo_server.stores.batch_plan import (
    BatchPlan,
    BatchReach,
    CreateStep,
    RemoveStep,
    Step,
    WriteStep,
    plan_on_read,
)
from sessiontodo_server.stores.codec import (
    encode_entries,
    encode_json,
    encode_todo,
    remembered_batch,
    replayed_batch,
    todo_from_fields,
)
from sessiontodo_server.stores.redis.entries import as_text, decode_entry, decode_result, decode_state, entry_cursor
from sessiontodo_server.stores.redis.follower import READ_BATCH, Follower, Woken
from sessiontodo_server.stores.redis.keys import parse_redis_url
from sessiontodo_server.stores.redis.scripts import Scripts

log = logging.getLogger(__name__)
T = TypeVar("T")

_UNREACHABLE = (RedisError,)
"""What a down, restarting, loading, failing-over, busy or full Redis raises: UNAVAILABLE. Redis's
own words (which may name its address) stay in the logs."""

_EXPECTED = (RedisConnectionError, RedisTimeoutError, TimeoutError, ReadOnlyError, OutOfMemoryError)
"""Failures that need no traceback in the logs."""

_CONNECTION_DEFAULTS: dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_keepalive": True,
    "health_check_interval": 10,
}
"""Overridable by the URL's query string (redis-py's own parameters). Calls are bounded by the
store's own deadline (``socket_timeout`` in the URL): redis-py's would cost a task per command."""

_INLINE_ENTRY_BYTES = 64 * 1024
"""Feed entries carry their list up to this size; larger lists are read from the session's history."""

_EXPIRY_LEASE = 30.0
"""Seconds a replica has to remove the expired sessions it claimed before others may claim them."""

_EXPIRY_BATCH = 1000

_OLD_SESSION_KEYS = ("state", "log", "requests", "request-revisions", "removed")
"""A session's keys in the 0.1 layout (``P{s:ID}:<name>``)."""


def _unavailable(error: Exception) -> Unavailable:
    if isinstance(error, _EXPECTED):
        log.debug("redis call failed: %r", error)
    else:
        log.warning("redis call failed: %r", error)
    return Unavailable("the store is unreachable; retry")


class RedisStore:
    def __init__(self, url: str, history_limit: int = 64, feed_history: int = 4096, wait_replicas: int = 0) -> None:
        location = parse_redis_url(url)
        self._wait_replicas = wait_replicas
        self._base = location.base
        self._counters = location.key("counters")
        self._sessions = location.key("sessions")
        self._children = location.key("children")
        self._marks = location.key("marks")
        self._old_global = f"{location.prefix}{{s:}}"
        self._old_index = f"{location.prefix}{{index}}:sessions"
        self._timeout = location.timeout
        self._redis: Redis = Redis.from_url(location.url, retry=Retry(NoBackoff(), 0), **_CONNECTION_DEFAULTS)
        self._scripts = Scripts(self._redis)
        self._writer = os.urandom(8).hex()
        self._wake_channel = f"{self._base}wake:{self._writer}"
        self._follower = Follower(self._read_after, self._reopen, self._resolve, self._wake_ups, self._heartbeat)
        self._task: asyncio.Task[None] | None = None
        self._claimed: dict[str, float] = {}
        config = (self._base, self._writer, feed_history, _INLINE_ENTRY_BYTES, history_limit)
        self._config = "\n".join(map(str, config)).encode()
        self.feed_epoch = ""

    def _args(self, *args: Any) -> list[Any]:
        """The arguments every script starts with (``lua/lib.lua``), then ``args``."""
        return [self._config, self._follower.delivered, *args]

    @asynccontextmanager
    async def _reachable(self) -> AsyncIterator[None]:
        """A Redis that cannot be reached in time is UNAVAILABLE: retry. The reason (and Redis's
        address) stays in the logs."""
        try:
            async with asyncio.timeout(self._timeout):
                yield
        except (*_UNREACHABLE, TimeoutError) as error:
            raise _unavailable(error) from error

    async def _committed(self, script: AsyncScript, args: list[Any]) -> Any:
        """Run a script that changes data; with ``wait_replicas``, on one connection with a WAIT
        after it, answering only once that many replicas have the change (else UNAVAILABLE: the
        primary has it, and other replicas' watchers will see it, but a failover could lose it)."""
        if not self._wait_replicas:
            return await script([self._counters], args)
        async with self._redis.pipeline(transaction=False) as pipeline:
            await script([self._counters], args, client=pipeline)
            pipeline.execute_command("WAIT", self._wait_replicas, int(self._timeout * 500))
            reply, replicated = await pipeline.execute()
        if replicated < self._wait_replicas:
            log.warning("a write reached %d of %d Redis replicas in time", replicated, self._wait_replicas)
            raise Unavailable("the store's replicas did not confirm the write in time; retry")
        return reply

    async def _within(self, call: Awaitable[T]) -> T:
        """The follower's calls: bounded like every other, failing with redis-py's errors."""
        async with asyncio.timeout(self._timeout):
            return await call

    # Lifecycle

    async def open(self) -> None:
        """Check Redis, create the global list (carrying 0.1's over), start following the feed."""
        try:
            async with self._reachable():
                _, self._follower.delivered = await self._reopen(migrate=True)
        except Unavailable:
            await self._redis.aclose()
            raise
        self._task = asyncio.create_task(self._follower.run(), name="redis-store-follower")

    async def close(self) -> None:
        await self._stop_following()
        try:
            await self._heartbeat(False)
        except _UNREACHABLE:
            pass  # forgotten by the others in a while
        await self._redis.aclose()

    async def _stop_following(self) -> None:
        if self._task is not None:
            # Cancelled again until it stops: on Python 3.11 a cancellation landing as redis-py's
            # asyncio.wait_for-guarded write completes is swallowed (fixed in 3.12).
            while not self._task.done():
                self._task.cancel()
                await asyncio.wait([self._task], timeout=0.1)

    async def _reopen(self, migrate: bool = False) -> tuple[bool, int]:
        """Make sure the store is set up; whether its feed is another than last seen, and its cursor."""
        if not migrate:  # back after losing Redis: idle pooled connections may be dead, open fresh ones
            await self._redis.connection_pool.disconnect(inuse_connections=False)
        carried: list[Any] = ["", ""]
        if migrate and (old := await self._redis.hget(f"{self._old_global}:state", "change")) is not None:
            revision, _, _, todos = json.loads(old)
            carried = [revision + 1, _list_text(tuple(todo_from_fields(fields) for fields in todos))]
        epoch, cursor, created = await self._within(
            self._scripts.init([self._counters], self._args(os.urandom(6).hex(), *carried))
        )
        if carried[0] != "" and created:
            await self._redis.delete(*(f"{self._old_global}:{name}" for name in _OLD_SESSION_KEYS))
            log.info("carried the global list over from the 0.1 layout to %r", GLOBAL_SESSION_ID)
        if migrate and (left := await self._redis.zcard(self._old_index)):
            log.warning("%d sessions of the 0.1 key layout were not carried over (only the global list is)", left)
        recreated = bool(self.feed_epoch) and as_text(epoch) != self.feed_epoch
        self.feed_epoch = as_text(epoch)
        return recreated, int(cursor)

    # Sessions

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str, *, max_per_tenant: int = 0
    ) -> tuple[SessionState, Change | None]:
        args = self._args(
            session_id,
            info.parent_id,
            encode_entries(info.labels),
            repr(float(info.created_at)),
            repr(float(info.updated_at)),
            repr(float(info.idle_ttl)),
            max_sessions,
            origin,
            max_per_tenant,
        )
        async with self._reachable():
            reply = await self._committed(self._scripts.create, args)
        outcome = reply[0]
        if outcome == -1:
            raise SessionNotFound(info.parent_id)
        if outcome == -2:
            raise LimitExceeded("sessions", max_sessions)
        if outcome == -3:
            raise ParentMismatch(session_id, as_text(reply[1]))
        if outcome == -4:
            raise LimitExceeded("sessions per tenant", max_per_tenant)
        if outcome == 0:
            return decode_state(session_id, reply[1]), None
        created, _ = decode_entry(reply[1])
        await self._published(reply[2], created.cursor, created.cursor)
        assert created.info is not None
        return SessionState(session_id, created.revision, (), created.info), created

    async def _published(self, missed: list[Any], first: int, last: int) -> None:
        """Before a change of ours (cursors ``first``..``last``) is published: everything earlier is delivered."""
        if self._follower.delivered < first - 1:
            async with self._reachable():
                await self._follower.bridge(missed, first)
        self._follower.advance(last)

    async def remove_session(self, session_id: str, reason: RemovalReason, origin: str = "") -> list[Change]:
        claimed = self._claimed.pop(session_id, None) if reason is RemovalReason.EXPIRED else None
        return await self._remove(session_id, reason, "" if claimed is None else repr(claimed), origin)

    async def remove_all_sessions(self, origin: str = "", only: SessionFilter = EVERY_SESSION) -> list[Change]:
        if only == EVERY_SESSION:
            return await self._remove("", RemovalReason.REMOVED, "", origin)
        removals: list[Change] = []  # a tenant's sessions: one by one, each with its descendants
        after = ""
        while page := await self.list_sessions(after, 1000, only):
            for state in page:
                removals += await self._remove(state.session_id, RemovalReason.REMOVED, "", origin)
            after = page[-1].session_id
        return removals

    async def _remove(self, session_id: str, reason: RemovalReason, due_at: str, origin: str) -> list[Change]:
        async with self._reachable():
            arguments = self._args(session_id, reason.value, due_at, origin)
            missed, entries = await self._committed(self._scripts.remove, arguments)
        removals = [decode_entry(data)[0] for data in entries]
        if removals:
            await self._published(missed, removals[0].cursor, removals[-1].cursor)
        return removals

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        found: list[SessionState] = []
        async with self._reachable():
            while len(found) < limit:
                ids = await self._ids_after(after_id, only, limit)
                if not ids:
                    break
                states = await self._read(ids)
                found += [
                    state
                    for state in states
                    if state and not is_global_list(state.session_id) and only.matches(state.session_id, state.info)
                ][: limit - len(found)]
                after_id = ids[-1]
        return found

    async def session_count(self) -> int:
        async with self._reachable():
            return int(await self._redis.zcard(self._sessions)) - 1  # the global list is not counted

    def feed_position(self) -> int:
        return self._follower.delivered

    def held_bytes(self) -> tuple[int, int]:
        return 0, 0  # lists, histories and the feed live in Redis, not in this process

    async def _ids_after(self, after_id: str, only: SessionFilter, count: int) -> list[str]:
        """Candidate ids in order from the narrowest index the filter allows."""
        if only.session_ids:
            return sorted(sid for sid in only.session_ids if sid > after_id)[:count]
        if only.parent_id:
            prefix = f"{only.parent_id} "
            low = f"({prefix}{after_id}" if after_id else f"[{prefix}"
            pairs = await self._redis.zrangebylex(self._children, low, f"({only.parent_id}!", 0, count)
            return [as_text(pair)[len(prefix) :] for pair in pairs]
        low = f"({after_id}" if after_id else "-"
        index = self._sessions if only.tenant is None else self._tenant_index(only.tenant)
        return [as_text(sid) for sid in await self._redis.zrangebylex(index, low, "+", 0, count)]

    def _tenant_index(self, tenant: str) -> str:
        """The sorted set of one tenant's session ids (``tenant_index`` in ``lua/lib.lua``)."""
        return f"{self._base}tenant:{tenant}"

    async def _read(self, session_ids: list[str]) -> list[SessionState | None]:
        replies = await self._scripts.read([self._counters], self._args(*session_ids))
        return [decode_state(sid, reply) if reply else None for sid, reply in zip(session_ids, replies, strict=True)]

    async def get(self, session_id: str) -> SessionState | None:
        async with self._reachable():
            (state,) = await self._read([session_id])
        return state

    # Writes and history

    async def write(self, operation: Write, context: WriteContext) -> Written:
        session_id, mutation, expected_revision = operation.session_id, operation.mutation, operation.expected_revision
        if _planned_only(mutation):
            return await self._planned_write(operation, context)
        script_operation, *operands = _operation(mutation)
        expected = "" if expected_revision is None else str(expected_revision)
        fingerprint = mutation.fingerprint if isinstance(mutation, RemembersResult) else ""
        header = encode_json(
            [
                session_id,
                script_operation,
                expected,
                context.request_id,
                context.origin,
                repr(float(context.now)),
                fingerprint,
            ]
        )
        args = self._args(header, _limits(context.limits), *operands)
        try:  # what _reachable() does, spelled out on the hottest path
            async with asyncio.timeout(self._timeout):
                reply = await self._committed(self._scripts.write, args)
        except (*_UNREACHABLE, TimeoutError) as error:
            raise _unavailable(error) from error
        outcome = as_text(reply[0])
        if outcome == "ok":
            known = mutation.todos if isinstance(mutation, ReplaceTodos) else None
            change, _ = decode_entry(reply[1], known)
            await self._published(reply[3], change.cursor, change.cursor)
            assert change.info is not None
            state = SessionState(session_id, change.revision, change.todos, change.info)
            if isinstance(mutation, AddTodo):
                result = AddResult(mutation.todo, int(reply[2]), change.revision, mutation.fingerprint)
                return Written(state, change, result)
            if isinstance(mutation, ClaimTodo):
                position = int(reply[2])
                return Written(state, change, AddResult(state.todos[position], position, change.revision, fingerprint))
            return Written(state, change)
        if outcome == "same":
            return Written(decode_state(session_id, reply[1]))
        if outcome == "request":
            return Written(decode_state(session_id, reply[2]), result=decode_result(reply[1]))
        if outcome == "graph":
            return await self._planned_write(operation, context)
        raise _refusal(session_id, mutation, expected_revision, context.limits, outcome, reply)

    async def _planned_write(self, operation: Write, context: WriteContext) -> Written:
        """A write to a task graph, planned with ``mutations.apply``'s rules on the state read from
        Redis and applied by ``batch.lua`` only if that state still holds (else planned again): one
        winner among concurrent claimers, on one replica or many. A claim's request id is kept as
        a batch's, in a key no batch's can take (``tenant\nid``: no NUL in either)."""
        session_id, mutation = operation.session_id, operation.mutation
        fingerprint = mutation.fingerprint if isinstance(mutation, RemembersResult) else ""
        request_id = f"\0{session_id}\0{context.request_id}" if context.request_id else ""
        planned = WriteContext(request_id, context.origin, context.now, context.limits)
        try:
            written = await self._apply_planned(Batch((operation,), fingerprint), planned, _PLANNED_WRITE_ATTEMPTS)
        except BatchRequestIdReused:
            raise RequestIdReused(session_id, context.request_id) from None
        except TodoError as error:
            error.write_index = None  # one write, not a batch's
            error.args = (str(error).removeprefix("writes[0]: "),)
            raise
        (outcome,) = written.outcomes
        state = await self.get(session_id) if not written.changes else None
        if written.changes:
            (change,) = written.changes
            assert change.info is not None
            state = SessionState(session_id, change.revision, change.todos, change.info)
        assert state is not None
        result = None
        if isinstance(mutation, RemembersResult) and outcome.todo is not None and (written.changes or request_id):
            result = AddResult(outcome.todo, outcome.position, outcome.revision, fingerprint)
        return Written(state, written.changes[0] if written.changes else None, result)

    async def write_batch(self, batch: Batch, context: WriteContext) -> BatchWritten:
        """Planned here with ``mutations.apply``'s rules (``batch_plan``, as every store plans a
        batch) on the state read from Redis, then applied whole by one script if that state still
        holds; when another writer came first, planned again."""
        return await self._apply_planned(batch, context, _BATCH_ATTEMPTS)

    async def _apply_planned(self, batch: Batch, context: WriteContext, attempts: int) -> BatchWritten:
        request_id, fingerprint = context.request_id, batch.fingerprint
        for _ in range(attempts):
            async with self._reachable():
                if request_id and (remembered := await self._redis.get(self._batch_key(request_id))) is not None:
                    return replayed_batch(remembered, request_id, fingerprint)
                plan, read, count = await self._plan(batch.operations, context.now, context.limits)
                outcomes = tuple(plan.outcomes)
                arguments = self._args(
                    request_id,
                    remembered_batch(fingerprint, outcomes),
                    context.origin,
                    encode_json(read),
                    encode_json(count),
                    encode_json(_steps(plan.steps)),
                )
                reply = await self._scripts.batch([self._counters], arguments)
            outcome = as_text(reply[0])
            if outcome == "request":
                return replayed_batch(reply[1], request_id, fingerprint)
            if outcome == "ok":
                changes = tuple(decode_entry(data)[0] for data in reply[2:])
                if changes:
                    await self._published(reply[1], changes[0].cursor, changes[-1].cursor)
                return BatchWritten(outcomes, changes)
        raise Unavailable("the batch kept meeting other writes to its sessions; retry")

    def _batch_key(self, request_id: str) -> str:
        return f"{self._base}b:{request_id}"

    async def _plan(
        self, operations: Sequence[Operation], now: float, limits: Limits
    ) -> tuple[BatchPlan, list[list[Any]], list[Any]]:
        """The batch planned on the sessions it touches (``BatchReach``) as they are now; what it read (for the
        script to check), and the session counts it planned on: in all (-1 when it creates none)
        and of each tenant it creates sessions of."""
        reach = BatchReach(operations)
        while reach.walk:  # every descendant of a removed session, a level at a time
            found = {}
            for session_id in reach.walk:
                pairs = await self._redis.zrangebylex(self._children, f"[{session_id} ", f"({session_id}!")
                found[session_id] = [as_text(pair)[len(session_id) + 1 :] for pair in pairs]
            reach.found(found)
        ids = reach.sessions
        states = dict(zip(ids, await self._read(ids), strict=True))
        absent = [session_id for session_id, state in states.items() if state is None]
        marks = dict(zip(absent, await self._redis.zmscore(self._marks, absent), strict=True)) if absent else {}
        floor = int(await self._redis.hget(self._counters, "floor") or 0)
        count = await self.session_count() if reach.creates else -1
        tenants = sorted({tenant_of(session_id) for session_id in reach.creates})
        tenant_sessions = {tenant: int(await self._redis.zcard(self._tenant_index(tenant))) for tenant in tenants}
        plan = plan_on_read(
            operations,
            states,
            reach.children,
            starts={session_id: int(mark) for session_id, mark in marks.items() if mark is not None},
            floor=floor,
            session_count=max(count, 0),
            tenant_sessions=tenant_sessions,
            now=now,
            limits=limits,
        )
        starts = {step.session_id: step.revision for step in plan.steps if isinstance(step, CreateStep)}
        read = [
            [
                session_id,
                -1 if state is None else state.revision,
                len(reach.children[session_id]) if session_id in reach.children else -1,
                starts.get(session_id, -1) if state is None else -1,
            ]
            for session_id, state in states.items()
        ]
        return plan, read, [count, tenant_sessions]

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        async with self._reachable():
            reply = await self._scripts.since([self._counters], self._args(session_id, revision))
        if not reply[0]:
            return None
        return [decode_entry(data)[0] for data in reply[1:]]

    async def feed_after(self, cursor: int) -> list[Change] | None:
        changes: list[Change] = []
        position = cursor
        async with self._reachable():
            while True:
                current, entries = await self._read_after(position)
                if cursor > current:
                    return None
                if position >= current:
                    return changes
                if not entries or entry_cursor(entries[0]) != position + 1:
                    return None  # trimmed
                for data in entries:
                    change, complete = decode_entry(data)
                    if not complete and (change := await self._resolve(change)).kind is ChangeKind.RESET:
                        return None
                    changes.append(change)
                position = changes[-1].cursor

    async def _read_after(self, cursor: int) -> tuple[int, list[bytes]]:
        """The store's current cursor, and the next feed entries after ``cursor``."""
        current, *entries = await self._within(self._scripts.feed([self._counters], self._args(cursor, READ_BATCH)))
        return int(current), entries

    @asynccontextmanager
    async def _wake_ups(self) -> AsyncIterator[Woken]:
        """Other replicas' writes wake this one (``wake()`` in ``lua/lib.lua``)."""
        async with self._redis.pubsub() as pubsub:
            await self._within(pubsub.subscribe(self._wake_channel))
            if await pubsub.get_message(timeout=self._timeout) is None:
                raise TimeoutError("no subscription confirmation")

            async def woken(timeout: float) -> list[bytes]:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
                return [] if message is None else [message["data"]]

            yield woken

    async def _heartbeat(self, alive: bool) -> object:
        return await self._within(self._scripts.heartbeat([self._counters], self._args("1" if alive else "")))

    async def _resolve(self, change: Change) -> Change:
        """A feed entry whose list was too large for the feed, completed from the session's history;
        failing that (no longer kept), a RESET of the session's current state."""
        args = self._args(change.session_id, change.cursor, change.revision)
        entry = await self._within(self._scripts.entry([self._counters], args))
        if entry is not None:
            return decode_entry(entry)[0]
        (state,) = await self._within(self._read([change.session_id]))
        if state is None:
            return change
        return Change(
            state.session_id, ChangeKind.RESET, state.revision, state.todos, info=state.info, cursor=change.cursor
        )

    async def snapshot(self, tenant: str | None = None) -> tuple[int, list[SessionState]]:
        one = ("1", tenant) if tenant is not None else ("0",)
        async with self._reachable():
            cursor, *sessions = await self._scripts.snapshot([self._counters], self._args(*one))
        return int(cursor), [decode_state(as_text(sid), state) for sid, state in sessions]

    async def expired(self, now: float) -> list[str]:
        """Claims the due sessions (for ``_EXPIRY_LEASE``), so replicas reaping at once split them;
        removing one with reason EXPIRED then re-checks that its TTL has run out."""
        async with self._reachable():
            args = self._args(repr(float(now)), _EXPIRY_LEASE, _EXPIRY_BATCH)
            session_ids = [as_text(sid) for sid in await self._scripts.claim([self._counters], args)]
        self._claimed.update(dict.fromkeys(session_ids, now))
        return session_ids

    # Other replicas' changes

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Every change another replica makes, in feed order; a RESET with no session id when
        this replica cannot tell what it missed (every watcher then re-reads)."""
        self._follower.on_change(listener)

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """``listener(False)`` when the connection to Redis is lost, ``listener(True)`` once followed again."""
        self._follower.on_availability(listener)


@functools.lru_cache(maxsize=8)
def _limits(limits: Limits) -> bytes:
    """The limits ``write.lua`` checks, as one argument."""
    values = (limits.max_todos_per_session, limits.max_list_bytes, limits.max_metadata_bytes, limits.max_labels)
    return " ".join(map(str, values)).encode()


def _list_text(todos: tuple[Todo, ...]) -> str:
    """A whole list as one script argument: its encoded todos, one per line."""
    return "\n".join(map(encode_todo, todos))


def _operation(mutation: Mutation) -> list[Any]:
    """A mutation as ``write.lua``'s operation and arguments."""
    match mutation:
        case ReplaceTodos(todos):
            return ["replace", _list_text(todos)]
        case AddTodo(todo, index, id_given):
            return ["add", todo.id, encode_todo(todo), todo_bytes(todo), "" if index is None else index, int(id_given)]
        case UpdateTodo(todo_id, content, status, priority, set_metadata, remove_metadata):
            return [
                "update",
                todo_id,
                content or "",
                status or "",
                priority or "",
                encode_entries(set_metadata),
                json.dumps(list(remove_metadata)),
            ]
        case RemoveTodo(todo_id):
            return ["remove", todo_id]
        case UpdateSession(set_labels, remove_labels, idle_ttl):
            ttl = "" if idle_ttl is None else repr(float(idle_ttl))
            return ["session", encode_entries(set_labels), json.dumps(list(remove_labels)), ttl]
        case ClaimTodo(todo_id, owner, lease_seconds, now):
            return ["claim", todo_id, owner, _ms(lease_seconds), round(now * 1000)]
        case RenewClaim(todo_id, owner, lease_seconds, now):
            return ["renew", todo_id, owner, _ms(lease_seconds), round(now * 1000)]
        case ReleaseTodo(todo_id, owner):
            return ["release", todo_id, owner, "", 0]
        case LapseLease(todo_id, now):
            return ["lapse", todo_id, "", "", round(now * 1000)]
    raise AssertionError(f"{type(mutation).__name__} is planned, not scripted")  # see _planned_only


def _ms(seconds: float | None) -> int | str:
    """A lease as ``write.lua`` takes it: whole milliseconds, or '' for none."""
    return "" if seconds is None else round(seconds * 1000)


_BATCH_ATTEMPTS = 16
"""Plans of one batch before it gives up with UNAVAILABLE (each lost to another replica's write)."""

_PLANNED_WRITE_ATTEMPTS = 1000
"""Plans of one write to a task graph: claimers of one list contend by design, and each lost plan
means another claim won (the loop always moves forward)."""


def _planned_only(mutation: Mutation) -> bool:
    """Writes ``write.lua`` leaves to ``_planned_write``: those that check dependencies (a cycle
    needs the whole graph; ``graph.py``'s rules are written once, in Python)."""
    if isinstance(mutation, UpdateTodo):
        return mutation.graph is not NO_GRAPH_CHANGES
    return isinstance(mutation, AddTodo) and bool(mutation.todo.blocked_by)


def _steps(steps: Sequence[Step]) -> list[list[Any]]:
    """A plan's steps as ``batch.lua`` applies them: a removal one step per removed session."""
    out: list[list[Any]] = []
    for step in steps:
        if isinstance(step, RemoveStep):
            out += [["remove", session_id] for session_id, _ in step.removed]
        else:
            out.append(_step(step))
    return out


def _step(step: WriteStep | CreateStep) -> list[Any]:
    match step:
        case WriteStep():
            info = step.info
            return [
                "write",
                step.session_id,
                step.kind.value,
                step.revision,
                step.todo_id,
                encode_entries(info.labels),
                repr(float(info.updated_at)),
                repr(float(info.idle_ttl)),
                sum(map(todo_bytes, step.todos)),
                [encode_todo(todo) for todo in step.todos],
            ]
        case CreateStep():
            info = step.info
            return [
                "create",
                step.session_id,
                info.parent_id,
                encode_entries(info.labels),
                repr(float(info.created_at)),
                repr(float(info.updated_at)),
                repr(float(info.idle_ttl)),
                step.revision,
            ]


def _refusal(
    session_id: str,
    mutation: Mutation,
    expected_revision: int | None,
    limits: Limits,
    outcome: str,
    reply: list[Any],
) -> Exception:
    """The domain error for a write ``write.lua`` refused, worded as ``todos.py`` words it."""
    if outcome == "missing":
        return SessionNotFound(session_id)
    if outcome == "mismatch":
        assert expected_revision is not None
        return RevisionMismatch(session_id, expected_revision, int(reply[1]))
    if outcome == "todo_missing":
        assert isinstance(mutation, UpdateTodo | RemoveTodo | ClaimTodo | RenewClaim | ReleaseTodo)
        return TodoNotFound(session_id, mutation.todo_id)
    if outcome == "duplicate":
        assert isinstance(mutation, AddTodo)
        return InvalidArgument([("todo.id", f"duplicate id {mutation.todo.id!r}")])
    if outcome == "full":
        if as_text(reply[1]) == "count":
            return LimitExceeded("todos per session", limits.max_todos_per_session)
        return LimitExceeded("list bytes", limits.max_list_bytes)
    if outcome == "metadata_too_large":
        return InvalidArgument([("metadata", f"keys and values must total at most {limits.max_metadata_bytes} bytes")])
    if outcome == "list_too_large":
        return InvalidArgument([("content", f"the list must stay under {limits.max_list_bytes} bytes of text")])
    if outcome == "too_many_labels":
        return InvalidArgument([("labels", f"at most {limits.max_labels} labels")])
    todo_id = getattr(mutation, "todo_id", "")
    if outcome == "taken":
        return TodoTaken(session_id, todo_id, as_text(reply[1]))
    if outcome == "blocked":
        return TodoBlocked(session_id, todo_id, as_text(reply[1]))
    if outcome == "not_pending":
        return TodoNotPending(session_id, todo_id, as_text(reply[1]))
    if outcome == "not_held":
        return ClaimNotHeld(session_id, todo_id, as_text(reply[1]), as_text(reply[2]))
    raise AssertionError(f"write.lua answered {outcome!r}")

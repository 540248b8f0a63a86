"""The Redis store: any number of stateless replicas sharing sessions, revisions and watches.

Layout (``P`` is the key prefix, ``{...}`` a Redis Cluster hash tag):

- per session, all in the session's own slot ``{s:<id>}``: ``P{s:<id>}:state`` (a hash of
  parent, revision, incarnation and the last change, which carries the whole list),
  ``:log`` (the last ``history_limit`` changes, for resuming watchers), ``:requests`` and
  ``:request-revisions`` (AddTodo request ids, the last ``REQUEST_WINDOW`` revisions), and
  ``:removed`` (a short-lived tombstone holding the revision the session was removed at);
- the index, in the slot ``{index}``: ``P{index}:sessions`` (ids in order, for listing and the
  session limit), ``:meta`` (id -> incarnation and parent), ``:children`` ("parent child"
  pairs, for removing descendants), ``:counters`` (incarnation counter, removed high-water)
  and ``:removing`` (removals whose session data is not deleted yet).

Every Lua script touches one slot only, so the layout works on Redis Cluster. A commit is
one script: compare-and-set on the revision, append to the log, remember the request id and
PUBLISH a notice on ``P changes`` — atomic, so a conflicting write from another replica loses
cleanly and nothing is ever half-written. Creating and removing a session take two steps
(index, then session data); the index is the authority on existence, incarnations make the
steps safe to interleave, and ``:removing`` lets any replica finish a removal cut short.

Notices are only a wake-up. Each replica remembers the last revision it handed to its
watchers per session; a notice that is the next revision and carries the change is delivered
as is, anything else (a gap, a removal, a reconnect) makes the replica re-read the session and
deliver the missed changes from the log, or a RESET when the log cannot bridge them.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ReadOnlyError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sessiontodo_server.errors import LimitExceeded, ParentMismatch, SessionNotFound, Unavailable
from sessiontodo_server.stores.base import GLOBAL_SESSION_ID, AddResult, SessionState
from sessiontodo_server.stores.memory import REQUEST_RETENTION_WRITES as REQUEST_WINDOW
from sessiontodo_server.todos import Change, ChangeKind, Todo, TodoPriority, TodoStatus

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "sessiontodo:"

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, ReadOnlyError)
"""What a down, restarting or failing-over Redis raises: mapped to UNAVAILABLE."""

_CONNECTION_DEFAULTS: dict[str, Any] = {
    "socket_connect_timeout": 2.0,
    "socket_timeout": 5.0,
    "socket_keepalive": True,
    "health_check_interval": 10,
}
"""Overridable by the URL's query string (redis-py's own parameters)."""

_REMOVED_TOMBSTONE_SECONDS = 24 * 3600
"""How long a removed session's final revision is kept, covering a removal cut short before
the index's high-water mark was raised."""

_INLINE_NOTICE_BYTES = 64 * 1024
"""Changes up to this size travel inside the notice; larger ones are re-read by revision."""

_TRACKED_SESSIONS = 100_000
"""Sessions whose delivered revision a replica remembers (least recently used are forgotten)."""

_BATCH = 500
_OPEN_TIMEOUT = 10.0
_RECONNECT_DELAYS = (0.05, 0.1, 0.2, 0.5, 1.0)


# Lua scripts. Revisions are integers kept as decimal strings; %d formats them exactly.

_CREATE_IN_INDEX = """
local existing = redis.call('HGET', KEYS[2], ARGV[1])
local high_water = redis.call('HGET', KEYS[4], 'high_water') or '0'
if existing then return {0, existing, high_water} end
if ARGV[2] ~= '' and not redis.call('HGET', KEYS[2], ARGV[2]) then return {-1} end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return {-2} end
local incarnation = redis.call('HINCRBY', KEYS[4], 'incarnation', 1)
redis.call('ZADD', KEYS[1], 0, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], incarnation .. ' ' .. ARGV[2])
if ARGV[2] ~= '' then redis.call('ZADD', KEYS[3], 0, ARGV[2] .. ' ' .. ARGV[1]) end
return {1, incarnation .. ' ' .. ARGV[2], high_water}
"""
"""KEYS: sessions, meta, children, counters. ARGV: id, parent, max sessions.
{1|0, "incarnation parent", high water} for created|existing; {-1} parent missing; {-2} limit."""

_REMOVE_FROM_INDEX = """
local doomed = {}
if ARGV[1] == '' then
  local all = redis.call('HGETALL', KEYS[2])
  for i = 1, #all, 2 do
    table.insert(doomed, {all[i], string.match(all[i + 1], '^(%d+)')})
  end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
else
  local meta = redis.call('HGET', KEYS[2], ARGV[1])
  if not meta then return {} end
  local ids = {ARGV[1]}
  local i = 1
  while i <= #ids do
    local id = ids[i]
    for _, pair in ipairs(redis.call('ZRANGEBYLEX', KEYS[3], '[' .. id .. ' ', '(' .. id .. '!')) do
      table.insert(ids, string.sub(pair, #id + 2))
    end
    i = i + 1
  end
  for _, id in ipairs(ids) do
    local incarnation, parent = string.match(redis.call('HGET', KEYS[2], id), '^(%d+) (.*)$')
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    if parent ~= '' then redis.call('ZREM', KEYS[3], parent .. ' ' .. id) end
    table.insert(doomed, {id, incarnation})
  end
end
local out = {}
for _, entry in ipairs(doomed) do
  redis.call('HSET', KEYS[4], entry[1], entry[2])
  table.insert(out, entry[1])
  table.insert(out, entry[2])
end
return out
"""
"""KEYS: sessions, meta, children, removing. ARGV: id ('' for every session).
Flat [id, incarnation, ...], the session first then its descendants breadth-first."""

_FINISH_REMOVAL_IN_INDEX = """
local high_water = tonumber(redis.call('HGET', KEYS[1], 'high_water') or '0')
if tonumber(ARGV[1]) > high_water then redis.call('HSET', KEYS[1], 'high_water', ARGV[1]) end
for i = 2, #ARGV, 2 do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[i + 1] then redis.call('HDEL', KEYS[2], ARGV[i]) end
end
return 1
"""
"""KEYS: counters, removing. ARGV: high-water candidate, then id, incarnation pairs."""

_INIT_SESSION = """
local current = redis.call('HMGET', KEYS[1], 'incarnation', 'revision', 'parent', 'change')
if current[1] and tonumber(current[1]) >= tonumber(ARGV[1]) then
  return {0, current[2], current[3], current[4]}
end
local start = tonumber(ARGV[3])
local removed = redis.call('GET', KEYS[5])
if removed and tonumber(removed) + 1 > start then start = tonumber(removed) + 1 end
if current[2] and tonumber(current[2]) + 2 > start then start = tonumber(current[2]) + 2 end
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5])
local change = string.format('[%d,"snapshot","",[]]', start)
redis.call('HSET', KEYS[1], 'incarnation', ARGV[1], 'parent', ARGV[2], 'revision', string.format('%d', start),
  'change', change)
return {1, string.format('%d', start), ARGV[2], change}
"""
"""KEYS: state, log, requests, request revisions, removed. ARGV: incarnation, parent, start.
Creates the session's data unless this or a later incarnation has it; a new incarnation
starts above every revision an earlier one reached, its removal included (as the memory store
does). {1|0, revision, parent, change}."""

_DELETE_SESSION = """
local current = redis.call('HMGET', KEYS[1], 'incarnation', 'revision')
if not current[1] then return tonumber(redis.call('GET', KEYS[5]) or '0') end
if tonumber(current[1]) > tonumber(ARGV[1]) then return 0 end
local removed = tonumber(current[2]) + 1
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('SET', KEYS[5], string.format('%d', removed), 'EX', ARGV[4])
redis.call('PUBLISH', ARGV[2], ARGV[3] .. '\\n' .. string.format('[%d,"session_removed"]', removed))
return removed
"""
"""KEYS: state, log, requests, request revisions, removed. ARGV: incarnation, channel, id, ttl.
The removal revision (also when another replica deleted the data first), or 0 when a later
incarnation owns the data or nothing is known."""

_COMMIT = """
local revision = redis.call('HGET', KEYS[1], 'revision')
if not revision or tonumber(revision) ~= tonumber(ARGV[1]) then return 0 end
local new = tonumber(ARGV[1]) + 1
redis.call('HSET', KEYS[1], 'revision', string.format('%d', new), 'change', ARGV[2])
local limit = tonumber(ARGV[3])
if limit > 0 then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('LTRIM', KEYS[2], -limit, -1)
else
  redis.call('DEL', KEYS[2])
end
if ARGV[8] ~= '' then
  redis.call('HSET', KEYS[3], ARGV[8], ARGV[9])
  redis.call('ZADD', KEYS[4], new, ARGV[8])
  local forgotten = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[10])
  for _, request_id in ipairs(forgotten) do redis.call('HDEL', KEYS[3], request_id) end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', '(' .. ARGV[10])
end
local notice = ARGV[7]
if notice == '' then notice = ARGV[2] end
redis.call('PUBLISH', ARGV[5], ARGV[6] .. '\\n' .. notice)
local known = tonumber(ARGV[4])
local missed = new - 1 - known
if known < 0 or missed <= 0 or redis.call('LLEN', KEYS[2]) < missed + 1 then return {} end
return redis.call('LRANGE', KEYS[2], -(missed + 1), -2)
"""
"""KEYS: state, log, requests, request revisions. ARGV: previous revision, change, history limit,
revision this replica delivered last (-1: none), channel, id, notice ('' : the change itself),
request id ('' : none), request result, forget requests before this revision.
0 when the session is not at the previous revision; otherwise the logged changes between the
delivered revision and this one (empty when there are none or the log cannot bridge them)."""

_READ_SINCE = """
local state = redis.call('HMGET', KEYS[1], 'revision', 'parent', 'change')
if not state[1] then return {redis.call('GET', KEYS[3]) or '0'} end
local missing = tonumber(state[1]) - tonumber(ARGV[1])
if tonumber(ARGV[1]) < 0 or missing <= 0 then return {state[1], state[2], state[3], 1, {}} end
if redis.call('LLEN', KEYS[2]) < missing then return {state[1], state[2], state[3], 0, {}} end
return {state[1], state[2], state[3], 1, redis.call('LRANGE', KEYS[2], -missing, -1)}
"""
"""KEYS: state, log, removed. ARGV: revision (-1: none).
{removed at} for a missing session, else {revision, parent, change, bridged, changes after}."""


@dataclass(frozen=True, slots=True)
class RedisLocation:
    """Where the store lives: a redis-py URL and the prefix of every key and channel."""

    url: str
    prefix: str


def parse_redis_url(url: str) -> RedisLocation:
    """``redis[s]://[user:password@]host:port/db[?prefix=name:&socket_timeout=...]``."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError(f"redis store URL needs a host: redis://host:port/db, not {url!r}")
    query = parse_qsl(parts.query)
    prefixes = [value for key, value in query if key == "prefix"]
    prefix = prefixes[-1] if prefixes else DEFAULT_PREFIX
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"redis key prefix must not contain braces (they pick cluster slots): {prefix!r}")
    rest = urlencode([(key, value) for key, value in query if key != "prefix"])
    return RedisLocation(urlunsplit(parts._replace(query=rest)), prefix)


class _Keys:
    """Key and channel names for one prefix."""

    def __init__(self, prefix: str) -> None:
        self.channel = f"{prefix}changes"
        index = f"{prefix}{{index}}"
        self.sessions = f"{index}:sessions"
        self.meta = f"{index}:meta"
        self.children = f"{index}:children"
        self.counters = f"{index}:counters"
        self.removing = f"{index}:removing"
        self._prefix = prefix

    def session(self, session_id: str) -> tuple[str, str, str, str, str]:
        """state, log, requests, request revisions, removed: one hash slot per session."""
        base = f"{self._prefix}{{s:{session_id}}}"
        return f"{base}:state", f"{base}:log", f"{base}:requests", f"{base}:request-revisions", f"{base}:removed"

    def index(self) -> list[str]:
        return [self.sessions, self.meta, self.children, self.counters]

    def removal(self) -> list[str]:
        return [self.sessions, self.meta, self.children, self.removing]


def _encode_change(change: Change) -> bytes:
    todos = [[t.id, t.content, t.status.value, t.priority.value] for t in change.todos]
    entry = [change.revision, change.kind.value, change.todo_id, todos]
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _decode_todos(todos: list[list[str]]) -> tuple[Todo, ...]:
    return tuple(Todo(i, c, TodoStatus(s), TodoPriority(p)) for i, c, s, p in todos)


def _decode_change(session_id: str, data: Any) -> Change:
    revision, kind, todo_id, todos = json.loads(data)
    return Change(session_id, ChangeKind(kind), revision, _decode_todos(todos), todo_id)


def _encode_result(result: AddResult) -> bytes:
    todo = result.todo
    entry = [[todo.id, todo.content, todo.status.value, todo.priority.value], result.index, result.revision]
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":")).encode()


def _decode_result(data: Any) -> AddResult:
    todo, index, revision = json.loads(data)
    return AddResult(_decode_todos([todo])[0], index, revision)


def _text(reply: bytes | str) -> str:
    return reply if isinstance(reply, str) else reply.decode()


def _state(session_id: str, revision: Any, parent: Any, change: Any) -> SessionState:
    """A session from the Redis replies of its state hash."""
    return SessionState(session_id, _text(parent), int(revision), _decode_change(session_id, change).todos)


@contextmanager
def _reachable() -> Iterator[None]:
    """A Redis that cannot be reached (down, restarting, failing over) is UNAVAILABLE: retry the call."""
    try:
        yield
    except _UNREACHABLE as error:
        raise Unavailable(f"the redis store is unreachable ({error}); retry") from error


class RedisStore:
    def __init__(self, url: str, history_limit: int = 64) -> None:
        location = parse_redis_url(url)
        self._keys = _Keys(location.prefix)
        self._history_limit = history_limit
        self._redis: Redis = Redis.from_url(location.url, retry=Retry(NoBackoff(), 0), **_CONNECTION_DEFAULTS)
        register = self._redis.register_script
        self._create_in_index = register(_CREATE_IN_INDEX)
        self._remove_from_index = register(_REMOVE_FROM_INDEX)
        self._finish_removal_in_index = register(_FINISH_REMOVAL_IN_INDEX)
        self._init_session = register(_INIT_SESSION)
        self._delete_session = register(_DELETE_SESSION)
        self._commit = register(_COMMIT)
        self._read_since = register(_READ_SINCE)
        self._delivered: OrderedDict[str, int] = OrderedDict()
        """Per session followed here, the revision its watchers are known to have: the revision first
        read here (no watcher of this replica can be behind it), then each one handed to the listener."""
        self._listener: Callable[[Change], None] = lambda change: None
        self._availability_listener: Callable[[bool], Awaitable[None]] | None = None
        self._follower: asyncio.Task[None] | None = None
        self._following = asyncio.Event()

    # Lifecycle

    async def open(self) -> None:
        """Check Redis, create the global list, finish interrupted removals, start following."""
        try:
            with _reachable():
                await self._ensure_global_list()
                await self._finish_interrupted_removals()
        except Unavailable:
            await self._redis.aclose()
            raise
        self._follower = asyncio.create_task(self._follow(), name="redis-store-follower")
        try:
            async with asyncio.timeout(_OPEN_TIMEOUT):
                await self._following.wait()
        except TimeoutError:
            await self.close()
            raise Unavailable(f"could not subscribe to the redis store's notices within {_OPEN_TIMEOUT}s") from None

    async def close(self) -> None:
        if self._follower is not None:
            # Cancelled again until it stops: on Python 3.11 a cancellation landing as redis-py's
            # asyncio.wait_for-guarded write completes is swallowed (fixed in 3.12).
            while not self._follower.done():
                self._follower.cancel()
                await asyncio.wait([self._follower], timeout=0.1)
        await self._redis.aclose()

    async def _ensure_global_list(self) -> None:
        high_water = await self._redis.hget(self._keys.counters, "high_water")
        await self._init_session(self._keys.session(GLOBAL_SESSION_ID), [0, "", int(high_water or 0)])

    # Sessions

    async def create_session(self, session_id: str, parent_id: str, max_sessions: int) -> tuple[SessionState, bool]:
        """Fast path: the session exists. Otherwise register it in the index, then create its data."""
        if (existing := await self.get(session_id)) is not None:
            if existing.parent_id != parent_id:
                raise ParentMismatch(session_id, existing.parent_id)
            return existing, False
        with _reachable():
            outcome, *found = await self._create_in_index(self._keys.index(), [session_id, parent_id, max_sessions])
        if outcome == -1:
            raise SessionNotFound(parent_id)
        if outcome == -2:
            raise LimitExceeded("sessions", max_sessions)
        meta, high_water = found
        incarnation, recorded_parent = _text(meta).split(" ", 1)
        if recorded_parent != parent_id:
            raise ParentMismatch(session_id, recorded_parent)
        # Also when the index already had it: a creation cut short (or still under way) is completed.
        with _reachable():
            _, revision, parent, change = await self._init_session(
                self._keys.session(session_id), [incarnation, parent_id, int(high_water)]
            )
        return _state(session_id, revision, parent, change), outcome == 1

    async def remove_session(self, session_id: str) -> list[Change]:
        return await self._remove(session_id)

    async def remove_all_sessions(self) -> list[Change]:
        return await self._remove("")

    async def _remove(self, session_id: str) -> list[Change]:
        """Take sessions out of the index (atomically, with descendants), then delete their data."""
        with _reachable():
            flat = await self._remove_from_index(self._keys.removal(), [session_id])
            doomed = [(_text(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]
            removed_at = await self._delete_data(doomed)
        for (sid, _), revision in zip(doomed, removed_at, strict=True):
            if revision and sid in self._delivered:
                self._track(sid, revision)  # so this replica skips its own removal notice
        return [
            Change(sid, ChangeKind.SESSION_REMOVED, revision)
            for (sid, _), revision in zip(doomed, removed_at, strict=True)
        ]

    async def _delete_data(self, doomed: Sequence[tuple[str, int]]) -> list[int]:
        """Delete sessions' data (each publishing its removal), raise the high-water mark, close the removals."""
        removed_at: list[int] = []
        for start in range(0, len(doomed), _BATCH):
            chunk = doomed[start : start + _BATCH]
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid, incarnation in chunk:
                    args: list[str | int] = [incarnation, self._keys.channel, sid, _REMOVED_TOMBSTONE_SECONDS]
                    await self._delete_session(self._keys.session(sid), args, client=pipe)
                removed_at += [int(revision) for revision in await pipe.execute()]
            closing = [str(value) for sid, incarnation in chunk for value in (sid, incarnation)]
            high_water = max(removed_at[start:], default=-1) + 1
            await self._finish_removal_in_index([self._keys.counters, self._keys.removing], [high_water, *closing])
        return removed_at

    async def _finish_interrupted_removals(self) -> None:
        """Removals a replica could not finish (Redis went away, the process died) are finished here."""
        pending = await self._redis.hgetall(self._keys.removing)
        if pending:
            log.info("finishing %d interrupted session removals", len(pending))
            await self._delete_data([(_text(sid), int(incarnation)) for sid, incarnation in pending.items()])

    async def list_sessions(self, after_id: str, limit: int) -> list[SessionState]:
        sessions: list[SessionState] = []
        low = f"({after_id}" if after_id else "-"
        with _reachable():
            while len(sessions) < limit:
                page = await self._redis.zrangebylex(self._keys.sessions, low, "+", 0, limit - len(sessions))
                if not page:
                    break
                ids = [_text(sid) for sid in page]
                async with self._redis.pipeline(transaction=False) as pipe:
                    for sid in ids:
                        pipe.hmget(self._keys.session(sid)[0], ["revision", "parent", "change"])
                    rows = await pipe.execute()
                # A session whose creation is still under way has no data yet: not listed.
                sessions += [_state(sid, *row) for sid, row in zip(ids, rows, strict=True) if row[0] is not None]
                low = f"({ids[-1]}"
        return sessions

    def held_bytes(self) -> tuple[int, int]:
        return 0, 0  # lists and history live in Redis, not in this process

    async def session_count(self) -> int:
        with _reachable():
            return int(await self._redis.zcard(self._keys.sessions))

    async def get(self, session_id: str) -> SessionState | None:
        with _reachable():
            revision, parent, change = await self._redis.hmget(
                self._keys.session(session_id)[0], ["revision", "parent", "change"]
            )
        if revision is None:
            return None
        state = _state(session_id, revision, parent, change)
        if session_id in self._delivered:
            self._delivered.move_to_end(session_id)
        else:
            self._track(session_id, state.revision)  # followed from now on, also across reconnects
        return state

    async def latest(self, session_id: str) -> SessionState | None:
        """Redis acknowledges a write once it holds it: nothing is pending here."""
        return await self.get(session_id)

    # Writes and history

    async def commit(self, change: Change, request: tuple[str, AddResult] | None = None) -> bool:
        """One script: compare-and-set, log, request id, notice; returns what this replica missed just before."""
        entry = _encode_change(change)
        large = len(entry) > _INLINE_NOTICE_BYTES
        notice = json.dumps([change.revision, change.kind.value]) if large else ""
        request_id, result = (request[0], _encode_result(request[1])) if request else ("", b"")
        args: list[bytes | str | int] = [
            change.revision - 1,
            entry,
            self._history_limit,
            self._delivered.get(change.session_id, -1),
            self._keys.channel,
            change.session_id,
            notice,
            request_id,
            result,
            change.revision - REQUEST_WINDOW,
        ]
        with _reachable():
            missed = await self._commit(self._keys.session(change.session_id)[:4], args)
        if missed == 0:
            return False
        # Other replicas' changes just before this one reach this replica's watchers first, in order.
        for data in missed:
            self._deliver(_decode_change(change.session_id, data))
        self._track(change.session_id, change.revision)
        return True

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        with _reachable():
            found = await self._read_since(self._read_keys(session_id), [revision])
        if len(found) == 1 or revision > int(found[0]) or not found[3]:
            return None
        return [_decode_change(session_id, data) for data in found[4]]

    async def find_request(self, session_id: str, request_id: str) -> AddResult | None:
        with _reachable():
            data = await self._redis.hget(self._keys.session(session_id)[2], request_id)
        return None if data is None else _decode_result(data)

    def _read_keys(self, session_id: str) -> list[str]:
        state, log_, _, _, removed = self._keys.session(session_id)
        return [state, log_, removed]

    # Other replicas' changes

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        self._listener = listener

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """``listener(False)`` when the connection to Redis is lost, ``listener(True)`` once followed again."""
        self._availability_listener = listener

    def _track(self, session_id: str, revision: int) -> None:
        self._delivered[session_id] = revision
        self._delivered.move_to_end(session_id)
        if len(self._delivered) > _TRACKED_SESSIONS:
            self._delivered.popitem(last=False)

    def _deliver(self, change: Change) -> None:
        """Hand one change to the listener iff it is newer than what this replica delivered."""
        delivered = self._delivered.get(change.session_id)
        if delivered is not None and change.revision <= delivered:
            return
        self._track(change.session_id, change.revision)
        self._listener(change)

    async def _follow(self) -> None:
        """The store's own task: subscribe, catch up, apply notices; after a disconnect, again."""
        failures = 0
        while True:
            try:
                async with self._redis.pubsub() as pubsub:
                    await pubsub.subscribe(self._keys.channel)
                    while (await pubsub.get_message(timeout=None)) is None:
                        pass  # the subscribe confirmation: from here on no notice is missed
                    if failures:
                        await self._recover()
                    failures = 0
                    self._following.set()
                    await self._announce(True)
                    while True:
                        message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                        if message is not None and message["type"] == "message":
                            await self._apply(message["data"])
            except Exception as error:  # a lost connection, or a bug: either way re-read, never stop following
                if not failures:
                    if isinstance(error, _UNREACHABLE):
                        log.warning("lost the redis store (%s); reconnecting", error)
                    else:
                        log.exception("following the redis store failed; reconnecting")
                    await self._announce(False)
                await asyncio.sleep(_RECONNECT_DELAYS[min(failures, len(_RECONNECT_DELAYS) - 1)])
                failures += 1

    async def _recover(self) -> None:
        """After a disconnect anything may have been missed: re-read every session followed here."""
        await self._ensure_global_list()
        await self._finish_interrupted_removals()
        await self._catch_up(list(self._delivered))
        log.info("following the redis store again")

    async def _announce(self, available: bool) -> None:
        if self._availability_listener is not None:
            await self._availability_listener(available)

    async def _apply(self, notice: bytes) -> None:
        """One notice: deliver it as is when it is the next revision, else re-read the session."""
        session, _, body = notice.partition(b"\n")
        session_id = session.decode()
        entry = json.loads(body)
        revision, kind = entry[0], entry[1]
        delivered = self._delivered.get(session_id)
        if delivered is not None and revision <= delivered:
            return  # delivered already: this replica's own change or removal, or an older incarnation's
        if kind == ChangeKind.SESSION_REMOVED and delivered is None:
            # Never read here, so no watcher to spare from a re-created session: no need to look.
            self._listener(Change(session_id, ChangeKind.SESSION_REMOVED, revision))
        elif len(entry) == 4 and (delivered is None or revision == delivered + 1):
            self._deliver(Change(session_id, ChangeKind(kind), revision, _decode_todos(entry[3]), entry[2]))
        else:
            await self._catch_up([session_id])

    async def _catch_up(self, session_ids: Sequence[str]) -> None:
        """Re-read sessions; deliver what this replica has not: logged changes, a RESET or the removal."""
        for start in range(0, len(session_ids), _BATCH):
            chunk = session_ids[start : start + _BATCH]
            asked = [self._delivered.get(sid) for sid in chunk]
            async with self._redis.pipeline(transaction=False) as pipe:
                for sid, after in zip(chunk, asked, strict=True):
                    await self._read_since(self._read_keys(sid), [-1 if after is None else after], client=pipe)
                found = await pipe.execute()
            for sid, after, result in zip(chunk, asked, found, strict=True):
                self._reconcile(sid, after, result)

    def _reconcile(self, session_id: str, asked: int | None, found: list[Any]) -> None:
        """Deliver the difference between what was asked after and what Redis holds now."""
        delivered = self._delivered.get(session_id)
        if len(found) == 1:
            removed_at = int(found[0]) or (delivered or 0) + 1
            if delivered is None or delivered < removed_at:
                self._listener(Change(session_id, ChangeKind.SESSION_REMOVED, removed_at))
            self._delivered.pop(session_id, None)
            return
        revision, parent, change, bridged, changes = found
        if delivered is not None and int(revision) <= delivered:
            return
        if asked is not None and bridged:
            for data in changes:
                self._deliver(_decode_change(session_id, data))
        else:
            state = _state(session_id, revision, parent, change)
            self._deliver(Change(session_id, ChangeKind.RESET, state.revision, state.todos))

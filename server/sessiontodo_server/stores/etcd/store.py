"""The etcd store: stateless replicas on an etcd cluster, every acknowledged write committed by a
majority of its members, so that losing any minority of them (the leader included) loses none.

etcd keeps sessiontodo's contract natively: one revision for the whole keyspace (the feed
cursor), watches from a revision (resuming), compaction (RESET), Txn with compares (a write's
atomic step). A write reads the session's newest version (cached: ``cache.py``), applies the
mutation with ``mutations.apply``'s rules, and commits it with one Txn that compares the
session's revision — and, for an AddTodo with a request id, that the id is new; a failed compare
answers with the current version and the write is applied to that one, so unconditional writes
never fail on contention. Creating a session and removing one with its descendants are one Txn
each, too (removing more than ``SESSIONS_PER_TXN`` takes several). Each process follows the
store's keys with one watch (``follower.py``) and takes turns with its own writes so its
watchers see every replica's changes in commit order (``turns.py``). Key layout and URL:
``keys.py``; values: ``records.py``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace

import grpc

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain import mutations
from sessiontodo_server.domain.batch import Batch, BatchWritten, Write, WriteContext
from sessiontodo_server.domain.budget import DEFAULT_MEMORY_BUDGET, MemoryBudget
from sessiontodo_server.domain.errors import (
    LimitExceeded,
    ParentMismatch,
    RevisionMismatch,
    SessionNotFound,
    TodoError,
    Unavailable,
)
from sessiontodo_server.domain.mutations import RemembersResult
from sessiontodo_server.domain.store import (
    GLOBAL_SESSION_ID,
    REQUEST_RETENTION_SECONDS,
    REQUEST_RETENTION_WRITES,
    AddResult,
    SessionState,
    StoreStartupError,
    Written,
)
from sessiontodo_server.domain.tenancy import SEPARATOR, tenant_of
from sessiontodo_server.domain.values import (
    EVERY_SESSION,
    Change,
    ChangeKind,
    RemovalReason,
    SessionFilter,
    SessionInfo,
    is_global_list,
)
from sessiontodo_server.stores.codec import remembered_batch, replayed_batch
from sessiontodo_server.stores.etcd import deadlines, txns
from sessiontodo_server.stores.etcd.batch import batch_txn, cached_reads, plan_batch, read_batch
from sessiontodo_server.stores.etcd.cache import SessionCache, Version
from sessiontodo_server.stores.etcd.client import EtcdClient, unavailable
from sessiontodo_server.stores.etcd.deadlines import Deadlines
from sessiontodo_server.stores.etcd.events import DELETE, changes_of, cursor, revision_of
from sessiontodo_server.stores.etcd.follower import Follower, HistoryLost
from sessiontodo_server.stores.etcd.history import PAGE, feed_between, pages, session_history
from sessiontodo_server.stores.etcd.keys import Keys, parse_etcd_url, range_end
from sessiontodo_server.stores.etcd.records import (
    Record,
    decode_mark,
    decode_record,
    decode_result,
    encode_record,
    encode_result,
)
from sessiontodo_server.stores.etcd.tree import SESSIONS_PER_TXN, count_of, read_counts, read_tree, removal
from sessiontodo_server.stores.etcd.turns import Turn, Turns

log = logging.getLogger(__name__)

PRUNE_REQUESTS_EVERY = 1000
"""Every this many revisions of a session, its request ids past retention are forgotten."""
BATCH_ATTEMPTS = 16
"""Plans of one batch before it gives up with UNAVAILABLE (each lost to another replica's write)."""
LEASE_SHARED_SECONDS = 60.0
"""How long one lease takes the request ids of new batches (``_request_lease``)."""


@dataclass
class _Writers:
    """The writes to one session through this replica: one holds the lock, the others wait."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    count: int = 0


class EtcdStore:
    def __init__(
        self,
        url: str,
        history_limit: int = 64,
        feed_history: int = 4096,
        budget: MemoryBudget = DEFAULT_MEMORY_BUDGET,
    ) -> None:
        self._location = parse_etcd_url(url)
        self._keys = Keys(self._location.prefix)
        self._client = EtcdClient(self._location)
        self._history_limit = history_limit
        self._feed_limit = feed_history
        self._cache = SessionCache(budget.lists)
        self._deadlines = Deadlines()
        self._claimed: dict[str, int] = {}
        """Sessions ``expired`` returned, with the revision of the deadline they were due by."""
        self._turns = Turns(os.urandom(6).hex(), self._hand_over)
        self._writers: dict[str, _Writers] = {}
        self._creating = asyncio.Lock()
        self._listener: Callable[[Change], None] = lambda change: None
        self._follower = Follower(self._client, self._keys.prefix, self._deliver, self._resync)
        self._task: asyncio.Task[None] | None = None
        self._delivered = 0
        """Every change up to this cursor was handed over by the watch (or published by its writer)."""
        self._lease: tuple[int, float] | None = None
        """The lease new batch request ids go on, and until when (loop time)."""
        self._reached: deque[tuple[str, Sequence[Change]]] = deque()
        """Changes of this replica's writes the watch reached, whose writers may not have answered yet."""
        self.feed_epoch = ""

    # Lifecycle

    async def open(self) -> None:
        """Authenticate, create the store's keys when missing, load the deadlines, start watching;
        members that do not answer are tried again for the store's timeout before giving up."""
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + self._location.timeout
        try:
            while True:
                try:
                    async with self._calls():
                        await self._client.open()
                        revision = await self._load()
                    break
                except Unavailable as error:
                    if loop.time() >= give_up_at:
                        members = ", ".join(self._location.endpoints)
                        raise StoreStartupError(f"cannot reach the etcd cluster at {members}") from error
                    await asyncio.sleep(0.1)
        except BaseException:
            await self._client.close()
            raise
        self._follower.revision = revision
        self._task = asyncio.create_task(self._follower.run(), name="etcd-store-follower")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])
        await self._client.close()

    async def _load(self) -> int:
        """Set up the store's keys, read the deadlines; the revision they were read at."""
        self.feed_epoch = await self._create_missing_keys()
        first = await self._client.range(pb.RangeRequest(key=self._keys.meta))
        revision = first.header.revision
        newest = pb.RangeRequest(
            key=self._keys.prefix,
            range_end=range_end(self._keys.prefix),
            sort_order=pb.RangeRequest.DESCEND,
            sort_target=pb.RangeRequest.MOD,
            limit=1,
            keys_only=True,
            revision=revision,
        )
        last = (await self._client.range(newest)).kvs[0].mod_revision  # meta exists: never empty
        self._deadlines.clear()
        async for kv in pages(self._client, self._keys.deadlines, range_end(self._keys.deadlines), revision):
            self._deadlines.set(self._keys.session_id(kv.key), float(kv.value), kv.mod_revision)
        self._delivered = cursor(last)
        return revision

    async def _create_missing_keys(self) -> str:
        """The feed epoch, made with the global list on a fresh prefix."""
        meta, global_list = self._keys.meta, self._keys.session(GLOBAL_SESSION_ID)
        epoch = os.urandom(6).hex().encode()
        empty = encode_record(Record("", 0, None, "", "", 0, SessionInfo(), ()))
        txn = pb.TxnRequest(
            compare=[txns.absent(meta)],
            success=[txns.put(meta, epoch), txns.put(global_list, empty)],
            failure=[txns.get(meta)],
        )
        response = await self._client.txn(txn)
        if response.succeeded:
            log.info("created the etcd store's keys under %r", self._keys.prefix.decode())
            return epoch.decode()
        stored: bytes = response.responses[0].response_range.kvs[0].value
        missing = pb.TxnRequest(compare=[txns.absent(global_list)], success=[txns.put(global_list, empty)])
        await self._client.txn(missing)
        return stored.decode()

    async def _resync(self) -> int:
        """History this replica needed is gone: reload, and every watcher and feed re-reads."""
        await self._settle()
        async with self._calls():
            revision = await self._load()
        self._cache.clear()
        self._listener(Change("", ChangeKind.RESET, 0, cursor=self._delivered))
        return revision

    @asynccontextmanager
    async def _calls(self) -> AsyncIterator[None]:
        """etcd's refusals other than the domain's (no space, permission denied…) are UNAVAILABLE."""
        try:
            yield
        except grpc.aio.AioRpcError as error:
            raise unavailable(error) from error

    # The watch

    async def _deliver(self, revision: int, events: Sequence[kv_pb2.Event]) -> None:
        """One revision's events: the cache and the deadlines follow them; their changes are handed
        over, unless this replica's own write is publishing them."""
        for event in events:
            key, kind = event.kv.key, self._keys.kind(event.kv.key)
            if kind == b"s/":
                session_id = self._keys.session_id(key)
                if event.type == DELETE:
                    self._cache.discard(session_id)
                elif self._cache.older(session_id, revision):  # another replica's write to a cached session
                    self._cache.put(session_id, Version(revision, decode_record(event.kv.value)))
            elif kind == b"d/":
                session_id = self._keys.session_id(key)
                if event.type == DELETE:
                    self._deadlines.discard(session_id)
                else:
                    self._deadlines.set(session_id, float(event.kv.value), revision)
            elif key == self._keys.meta and event.type == DELETE:
                raise HistoryLost("the store's keys were deleted")
        token, changes = changes_of(self._keys, revision, events)
        if not changes:
            return
        if self._turns.is_own(token) and self._turns.reach(token, changes):
            self._reached.append((token, changes))
            return
        await self._settle()
        self._hand_over(changes)

    async def _settle(self) -> None:
        """Wait until this replica's writes the watch reached are answered; hand over the changes of
        those that gave up."""
        while self._reached:
            token, changes = self._reached.popleft()
            if not await self._turns.settle(token, changes):
                self._hand_over(changes)

    def _hand_over(self, changes: Sequence[Change]) -> None:
        if changes[0].cursor < self._turns.last_published:
            # Published past already (a removal of several Txns, or an own write that gave up): it
            # can no longer come in order, so every watcher and feed re-reads instead.
            self._listener(Change("", ChangeKind.RESET, 0, cursor=self._turns.last_published))
        for change in changes:
            self._listener(change)
        self._delivered = max(self._delivered, changes[-1].cursor)

    async def _reached_by_watch(self, turn: Turn) -> None:
        """Wait until the watch reached ``turn``'s first Txn (everything before it was handed over)
        and this replica's write reached before it was answered."""
        if not await turn.answered_in_order(self._location.timeout):
            log.warning("a write committed in etcd was not seen on the watch in time; answered UNAVAILABLE")
            raise Unavailable("the store is unreachable; retry")

    def _publish(self, turn: Turn, changes: Sequence[Change]) -> None:
        """``changes`` are returned (and so published) now."""
        if changes and changes[0].cursor < self._turns.last_published:
            # A removal of several Txns was published past it: every watcher and feed re-reads.
            self._listener(Change("", ChangeKind.RESET, 0, cursor=self._turns.last_published))
        self._turns.publish(turn, changes)
        if changes:
            self._delivered = max(self._delivered, changes[-1].cursor)

    # Sessions

    async def create_session(
        self, session_id: str, info: SessionInfo, max_sessions: int, origin: str, *, max_per_tenant: int = 0
    ) -> tuple[SessionState, Change | None]:
        turn = self._turns.begin()
        try:
            async with self._calls():
                async with self._creating:  # creations through one replica never race each other's counters
                    state, created = await self._create(session_id, info, (max_sessions, max_per_tenant), origin, turn)
                if created is not None:
                    await self._reached_by_watch(turn)
                    self._publish(turn, [created])
            return state, created
        finally:
            self._turns.end(turn)

    async def _create(
        self, session_id: str, info: SessionInfo, limits: tuple[int, int], origin: str, turn: Turn
    ) -> tuple[SessionState, Change | None]:
        """One Txn: the id is free, its parent exists, and the session counters (``keys.py``) are
        below the limits (``max_sessions``, ``max_per_tenant``) and unchanged since read."""
        key, mark_key = self._keys.session(session_id), self._keys.mark(session_id)
        in_tenant = self._keys.tenant_count(tenant_of(session_id))
        counted = not is_global_list(session_id)  # a tenant's global list counts only in the total
        reads = [txns.get(key), txns.get(mark_key), txns.get(self._keys.count), txns.get(in_tenant)]
        if info.parent_id:
            reads.append(txns.get(self._keys.session(info.parent_id), count_only=True))
        while True:
            found = (await self._client.txn(pb.TxnRequest(success=reads), writes=False)).responses
            if existing := found[0].response_range.kvs:
                record = decode_record(existing[0].value)
                if record.info.parent_id != info.parent_id:
                    raise ParentMismatch(session_id, record.info.parent_id)
                return record.state(session_id), None
            if info.parent_id and not found[4].response_range.count:
                raise SessionNotFound(info.parent_id)
            (total, total_at), (of_tenant, tenant_at) = (count_of(found[n].response_range.kvs) for n in (2, 3))
            max_sessions, max_per_tenant = limits
            if total >= max_sessions:
                raise LimitExceeded("sessions", max_sessions)
            if max_per_tenant and counted and of_tenant >= max_per_tenant:
                raise LimitExceeded("sessions per tenant", max_per_tenant)
            marks = found[1].response_range.kvs
            revision = decode_mark(marks[0].value).revision + 1 if marks else 0
            record = Record(turn.token, revision, ChangeKind.SESSION_CREATED, "", origin, 0, info, ())
            compare = [
                txns.absent(key),
                txns.written_at(mark_key, marks[0].mod_revision if marks else 0),
                txns.written_at(self._keys.count, total_at),
                txns.written_at(in_tenant, tenant_at),
            ]
            writes = [
                txns.put(key, encode_record(record)),
                txns.delete(mark_key),
                txns.put(self._keys.count, str(total + 1).encode()),
            ]
            if counted:
                writes.append(txns.put(in_tenant, str(of_tenant + 1).encode()))
            if info.parent_id:
                compare.append(txns.exists(self._keys.session(info.parent_id)))
                writes.append(txns.put(self._keys.child(info.parent_id, session_id), b""))
            if info.expires_at is not None:
                writes.append(txns.put(self._keys.deadline(session_id), repr(info.expires_at).encode()))
            response = await self._client.txn(pb.TxnRequest(compare=compare, success=writes))
            if response.succeeded:
                self._cache.put(session_id, Version(response.header.revision, record))
                return record.state(session_id), record.change(session_id, cursor(response.header.revision))

    async def remove_session(self, session_id: str, reason: RemovalReason, origin: str = "") -> list[Change]:
        claimed = self._claimed.pop(session_id, None) if reason is RemovalReason.EXPIRED else None
        turn = self._turns.begin()
        try:
            async with self._calls():
                removals = await self._remove_trees([session_id], reason, origin, turn, claimed)
            self._publish(turn, removals)
            return removals
        except Unavailable:
            if claimed is not None:
                self._deadlines.retry(session_id)
            raise
        finally:
            self._turns.end(turn)

    async def remove_all_sessions(self, origin: str = "", only: SessionFilter = EVERY_SESSION) -> list[Change]:
        """Page by page, each matching session with its descendants (one Txn for up to
        ``SESSIONS_PER_TXN`` of them): not one atomic step, as it is on the other stores."""
        turn = self._turns.begin()
        try:
            removals: list[Change] = []
            async with self._calls():
                while page := await self._matching(only):
                    removals += await self._remove_trees(page, RemovalReason.REMOVED, origin, turn, None)
            self._publish(turn, removals)
            return removals
        finally:
            self._turns.end(turn)

    async def _matching(self, only: SessionFilter) -> list[str]:
        """The first page of ids ``only`` matches (the global lists excluded)."""
        return [state.session_id for state in await self.list_sessions("", PAGE, only)]

    async def _remove_trees(
        self, roots: list[str], reason: RemovalReason, origin: str, turn: Turn, claimed: int | None
    ) -> list[Change]:
        """Remove ``roots`` and their descendants (``tree.py``); ``claimed`` (an expiry) also compares
        the first root's deadline: if it moved (the session was written meanwhile), nothing is removed."""
        removals: list[Change] = []
        pending = list(dict.fromkeys(roots))
        while pending:
            found = await read_tree(self._client, self._keys, pending)
            if not found.versions:
                pending = found.rest
                continue
            counts = await read_counts(self._client, self._keys, found)
            compare, writes, marks = removal(self._keys, found, counts, turn.token, reason, origin)
            deadline = self._keys.deadline(roots[0])
            if claimed is not None:
                compare.append(txns.written_at(deadline, claimed))
            response = await self._client.txn(
                pb.TxnRequest(compare=compare, success=writes, failure=[txns.get(deadline)])
            )
            if not response.succeeded:
                kvs = response.responses[0].response_range.kvs
                if claimed is not None and (not kvs or kvs[0].mod_revision != claimed):
                    return removals  # written (or removed) since it was due: not expired
                continue  # a session changed or got a child: read again
            claimed = None
            for session_id, mark in marks:
                self._cache.discard(session_id)
                removals.append(mark.change(session_id, cursor(response.header.revision, mark.later)))
            if not turn.reached.done():
                await self._reached_by_watch(turn)
            pending = found.rest
        return removals

    async def list_sessions(self, after_id: str, limit: int, only: SessionFilter) -> list[SessionState]:
        found: list[SessionState] = []
        async with self._calls():
            async for session_id, record in self._candidates(after_id, only):
                if not is_global_list(session_id) and only.matches(session_id, record.info):
                    found.append(record.state(session_id))
                    if len(found) == limit:
                        break
        return found

    async def _candidates(self, after_id: str, only: SessionFilter) -> AsyncIterator[tuple[str, Record]]:
        """Sessions with ids after ``after_id``, in id order, from the narrowest index the filter allows."""
        if only.session_ids or only.parent_id:
            if only.session_ids:
                ids = sorted(sid for sid in only.session_ids if sid > after_id)
            else:
                links = self._keys.children(only.parent_id)
                ids = [
                    kv.key[len(links) :].decode()
                    async for kv in pages(self._client, links, range_end(links), keys_only=True)
                    if kv.key[len(links) :].decode() > after_id
                ]
            for offset in range(0, len(ids), PAGE):
                chunk = ids[offset : offset + PAGE]
                response = await self._client.txn(
                    pb.TxnRequest(success=[txns.get(self._keys.session(sid)) for sid in chunk]), writes=False
                )
                for session_id, found in zip(chunk, response.responses, strict=True):
                    if found.response_range.kvs:
                        yield session_id, decode_record(found.response_range.kvs[0].value)
            return
        start = self._keys.session(max(after_id, only.id_prefix)) + (b"\0" if after_id >= only.id_prefix else b"")
        end = range_end(self._keys.session(only.id_prefix)) if only.id_prefix else range_end(self._keys.sessions)
        async for kv in pages(self._client, start, end):
            yield self._keys.session_id(kv.key), decode_record(kv.value)

    async def session_count(self) -> int:
        async with self._calls():
            response = await self._client.range(pb.RangeRequest(key=self._keys.count))
        return count_of(response.kvs)[0]

    def feed_position(self) -> int:
        return self._delivered

    def held_bytes(self) -> tuple[int, int]:
        """The cache and the deadlines; lists, histories and the feed live in etcd."""
        return self._cache.bytes + len(self._deadlines) * deadlines.ENTRY_BYTES, 0

    async def get(self, session_id: str) -> SessionState | None:
        async with self._calls():
            version, _ = await self._read(session_id)
        return None if version is None else version.record.state(session_id)

    async def _read(self, session_id: str, request_id: str = "") -> tuple[Version | None, AddResult | None]:
        """The session's newest version, and the result remembered for ``request_id``."""
        reads = [txns.get(self._keys.session(session_id))]
        if request_id:
            reads.append(txns.get(self._keys.request(session_id, request_id)))
        response = await self._client.txn(pb.TxnRequest(success=reads), writes=False)
        return self._found(session_id, response.responses)

    def _found(self, session_id: str, responses: Sequence[pb.ResponseOp]) -> tuple[Version | None, AddResult | None]:
        """What ``_read`` (or a write's failed compare) read: the version and a remembered result."""
        kvs = responses[0].response_range.kvs
        if not kvs:
            self._cache.discard(session_id)
            return None, None
        version = Version(kvs[0].mod_revision, decode_record(kvs[0].value))
        self._cache.put(session_id, version)
        remembered = responses[1].response_range.kvs if len(responses) > 1 else ()
        return version, decode_result(remembered[0].value)[0] if remembered else None

    # Writes and history

    async def write_batch(self, batch: Batch, context: WriteContext) -> BatchWritten:
        """Planned on what it reads at one revision and applied by one Txn comparing all of it
        (``batch.py``); when another replica wrote meanwhile, planned again on the new state."""
        turn = self._turns.begin()
        try:
            async with self._calls():
                written = await self._write_batch(batch, context, turn.token)
                if written.changes:
                    await self._reached_by_watch(turn)
                    self._publish(turn, written.changes)
            return written
        finally:
            self._turns.end(turn)

    async def _write_batch(self, batch: Batch, context: WriteContext, token: str) -> BatchWritten:
        """``write_batch`` on cached versions first (``cached_reads``), refusals and no-ops only from
        versions read now; after a lost compare, on the versions the failed Txn read."""
        operations, request_id, fingerprint = batch.operations, context.request_id, batch.fingerprint
        request_key = self._keys.batch_request(request_id) if request_id else b""
        reads = cached_reads(self._cache, operations)
        for _ in range(BATCH_ATTEMPTS):
            if reads is None:
                reads = await read_batch(self._client, self._keys, operations, request_key, self._location.max_txn_ops)
            if reads.remembered is not None:
                return replayed_batch(reads.remembered, request_id, fingerprint)
            try:
                plan = plan_batch(reads, operations, now=context.now, limits=context.limits)
            except TodoError:
                if reads.fresh:
                    raise
                reads = None
                continue
            outcomes = tuple(plan.outcomes)
            if not plan.steps and not request_id:
                if reads.fresh:
                    return BatchWritten(outcomes)  # nothing to write: answered from what was read now
                reads = None
                continue
            txn = batch_txn(
                self._keys,
                reads,
                plan,
                token=token,
                origin=context.origin,
                request_key=request_key,
                remembered=remembered_batch(fingerprint, outcomes),
                lease=await self._request_lease() if request_id else 0,
                location=self._location,
            )
            try:
                response = await self._client.txn(txn.request)
            except grpc.aio.AioRpcError as error:
                if error.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                self._lease = None  # "requested lease not found": etcd lost it (a restored backup)
                continue
            if response.succeeded:
                revision = response.header.revision
                for session_id, final in txn.finals.items():
                    if final is None:
                        self._cache.discard(session_id)
                    else:
                        self._cache.put(session_id, Version(revision, final))
                return BatchWritten(outcomes, txn.committed(revision))
            if request_id and (remembered := response.responses[0].response_range.kvs):
                return replayed_batch(remembered[0].value, request_id, fingerprint)
            reads = reads.refreshed(response, request_key)
        raise Unavailable("the batch kept meeting other writes to its sessions; retry")

    async def _request_lease(self) -> int:
        """The lease batch request ids are remembered on: one granted for ``REQUEST_RETENTION_SECONDS``
        and ``LEASE_SHARED_SECONDS`` more serves the batches of the next ``LEASE_SHARED_SECONDS``,
        so each is kept at least the retention, for one grant a minute."""
        now = asyncio.get_running_loop().time()
        if self._lease is None or now >= self._lease[1]:
            ttl = int(REQUEST_RETENTION_SECONDS + LEASE_SHARED_SECONDS)
            self._lease = (await self._client.grant_lease(ttl), now + LEASE_SHARED_SECONDS)
        return self._lease[0]

    async def write(self, operation: Write, context: WriteContext) -> Written:
        turn = self._turns.begin()
        try:
            async with self._calls():
                async with self._one_writer(operation.session_id):
                    written = await self._write(operation, context, turn.token)
                if written.change is not None:
                    await self._reached_by_watch(turn)
                    self._publish(turn, [written.change])
            return written
        finally:
            self._turns.end(turn)

    @asynccontextmanager
    async def _one_writer(self, session_id: str) -> AsyncIterator[None]:
        """Writes to one session through this replica, one at a time: none of them fails a compare
        because of another of them (each still may because of other replicas)."""
        writers = self._writers.setdefault(session_id, _Writers())
        writers.count += 1
        try:
            async with writers.lock:
                yield
        finally:
            writers.count -= 1
            if not writers.count:
                del self._writers[session_id]

    async def _write(self, operation: Write, context: WriteContext, token: str) -> Written:
        """``write`` against the cached version first; refusals and no-ops only from a version read now."""
        session_id, mutation, expected_revision = operation.session_id, operation.mutation, operation.expected_revision
        request_id, now = context.request_id, context.now
        version, remembered = self._cache.get(session_id), None
        fresh = version is None
        if fresh:
            version, remembered = await self._read(session_id, request_id)
        while True:
            if version is None:
                raise SessionNotFound(session_id)
            state = version.record.state(session_id)
            if remembered is not None:
                return Written(state, result=remembered)
            try:
                if expected_revision is not None and expected_revision != state.revision:
                    raise RevisionMismatch(session_id, expected_revision, state.revision)
                applied = mutations.apply(session_id, state.todos, state.info, mutation, context.limits)
            except TodoError:
                if fresh:
                    raise
                applied = None
            if applied is None:
                if fresh:
                    return Written(state)
                version, remembered = await self._read(session_id, request_id)
                fresh = True
                continue
            info = replace(applied.info, updated_at=now)
            record = Record(
                token,
                state.revision + 1,
                applied.kind,
                applied.todo_id,
                context.origin,
                version.revision,
                info,
                applied.todos,
            )
            result = None
            if isinstance(mutation, RemembersResult):
                result = AddResult(
                    applied.todos[applied.position], applied.position, record.revision, mutation.fingerprint
                )
            txn = await self._write_txn(session_id, version, record, state.info, request_id, result, now)
            response = await self._client.txn(txn)
            if response.succeeded:
                self._cache.put(session_id, Version(response.header.revision, record))
                change = record.change(session_id, cursor(response.header.revision))
                return Written(record.state(session_id), change, result)
            version, remembered = self._found(session_id, response.responses)
            fresh = True

    async def _write_txn(
        self,
        session_id: str,
        version: Version,
        record: Record,
        before: SessionInfo,
        request_id: str,
        result: AddResult | None,
        now: float,
    ) -> pb.TxnRequest:
        """Put the new version if the session is still at ``version`` (and ``request_id`` is new)."""
        key, request = self._keys.session(session_id), self._keys.request(session_id, request_id)
        value = encode_record(record)
        if len(value) > self._location.max_request_bytes - 4096:
            raise LimitExceeded("etcd request bytes", self._location.max_request_bytes)
        compare, writes, failure = [txns.written_at(key, version.revision)], [txns.put(key, value)], [txns.get(key)]
        if request_id:
            compare.append(txns.absent(request))
            failure.append(txns.get(request))
            if result is not None:
                writes.append(txns.put(request, encode_result(result, now)))
        if record.info.expires_at is not None:
            writes.append(txns.put(self._keys.deadline(session_id), repr(record.info.expires_at).encode()))
        elif before.expires_at is not None:
            writes.append(txns.delete(self._keys.deadline(session_id)))
        if record.revision % PRUNE_REQUESTS_EVERY == 0:
            writes += [txns.delete(old) for old in await self._forgotten(session_id, record.revision, now)]
        return pb.TxnRequest(compare=compare, success=writes, failure=failure)

    async def _forgotten(self, session_id: str, revision: int, now: float) -> list[bytes]:
        """Request ids of the session past both retentions (``REQUEST_RETENTION_*``), a Txn's worth."""
        prefix = self._keys.requests(session_id)
        old = []
        async for kv in pages(self._client, prefix, range_end(prefix)):
            result, at = decode_result(kv.value)
            if result.revision < revision - REQUEST_RETENTION_WRITES and at < now - REQUEST_RETENTION_SECONDS:
                old.append(kv.key)
                if len(old) == SESSIONS_PER_TXN * 4:
                    break
        return old

    async def changes_after(self, session_id: str, revision: int) -> list[Change] | None:
        async with self._calls():
            version, _ = await self._read(session_id)
            if version is None or revision > version.record.revision:
                return None
            if version.record.revision - revision > self._history_limit:
                return None
            return await session_history(self._client, self._keys, session_id, version, revision)

    async def feed_after(self, position: int) -> list[Change] | None:
        delivered = self._delivered  # the last change of a revision: revision * CHANGES_PER_REVISION
        if position == delivered:
            return []
        if position > delivered:  # another replica may be ahead; a cursor past etcd's revision is not one
            async with self._calls():
                current = (await self._client.range(pb.RangeRequest(key=self._keys.meta, count_only=True))).header
            return None if revision_of(position) > current.revision else []
        async with self._calls():
            return await feed_between(
                self._client, self._keys, position, delivered, self._feed_limit, self._location.timeout
            )

    async def snapshot(self, tenant: str | None = None) -> tuple[int, list[SessionState]]:
        """Every session (or ``tenant``'s, read from its key prefix; the default tenant's by
        leaving out the others'), read at one revision."""
        start = self._keys.session(f"{tenant}{SEPARATOR}") if tenant else self._keys.sessions
        only = EVERY_SESSION if tenant is None else SessionFilter(tenant=tenant)
        states: list[SessionState] = []
        async with self._calls():
            revision = (await self._client.range(pb.RangeRequest(key=self._keys.meta, count_only=True))).header.revision
            async for kv in pages(self._client, start, range_end(start), revision):
                session_id = self._keys.session_id(kv.key)
                if only.matches(session_id, None):
                    states.append(decode_record(kv.value).state(session_id))
        return cursor(revision), states

    async def expired(self, now: float) -> list[str]:
        """Due by the deadlines this replica follows; removing one as EXPIRED compares its deadline,
        so a session written meanwhile survives and replicas reaping at once remove it once."""
        due = self._deadlines.due(now)
        self._claimed.update(due)
        return [session_id for session_id, _ in due]

    # Other replicas' changes

    def on_external_change(self, listener: Callable[[Change], None]) -> None:
        """Every change another replica makes, in commit order; a RESET with no session id when
        this replica cannot tell what it missed (every watcher then re-reads)."""
        self._listener = listener

    def on_availability_change(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        """``listener(False)`` when the watch cannot reach any member, ``listener(True)`` once it follows again."""
        self._follower.on_availability(listener)

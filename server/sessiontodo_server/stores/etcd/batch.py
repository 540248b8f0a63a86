"""A BatchWrite on the etcd store: what its plan reads, and the one Txn that applies it whole.

The batch is planned with the stores' shared ``BatchPlan`` (``mutations.apply``'s rules, each
operation on the state the ones before it left) on what it read at one revision: the version of
every session it touches (``BatchReach``: those it names, the descendants of those it removes),
the removal marks of the ids it creates (where their revisions start), the session counters. Its
Txn compares all of that — so a write another replica committed in between fails the Txn, which
changes nothing, and the batch is planned again — and puts the last version of each session it
changed (``s/ID``, as a single write does, with its deadline, parent link, removal mark), the
batch record holding every change in order (``records.encode_batch``), the session counters and
the request id's outcomes.

etcd takes at most ``--max-txn-ops`` compares, and as many operations, in one Txn (128 by
default): a session the batch changes costs one of each (a removal up to five operations), so a
batch changing more sessions than that allows is refused (INVALID_ARGUMENT) before anything is
sent, as is one past ``--max-request-bytes`` (RESOURCE_EXHAUSTED, as a single write is).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_server.domain.batch import Operation, Write
from sessiontodo_server.domain.errors import InvalidArgument, LimitExceeded
from sessiontodo_server.domain.tenancy import tenant_of
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, RemovalReason, is_global_list
from sessiontodo_server.stores.batch_plan import BatchPlan, BatchReach, CreateStep, RemoveStep, plan_on_read
from sessiontodo_server.stores.etcd import txns
from sessiontodo_server.stores.etcd.cache import SessionCache, Version
from sessiontodo_server.stores.etcd.client import EtcdClient
from sessiontodo_server.stores.etcd.events import CHANGES_PER_REVISION, cursor
from sessiontodo_server.stores.etcd.keys import REQUEST_HEADROOM, EtcdLocation, Keys, range_end
from sessiontodo_server.stores.etcd.records import (
    IN_BATCH,
    BatchChange,
    Mark,
    Record,
    decode_mark,
    decode_record,
    encode_batch,
    encode_mark,
    encode_record,
)
from sessiontodo_server.stores.etcd.tree import count_of


@dataclass
class BatchReads:
    """What a batch is planned on, read at ``revision``."""

    revision: int = 0
    versions: dict[str, Version | None] = field(default_factory=dict)
    """Every session the batch names (parents of the ones it creates too) and every descendant of
    the ones it removes; None: it does not exist."""
    children: dict[str, list[str]] = field(default_factory=dict)
    """The children of each session the batch may remove."""
    marks: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Ids the batch may create: (the etcd revision of their removal mark, 0 for none; the
    revision they start at)."""
    total: tuple[int, int] = (0, 0)
    """The session counter and the etcd revision it was written at (read when the batch creates or removes)."""
    tenants: dict[str, tuple[int, int]] = field(default_factory=dict)
    """The same, for each tenant the batch may create or remove sessions of."""
    remembered: bytes | None = None
    """The outcomes remembered under the batch's request id."""
    fresh: bool = True
    """Read from etcd now (else from the replica's cache: refusals and no-ops are decided on fresh reads only)."""

    @property
    def sessions_only(self) -> bool:
        """Whether the batch needs nothing but its sessions' versions (it creates and removes none)."""
        return not self.marks and not self.children

    def refreshed(self, failed: pb.TxnResponse, request_key: bytes) -> BatchReads | None:
        """After a Txn (``batch_txn``'s) failed its compares: its sessions as its failure branch
        read them, when they are all the batch needs (else None: read again)."""
        if not self.sessions_only:
            return None
        found = iter(failed.responses[1:] if request_key else failed.responses)
        versions: dict[str, Version | None] = {}
        for session_id in self.versions:
            kvs = next(found).response_range.kvs
            versions[session_id] = Version(kvs[0].mod_revision, decode_record(kvs[0].value)) if kvs else None
        return BatchReads(failed.header.revision, versions)


async def read_batch(
    client: EtcdClient, keys: Keys, operations: Sequence[Operation], request_key: bytes, max_ops: int
) -> BatchReads:
    """What ``operations`` are planned on (and what is remembered under ``request_key``), in one
    round of reads, and one more per level of descendants of the sessions they remove."""
    reads, reach = BatchReads(), BatchReach(operations)
    sessions, creates = reach.named, reach.creates
    tenants = sorted({tenant_of(session_id) for session_id in (*reach.creates, *reach.removes)})
    counted = bool(tenants)
    while sessions or reach.walk or tenants or counted or request_key:
        walked = reach.walk
        requests = [pb.RangeRequest(key=keys.session(session_id)) for session_id in sessions]
        requests += [pb.RangeRequest(key=keys.mark(session_id)) for session_id in creates]
        for session_id in walked:
            children = keys.children(session_id)
            requests.append(pb.RangeRequest(key=children, range_end=range_end(children), keys_only=True))
        requests += [pb.RangeRequest(key=keys.tenant_count(tenant)) for tenant in tenants]
        if counted:
            requests.append(pb.RangeRequest(key=keys.count))
        if request_key:
            requests.append(pb.RangeRequest(key=request_key))
        found = iter(await _ranges(client, reads, requests, max_ops))
        for session_id in sessions:
            kvs = next(found).kvs
            reads.versions[session_id] = Version(kvs[0].mod_revision, decode_record(kvs[0].value)) if kvs else None
        for session_id in creates:
            kvs = next(found).kvs
            reads.marks[session_id] = (kvs[0].mod_revision, decode_mark(kvs[0].value).revision + 1) if kvs else (0, 0)
        children_found: dict[str, list[str]] = {}
        for session_id in walked:
            prefix = len(keys.children(session_id))
            children_found[session_id] = [kv.key[prefix:].decode() for kv in next(found).kvs]
        for tenant in tenants:
            reads.tenants[tenant] = count_of(next(found).kvs)
        if counted:
            reads.total = count_of(next(found).kvs)
        if request_key:
            kvs = next(found).kvs
            if kvs:
                reads.remembered = kvs[0].value
                return reads
        sessions, creates, counted, request_key = reach.found(children_found), [], False, b""
        tenants = sorted({tenant_of(session_id) for session_id in reach.walk} - set(reads.tenants))
    reads.children = reach.children
    return reads


async def _ranges(
    client: EtcdClient, reads: BatchReads, requests: list[pb.RangeRequest], max_ops: int
) -> list[pb.RangeResponse]:
    """``requests`` at the revision of ``reads`` (the first Txn sets it), ``max_ops`` a Txn."""
    found: list[pb.RangeResponse] = []
    for start in range(0, len(requests), max_ops):
        chunk = requests[start : start + max_ops]
        for request in chunk:
            request.revision = reads.revision
        response = await client.txn(pb.TxnRequest(success=[pb.RequestOp(request_range=r) for r in chunk]), writes=False)
        reads.revision = reads.revision or response.header.revision
        found += [op.response_range for op in response.responses]
    return found


def cached_reads(cache: SessionCache, operations: Sequence[Operation]) -> BatchReads | None:
    """What a batch that only writes sessions this replica has cached is planned on first, as a
    single write is (a stale version costs one failed compare); None for any other batch."""
    if not all(isinstance(op, Write) for op in operations):
        return None
    versions: dict[str, Version | None] = {}
    for session_id in dict.fromkeys(op.session_id for op in operations):
        if (version := cache.get(session_id)) is None:
            return None
        versions[session_id] = version
    return BatchReads(versions=versions, fresh=False)


def plan_batch(reads: BatchReads, operations: Sequence[Operation], *, now: float, limits: Limits) -> BatchPlan:
    """``operations`` planned on ``reads``; a failing one raises its error naming its index."""
    return plan_on_read(
        operations,
        {session_id: None if v is None else v.record.state(session_id) for session_id, v in reads.versions.items()},
        reads.children,
        starts={session_id: start for session_id, (_, start) in reads.marks.items()},
        floor=0,
        session_count=reads.total[0],
        tenant_sessions={tenant: count for tenant, (count, _) in reads.tenants.items()},
        now=now,
        limits=limits,
    )


@dataclass(frozen=True, slots=True)
class BatchTxn:
    request: pb.TxnRequest
    changes: list[BatchChange]
    """Every change of the batch, in order."""
    finals: dict[str, Record | None]
    """Each session the batch changed, as it leaves it (None: removed)."""

    def committed(self, revision: int) -> tuple[Change, ...]:
        """The changes, committed at ``revision``: consecutive cursors in order, the last ``cursor(revision)``."""
        count = len(self.changes)
        made = (
            version.change(session_id, cursor(revision, count - 1 - n))
            for n, (session_id, version) in enumerate(self.changes)
        )
        return tuple(change for change in made if change is not None)


def batch_txn(
    keys: Keys,
    reads: BatchReads,
    plan: BatchPlan,
    *,
    token: str,
    origin: str,
    request_key: bytes,
    remembered: str,
    lease: int,
    location: EtcdLocation,
) -> BatchTxn:
    """The Txn applying ``plan`` if what it was planned on still holds; with a ``request_key``,
    remembering ``remembered`` under it on ``lease``. Its failure answers what is remembered, and
    the sessions as they are now when that is all the batch needs (``BatchReads.refreshed``)."""
    changes = _changes(reads, plan, token, origin)
    if len(changes) > CHANGES_PER_REVISION:
        why = f"the batch makes {len(changes)} changes; one etcd Txn numbers at most {CHANGES_PER_REVISION}"
        raise InvalidArgument([("writes", why)])
    compare = [
        txns.written_at(keys.session(session_id), 0 if version is None else version.revision)
        for session_id, version in reads.versions.items()
    ]
    success: list[pb.RequestOp] = []
    failure: list[pb.RequestOp] = []
    finals: dict[str, Record | None] = {}
    last = {session_id: version for session_id, version in changes}
    created = {session_id for session_id, version in changes if isinstance(version, Record) and _created(version)}
    removed = {session_id for session_id, version in changes if isinstance(version, Mark)}
    for session_id, version in last.items():
        before = reads.versions.get(session_id)
        final = None if isinstance(version, Mark) else _as_put(version)
        finals[session_id] = final
        ops, compares = _session_ops(keys, reads, session_id, before, final, version, session_id in created)
        success += ops
        compare += compares
        if before is not None and session_id in removed:
            success.append(txns.delete(keys.requests(session_id), range_end(keys.requests(session_id))))
            compare.append(txns.none_created_since(keys.children(session_id), reads.revision))
    if created or removed:
        compare, success = compare + _counter_compares(keys, reads), success + _counter_puts(keys, reads, changes)
    if request_key:
        compare.append(txns.absent(request_key))
        success.append(pb.RequestOp(request_put=pb.PutRequest(key=request_key, value=remembered.encode(), lease=lease)))
        failure.append(txns.get(request_key))
    if reads.sessions_only:
        failure += [txns.get(keys.session(session_id)) for session_id in reads.versions]
    if changes:
        success.append(txns.put(keys.batch, encode_batch(token, origin, changes)))
    needed = max(len(compare), len(success), len(failure))
    if needed > location.max_txn_ops:
        why = (
            f"the batch needs {needed} operations in one etcd Txn, more than the store's max_txn_ops"
            f" ({location.max_txn_ops}, etcd's --max-txn-ops): split it, or raise both"
        )
        raise InvalidArgument([("writes", why)])
    request = pb.TxnRequest(compare=compare, success=success, failure=failure)
    if request.ByteSize() > location.max_request_bytes - REQUEST_HEADROOM:
        raise LimitExceeded("etcd request bytes", location.max_request_bytes)
    return BatchTxn(request, changes, finals)


def _changes(reads: BatchReads, plan: BatchPlan, token: str, origin: str) -> list[BatchChange]:
    """The plan's steps as the changes they make, in order: a removal one per removed session."""
    current: dict[str, Record | None] = {
        session_id: None if version is None else version.record for session_id, version in reads.versions.items()
    }
    changes: list[BatchChange] = []
    changed: set[str] = set()
    for step in plan.steps:
        if isinstance(step, RemoveStep):
            for session_id, _ in step.removed:
                gone = current[session_id]
                assert gone is not None, "a removal removes a session"
                mark = Mark(token, gone.revision + 1, RemovalReason.REMOVED, origin, gone.info, 0)
                changes.append((session_id, mark))
                current[session_id] = None
                changed.add(session_id)
            continue
        if isinstance(step, CreateStep):
            record = Record(token, step.revision, ChangeKind.SESSION_CREATED, "", origin, 0, step.info, ())
        else:
            version = reads.versions.get(step.session_id)
            previous = IN_BATCH if step.session_id in changed or version is None else version.revision
            record = Record(token, step.revision, step.kind, step.todo_id, origin, previous, step.info, step.todos)
        changes.append((step.session_id, record))
        current[step.session_id] = record
        changed.add(step.session_id)
    return changes


def _created(record: Record) -> bool:
    return record.kind is ChangeKind.SESSION_CREATED


def _as_put(record: Record) -> Record:
    """A session's last version as its ``s/ID`` put: its cursor is the batch record's to say."""
    return Record(
        record.token, record.revision, record.kind, record.todo_id, record.origin, IN_BATCH, record.info, record.todos
    )


def _session_ops(
    keys: Keys,
    reads: BatchReads,
    session_id: str,
    before: Version | None,
    final: Record | None,
    last: Record | Mark,
    created: bool,
) -> tuple[list[pb.RequestOp], list[pb.Compare]]:
    """What a session the batch changed costs its Txn: ``before`` (as read) becomes ``final``
    (None: removed, ``last`` its removal), each key once however many changes it went through."""
    ops: list[pb.RequestOp] = []
    compare: list[pb.Compare] = []
    had = None if before is None else before.record
    if final is not None:
        ops.append(txns.put(keys.session(session_id), encode_record(final)))
    elif had is not None:
        ops.append(txns.delete(keys.session(session_id)))
    mark_at = reads.marks.get(session_id, (0, 0))[0]
    if isinstance(last, Mark):
        ops.append(txns.put(keys.mark(session_id), encode_mark(last)))
    elif created and mark_at:
        ops.append(txns.delete(keys.mark(session_id)))
    if created and had is None:
        compare.append(txns.written_at(keys.mark(session_id), mark_at))  # where its revisions start
    if final is not None and final.info.expires_at is not None:
        ops.append(txns.put(keys.deadline(session_id), repr(final.info.expires_at).encode()))
    elif had is not None and had.info.expires_at is not None:
        ops.append(txns.delete(keys.deadline(session_id)))
    link_before = keys.child(had.info.parent_id, session_id) if had is not None and had.info.parent_id else None
    link_after = keys.child(final.info.parent_id, session_id) if final is not None and final.info.parent_id else None
    if link_before != link_after:
        if link_before is not None:
            ops.append(txns.delete(link_before))
        if link_after is not None:
            ops.append(txns.put(link_after, b""))
    return ops, compare


def _counter_compares(keys: Keys, reads: BatchReads) -> list[pb.Compare]:
    """The session counters are as read: the limits were checked on them."""
    compare = [txns.written_at(keys.count, reads.total[1])]
    compare += [txns.written_at(keys.tenant_count(tenant), at) for tenant, (_, at) in reads.tenants.items()]
    return compare


def _counter_puts(keys: Keys, reads: BatchReads, changes: list[BatchChange]) -> list[pb.RequestOp]:
    """The session counters moved by the sessions created and removed (a tenant's global list
    counts only in the total)."""
    total, per_tenant = 0, Counter[str]()
    for session_id, version in changes:
        step = -1 if isinstance(version, Mark) else 1 if _created(version) else 0
        total += step
        if not is_global_list(session_id):
            per_tenant[tenant_of(session_id)] += step
    puts = [txns.put(keys.count, str(reads.total[0] + total).encode())] if total else []
    for tenant, (count, _) in reads.tenants.items():
        if per_tenant[tenant]:
            puts.append(txns.put(keys.tenant_count(tenant), str(count + per_tenant[tenant]).encode()))
    return puts

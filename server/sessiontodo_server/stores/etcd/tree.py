"""Removing sessions with their descendants: read a tree of them, remove it in one Txn.

A Txn removes up to ``SESSIONS_PER_TXN`` sessions, parents before children, read at one
revision: it compares every session it removes (so each removal carries the session's last
revision and metadata) and that none of them got a child since it was read (a child created
meanwhile is read and removed too, never left behind), and lowers the session counters, compared
too. A bigger tree takes several Txns.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain.tenancy import tenant_of
from sessiontodo_server.domain.values import RemovalReason, is_global_list
from sessiontodo_server.stores.etcd import txns
from sessiontodo_server.stores.etcd.cache import Version
from sessiontodo_server.stores.etcd.client import EtcdClient
from sessiontodo_server.stores.etcd.keys import Keys, range_end
from sessiontodo_server.stores.etcd.records import Mark, decode_record, encode_mark

SESSIONS_PER_TXN = 25
"""Sessions one removal Txn removes: five operations each, within etcd's default --max-txn-ops (128)."""


@dataclass(frozen=True, slots=True)
class Tree:
    """Sessions to remove in one Txn, read at one revision, and the ids left for the next Txns."""

    revision: int
    versions: list[tuple[str, Version]]
    rest: list[str]


async def read_tree(client: EtcdClient, keys: Keys, roots: list[str]) -> Tree:
    """Up to ``SESSIONS_PER_TXN`` of ``roots`` and their descendants, breadth first, read at one
    revision; the ids left over (roots and children not taken) for the next Txns."""
    versions: list[tuple[str, Version]] = []
    queue = deque(roots)
    seen = set(roots)
    revision = 0
    while queue and len(versions) < SESSIONS_PER_TXN:
        level = [queue.popleft() for _ in range(min(len(queue), SESSIONS_PER_TXN - len(versions)))]
        reads = []
        for session_id in level:
            children = keys.children(session_id)
            reads += [
                txns.get(keys.session(session_id), revision=revision),
                txns.get(children, range_end(children), keys_only=True, revision=revision),
            ]
        response = await client.txn(pb.TxnRequest(success=reads), writes=False)
        revision = revision or response.header.revision
        found = response.responses
        for n, session_id in enumerate(level):
            kvs = found[2 * n].response_range.kvs
            if not kvs:
                continue  # removed meanwhile
            versions.append((session_id, Version(kvs[0].mod_revision, decode_record(kvs[0].value))))
            prefix = len(keys.children(session_id))
            for link in found[2 * n + 1].response_range.kvs:
                child = link.key[prefix:].decode()
                if child not in seen:
                    seen.add(child)
                    queue.append(child)
    return Tree(revision, versions, list(queue))


async def read_counts(client: EtcdClient, keys: Keys, tree: Tree) -> dict[bytes, tuple[int, int]]:
    """The session counters ``tree``'s removal lowers (``keys.py``), as of the tree's revision:
    {key: (count, the revision it was written at)}."""
    names = [keys.count, *dict.fromkeys(keys.tenant_count(tenant_of(sid)) for sid, _ in tree.versions)]
    reads = [txns.get(name, revision=tree.revision) for name in names]
    response = await client.txn(pb.TxnRequest(success=reads), writes=False)
    return {name: count_of(found.response_range.kvs) for name, found in zip(names, response.responses, strict=True)}


def count_of(kvs: Sequence[kv_pb2.KeyValue]) -> tuple[int, int]:
    """A counter's value and the revision it was written at; (0, 0) when it was never written."""
    return (int(kvs[0].value), kvs[0].mod_revision) if kvs else (0, 0)


def removal(
    keys: Keys, tree: Tree, counts: dict[bytes, tuple[int, int]], token: str, reason: RemovalReason, origin: str
) -> tuple[list[pb.Compare], list[pb.RequestOp], list[tuple[str, Mark]]]:
    """The compares and operations of a Txn removing ``tree``'s sessions and lowering the session
    counters (read by ``read_counts``), and the marks it puts (each the SESSION_REMOVED change of
    one session)."""
    lowered = Counter(keys.tenant_count(tenant_of(sid)) for sid, _ in tree.versions if not is_global_list(sid))
    lowered[keys.count] = len(tree.versions)
    compare = [txns.written_at(name, at) for name, (_, at) in counts.items()]
    writes = [txns.put(name, str(count - lowered[name]).encode()) for name, (count, _) in counts.items()]
    marks = []
    for n, (session_id, version) in enumerate(tree.versions):
        record = version.record
        mark = Mark(token, record.revision + 1, reason, origin, record.info, len(tree.versions) - 1 - n)
        marks.append((session_id, mark))
        compare += [
            txns.written_at(keys.session(session_id), version.revision),
            txns.none_created_since(keys.children(session_id), tree.revision),
        ]
        writes += [
            txns.delete(keys.session(session_id)),
            txns.delete(keys.deadline(session_id)),
            txns.delete(keys.requests(session_id), range_end(keys.requests(session_id))),
            txns.put(keys.mark(session_id), encode_mark(mark)),
        ]
        if record.info.parent_id:
            writes.append(txns.delete(keys.child(record.info.parent_id, session_id)))
    return compare, writes, marks

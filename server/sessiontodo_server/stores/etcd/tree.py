"""Removing sessions with their descendants: read a tree of them, remove it in one Txn.

A Txn removes up to ``SESSIONS_PER_TXN`` sessions, parents before children, read at one
revision: it compares every session it removes (so each removal carries the session's last
revision and metadata) and that none of them got a child since it was read (a child created
meanwhile is read and removed too, never left behind). A bigger tree takes several Txns.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_server.domain.todos import RemovalReason
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


def removal(
    keys: Keys, tree: Tree, token: str, reason: RemovalReason, origin: str
) -> tuple[list[pb.Compare], list[pb.RequestOp], list[tuple[str, Mark]]]:
    """The compares and operations of a Txn removing ``tree``'s sessions, and the marks it puts
    (each the SESSION_REMOVED change of one session)."""
    compare, writes, marks = [], [], []
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

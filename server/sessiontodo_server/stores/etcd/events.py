"""What the watch's events mean: the changes they carry, numbered by feed cursor.

Each write is one Txn, committed at one etcd revision; a removal Txn removes up to
``tree.SESSIONS_PER_TXN`` sessions and a batch's Txn makes up to ``CHANGES_PER_REVISION``
changes, so a cursor numbers the changes within a revision too: ``revision * 1000 - n`` for a
change with n more after it in its Txn. A Txn's last change (the only one, for a single write) is
``revision * 1000``, which also stands for everything up to that revision: a snapshot's cursor.
A batch's changes, consecutive cursors in operation order, come from the batch record it puts
(``records.encode_batch``), not from its puts of the sessions.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain.values import Change
from sessiontodo_server.stores.etcd.keys import Keys
from sessiontodo_server.stores.etcd.records import Record, decode_batch, decode_mark, decode_record

CHANGES_PER_REVISION = 1000
PUT, DELETE = kv_pb2.Event.PUT, kv_pb2.Event.DELETE


def cursor(revision: int, later: int = 0) -> int:
    return revision * CHANGES_PER_REVISION - later


def revision_of(position: int) -> int:
    """The revision of the Txn that made the change at feed cursor ``position``."""
    return -(-position // CHANGES_PER_REVISION)


def by_revision(events: Iterable[kv_pb2.Event]) -> list[tuple[int, list[kv_pb2.Event]]]:
    """Events grouped by revision, in order (etcd sends them in revision order)."""
    return [(revision, list(group)) for revision, group in itertools.groupby(events, key=_revision)]


def _revision(event: kv_pb2.Event) -> int:
    return event.kv.mod_revision


def changes_of(keys: Keys, revision: int, events: Iterable[kv_pb2.Event]) -> tuple[str, list[Change]]:
    """The changes one revision's events carry, in order, and the token of the write that made them:
    puts of sessions (``s/``) and of removal marks (``m/``), or a batch record's changes."""
    token, batch = "", b""
    changes: list[Change] = []
    finals: dict[str, Record] = {}
    for event in events:
        kind = keys.kind(event.kv.key)
        if event.type != PUT:
            continue
        if event.kv.key == keys.batch:
            batch = event.kv.value
        elif kind == b"s/":
            record = decode_record(event.kv.value)
            finals[keys.session_id(event.kv.key)] = record
            token = record.token
        elif kind == b"m/":
            mark = decode_mark(event.kv.value)
            changes.append(mark.change(keys.session_id(event.kv.key), cursor(revision, mark.later)))
            token = mark.token
    if batch:
        return _batch_changes(revision, batch, finals)
    for session_id, record in finals.items():
        if (change := record.change(session_id, cursor(revision))) is not None:
            changes.append(change)
    changes.sort(key=_cursor)
    return token, changes


def _batch_changes(revision: int, batch: bytes, finals: dict[str, Record]) -> tuple[str, list[Change]]:
    record = decode_batch(batch)
    changes = []
    for later, (session_id, version) in record.decoded(finals):
        change = version.change(session_id, cursor(revision, later))
        assert change is not None, "a batch records changes"
        changes.append(change)
    return record.token, changes


def _cursor(change: Change) -> int:
    return change.cursor

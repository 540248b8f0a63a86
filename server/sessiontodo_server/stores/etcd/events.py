"""What the watch's events mean: the changes they carry, numbered by feed cursor.

Each change is one Txn, committed at one etcd revision; a removal Txn removes up to
``tree.SESSIONS_PER_TXN`` sessions, so a cursor numbers the changes within a revision too:
``revision * 1000 - n`` for a change with n more after it in its Txn. A Txn's last change (the
only one, but for removals) is ``revision * 1000``, which also stands for everything up to that
revision: a snapshot's cursor.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain.todos import Change
from sessiontodo_server.stores.etcd.keys import Keys
from sessiontodo_server.stores.etcd.records import decode_mark, decode_record

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
    puts of sessions (``s/``) and of removal marks (``m/``)."""
    token, changes = "", []
    for event in events:
        kind = keys.kind(event.kv.key)
        if event.type != PUT or kind not in (b"s/", b"m/"):
            continue
        session_id = keys.session_id(event.kv.key)
        if kind == b"s/":
            record = decode_record(event.kv.value)
            change, token = record.change(session_id, cursor(revision)), record.token
        else:
            mark = decode_mark(event.kv.value)
            change, token = mark.change(session_id, cursor(revision, mark.later)), mark.token
        if change is not None:
            changes.append(change)
    changes.sort(key=_cursor)
    return token, changes


def _cursor(change: Change) -> int:
    return change.cursor

"""The values of an etcd store's keys, as JSON arrays (todos in ``stores/codec.py``'s encoding).

- a session (``s/ID``): ``[token, revision, kind, todo_id, origin, previous, info, todos]``, where
  ``kind`` is the change that made this version ("" for none: the global list made at start-up),
  ``token`` names the write that made it (``writer.sequence``, so a replica knows its own writes
  on the watch), and ``previous`` is the etcd revision of the version before (0 for the first):
  a session's history is read by following it back through etcd's MVCC history;
- a removal mark (``m/ID``): ``[token, revision, reason, origin, info, later]``, the SESSION_REMOVED
  change (``later``: how many removals of its Txn come after it);
- a request id (``q/ID REQUEST``): ``[todo, index, revision, fingerprint, at]``;
- ``info`` is ``[parent_id, labels, created_at, updated_at, idle_ttl]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sessiontodo_server.domain.store import AddResult, SessionState
from sessiontodo_server.domain.todos import Change, ChangeKind, RemovalReason, SessionInfo, Todo, frozen
from sessiontodo_server.stores.codec import encode_entries, encode_json, encode_todo, encode_todos, todo_from_fields

_KINDS = {kind.value: kind for kind in ChangeKind}
_REASONS = {reason.value: reason for reason in RemovalReason}


@dataclass(frozen=True, slots=True)
class Record:
    """One version of a session, and the change that made it."""

    token: str
    revision: int
    kind: ChangeKind | None
    todo_id: str
    origin: str
    previous: int
    info: SessionInfo
    todos: tuple[Todo, ...]

    def state(self, session_id: str) -> SessionState:
        return SessionState(session_id, self.revision, self.todos, self.info)

    def change(self, session_id: str, cursor: int) -> Change | None:
        if self.kind is None:
            return None
        return Change(
            session_id, self.kind, self.revision, self.todos, self.todo_id, self.info, self.origin, cursor=cursor
        )


def _info(info: SessionInfo) -> str:
    return (
        f"[{encode_json(info.parent_id)},{encode_entries(info.labels)},"
        f"{info.created_at!r},{info.updated_at!r},{info.idle_ttl!r}]"
    )


def _decode_info(fields: list[Any]) -> SessionInfo:
    parent_id, labels, created_at, updated_at, idle_ttl = fields
    return SessionInfo(parent_id, frozen(labels), created_at, updated_at, idle_ttl)


def encode_record(record: Record) -> bytes:
    kind = "" if record.kind is None else record.kind.value
    head = f'[{encode_json(record.token)},{record.revision},"{kind}",{encode_json(record.todo_id)}'
    tail = f"{encode_json(record.origin)},{record.previous},{_info(record.info)},{encode_todos(record.todos)}"
    return f"{head},{tail}]".encode()


def decode_record(data: bytes) -> Record:
    token, revision, kind, todo_id, origin, previous, info, todos = json.loads(data)
    decoded = tuple(map(todo_from_fields, todos))
    return Record(
        token, revision, _KINDS[kind] if kind else None, todo_id, origin, previous, _decode_info(info), decoded
    )


@dataclass(frozen=True, slots=True)
class Mark:
    """A removed session's SESSION_REMOVED change."""

    token: str
    revision: int
    reason: RemovalReason
    origin: str
    info: SessionInfo
    later: int

    def change(self, session_id: str, cursor: int) -> Change:
        return Change(
            session_id,
            ChangeKind.SESSION_REMOVED,
            self.revision,
            info=self.info,
            origin=self.origin,
            reason=self.reason,
            cursor=cursor,
        )


def encode_mark(mark: Mark) -> bytes:
    fields = f"{encode_json(mark.token)},{mark.revision},"
    return f'[{fields}"{mark.reason.value}",{encode_json(mark.origin)},{_info(mark.info)},{mark.later}]'.encode()


def decode_mark(data: bytes) -> Mark:
    token, revision, reason, origin, info, later = json.loads(data)
    return Mark(token, revision, _REASONS[reason], origin, _decode_info(info), later)


def encode_result(result: AddResult, at: float) -> bytes:
    """An AddTodo's result, and when it was remembered (for forgetting it)."""
    fields = f"{encode_todo(result.todo)},{result.index},{result.revision},{encode_json(result.fingerprint)},{at!r}"
    return f"[{fields}]".encode()


def decode_result(data: bytes) -> tuple[AddResult, float]:
    todo, index, revision, fingerprint, at = json.loads(data)
    return AddResult(todo_from_fields(todo), index, revision, fingerprint), at

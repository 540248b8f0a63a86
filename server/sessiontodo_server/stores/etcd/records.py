"""The values of an etcd store's keys, as JSON arrays (todos in ``stores/codec.py``'s encoding).

- a session (``s/ID``): ``[token, revision, kind, todo_id, origin, previous, info, todos]``, where
  ``kind`` is the change that made this version ("" for none: the global list made at start-up),
  ``token`` names the write that made it (``writer.sequence``, so a replica knows its own writes
  on the watch), and ``previous`` is the etcd revision of the version before (0 for the first):
  a session's history is read by following it back through etcd's MVCC history;
- a removal mark (``m/ID``): ``[token, revision, reason, origin, info, later]``, the SESSION_REMOVED
  change (``later``: how many removals of its Txn come after it);
- a request id (``q/ID REQUEST``): ``[todo, index, revision, fingerprint, at]``;
- the batch record (``batch``): ``[token, origin, [version, ...]]``, every change one BatchWrite
  made, in order (``encode_batch`` says how lists are kept short);
- ``info`` is ``[parent_id, labels, created_at, updated_at, idle_ttl]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiontodo_server.domain.store import AddResult, SessionState
from sessiontodo_server.domain.values import Change, ChangeKind, RemovalReason, SessionInfo, Todo, frozen
from sessiontodo_server.stores.codec import encode_entries, encode_json, encode_todo, encode_todos, todo_from_fields

_KINDS = {kind.value: kind for kind in ChangeKind}
_REASONS = {reason.value: reason for reason in RemovalReason}

IN_BATCH = -1
"""``previous`` of a version a batch made whose cursor and versions before are in the batch
record of its revision (every ``s/ID`` a batch puts; the later versions of a session in the record)."""


@dataclass(frozen=True, slots=True)
class Record:
    """One version of a session, and the change that made it."""

    token: str
    revision: int
    kind: ChangeKind | None
    todo_id: str
    origin: str
    previous: int
    """The etcd revision of the version before (0: none; ``IN_BATCH``: ask the batch record)."""
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


BatchChange = tuple[str, Record | Mark]
"""A change of a batch: the session, and its version (a Mark for a removal)."""


def encode_batch(token: str, origin: str, versions: Sequence[BatchChange]) -> bytes:
    """The batch record: each version ``[session_id, kind, revision, todo_id, previous, info, list]``.

    A batch's Txn puts each session it leaves at its last version (``s/ID``), so the record gives
    no list twice: a session's last version has ``list`` null (read it from that put), and every
    earlier one ``[start, end, todos]``, its list as ``next[:start] + todos + next[end:]`` where
    ``next`` is the list of the session's next version in the batch (empty when that is its
    removal). A batch of single-todo writes to one session so costs one todo per write."""
    following: dict[str, tuple[Todo, ...]] = {}
    """Per session walked back to: the list of its next version."""
    encoded: list[str] = []
    for session_id, version in reversed(versions):
        head = f"{encode_json(session_id)},"
        if isinstance(version, Mark):
            following[session_id] = ()
            kind = ChangeKind.SESSION_REMOVED.value
            encoded.append(f'[{head}"{kind}",{version.revision},"",0,{_info(version.info)},null]')
            continue
        assert version.kind is not None, "a batch makes changes"
        after = following.get(session_id)
        splice = "null" if after is None else _splice(version.todos, after)
        following[session_id] = version.todos
        fields = f'"{version.kind.value}",{version.revision},{encode_json(version.todo_id)},{version.previous}'
        encoded.append(f"[{head}{fields},{_info(version.info)},{splice}]")
    return f"[{encode_json(token)},{encode_json(origin)},[{','.join(reversed(encoded))}]]".encode()


def _splice(todos: tuple[Todo, ...], following: tuple[Todo, ...]) -> str:
    """``todos`` as ``[start, end, middle]``: ``following[:start] + middle + following[end:]``.
    Todos the two lists share are the same objects (``mutations.apply`` keeps the ones it does not
    change), so comparing identities finds them without comparing contents."""
    shortest = min(len(todos), len(following))
    start = 0
    while start < shortest and todos[start] is following[start]:
        start += 1
    common_tail = 0
    while common_tail < shortest - start and todos[-1 - common_tail] is following[-1 - common_tail]:
        common_tail += 1
    middle = todos[start : len(todos) - common_tail]
    return f"[{start},{len(following) - common_tail},{encode_todos(middle)}]"


@dataclass(frozen=True, slots=True)
class BatchRecord:
    token: str
    origin: str
    versions: list[list[Any]]
    """As encoded, lists still spliced."""

    def decoded(self, finals: Mapping[str, Record], only: str | None = None) -> list[tuple[int, BatchChange]]:
        """Each version (of session ``only``, or of all), in order, with how many of the batch's
        changes come after it; ``finals``: the ``s/ID`` records the batch put (those of ``only``
        are enough)."""
        following: dict[str, tuple[Todo, ...]] = {}
        decoded: list[tuple[int, BatchChange]] = []
        for later, (session_id, kind, revision, todo_id, previous, info, splice) in enumerate(reversed(self.versions)):
            if only is not None and session_id != only:
                continue
            if kind == ChangeKind.SESSION_REMOVED.value:
                following[session_id] = ()
                mark = Mark(self.token, revision, RemovalReason.REMOVED, self.origin, _decode_info(info), 0)
                decoded.append((later, (session_id, mark)))
                continue
            if splice is None:
                todos = finals[session_id].todos
            else:
                start, end, middle = splice
                after = following[session_id]
                todos = (*after[:start], *map(todo_from_fields, middle), *after[end:])
            following[session_id] = todos
            record = Record(
                self.token, revision, _KINDS[kind], todo_id, self.origin, previous, _decode_info(info), todos
            )
            decoded.append((later, (session_id, record)))
        decoded.reverse()
        return decoded


def decode_batch(data: bytes) -> BatchRecord:
    token, origin, versions = json.loads(data)
    return BatchRecord(token, origin, versions)

"""Decoding what the scripts return: feed and history entries, session states, AddTodo results.

An entry is one change as JSON: ``[cursor, session id, kind, revision, todo id, origin, reason,
[parent, labels, created, updated, idle ttl], todos]`` (``lua/lib.lua`` writes it; ``todos`` is
null in a feed entry whose list was too large to repeat there).
"""

from __future__ import annotations

import json
from typing import Any

from sessiontodo_server.domain.store import AddResult, SessionState
from sessiontodo_server.domain.values import Change, ChangeKind, RemovalReason, SessionInfo, Todo, frozen
from sessiontodo_server.stores.codec import todo_from_fields

_KINDS = {kind.value: kind for kind in ChangeKind}


def decode_entry(data: bytes | str, todos_known: tuple[Todo, ...] | None = None) -> tuple[Change, bool]:
    """The change, and whether it carries its list (False: read it from the session's history).
    ``todos_known``: the list, when the caller has it and the entry leaves it out."""
    cursor, session_id, kind, revision, todo_id, origin, reason, info, todos = json.loads(data)
    if todos_known is not None:
        todos = todos_known
    elif todos is not None:
        todos = tuple(map(todo_from_fields, todos))
    change = Change(
        session_id,
        _KINDS[kind],
        revision,
        todos or (),
        todo_id,
        SessionInfo(info[0], frozen(info[1]), info[2], info[3], info[4]),
        origin,
        RemovalReason(reason) if reason else None,
        cursor,
    )
    return change, todos is not None


def entry_cursor(data: bytes) -> int:
    """An entry's cursor, without decoding the rest of it."""
    return int(data[1 : data.index(b",")])


def decode_state(session_id: str, reply: list[Any]) -> SessionState:
    """A session from ``state_reply``: revision, parent, labels, created, updated, idle TTL, todos."""
    revision, parent, labels, created, updated, ttl, todos = reply
    info = SessionInfo(as_text(parent), frozen(json.loads(labels)), float(created), float(updated), float(ttl))
    return SessionState(session_id, int(revision), tuple(map(todo_from_fields, json.loads(todos))), info)


def decode_result(data: bytes) -> AddResult:
    todo, index, revision, fingerprint = json.loads(data)
    return AddResult(todo_from_fields(todo), index, revision, fingerprint)


def as_text(reply: bytes | str) -> str:
    return reply if isinstance(reply, str) else reply.decode()

"""One encoding of todos, shared by the stores that keep lists outside Python (sqlite, Redis).

A todo is the JSON array ``[id, content, status, priority]``, plus its metadata as an object
with sorted keys when it has any, plus (0.4) its task-graph fields as a sixth element when it has
any (then the metadata object is written even when empty): an object with sorted keys holding
only the fields set — ``active_form``, ``blocked_by`` (an array of ids), ``description``,
``lease_ms`` and ``lease_until_ms`` (integer milliseconds: every store and script writes them
alike), ``owner``. The encoding is canonical — equal todos encode to equal bytes — so Redis's
scripts, which re-encode a todo they change with the same rules (``redis/lua/lib.lua``), can
compare stored lists byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from json.encoder import encode_basestring
from typing import Any

from sessiontodo_server.domain.batch import BatchWritten, Outcome
from sessiontodo_server.domain.errors import BatchRequestIdReused
from sessiontodo_server.domain.values import Todo, TodoPriority, TodoStatus, frozen

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
encode_json = _encoder.encode
_string = encode_basestring  # what that encoder does to a string, without its per-call set-up


def encode_todo(todo: Todo) -> str:
    """``json.dumps([id, content, status, priority(, metadata(, graph))], ensure_ascii=False,
    separators=(",", ":"))``."""
    head = f'[{_string(todo.id)},{_string(todo.content)},"{todo.status}","{todo.priority}"'
    if todo.description or todo.active_form or todo.owner or todo.blocked_by or todo.lease_expires_at:
        return f"{head},{encode_entries(todo.metadata)},{_encode_graph(todo)}]"
    if todo.metadata:
        return f"{head},{encode_entries(todo.metadata)}]"
    return f"{head}]"


def _encode_graph(todo: Todo) -> str:
    fields: dict[str, Any] = {}
    if todo.active_form:
        fields["active_form"] = todo.active_form
    if todo.blocked_by:
        fields["blocked_by"] = list(todo.blocked_by)
    if todo.description:
        fields["description"] = todo.description
    if todo.lease_expires_at:
        fields["lease_ms"] = round(todo.lease_seconds * 1000)
        fields["lease_until_ms"] = round(todo.lease_expires_at * 1000)
    if todo.owner:
        fields["owner"] = todo.owner
    return encode_json(fields)


def encode_todos(todos: Iterable[Todo]) -> str:
    return f"[{','.join(map(encode_todo, todos))}]"


_STATUSES = {status.value: status for status in TodoStatus}
_PRIORITIES = {priority.value: priority for priority in TodoPriority}


def todo_from_fields(fields: list[Any]) -> Todo:
    """A todo from its decoded JSON array."""
    if len(fields) == 4:
        todo_id, content, status, priority = fields
        return Todo(todo_id, content, _STATUSES[status], _PRIORITIES[priority])
    if len(fields) == 5:
        todo_id, content, status, priority, metadata = fields
        return Todo(todo_id, content, _STATUSES[status], _PRIORITIES[priority], frozen(metadata))
    todo_id, content, status, priority, metadata, graph = fields
    return Todo(
        todo_id,
        content,
        _STATUSES[status],
        _PRIORITIES[priority],
        frozen(metadata),
        graph.get("description", ""),
        graph.get("active_form", ""),
        graph.get("owner", ""),
        tuple(graph.get("blocked_by", ())),
        graph.get("lease_until_ms", 0) / 1000,
        graph.get("lease_ms", 0) / 1000,
    )


def decode_todos(text: str | bytes) -> tuple[Todo, ...]:
    return tuple(map(todo_from_fields, json.loads(text)))


def encode_entries(entries: Mapping[str, str]) -> str:
    """Labels or metadata: a JSON object with sorted keys."""
    if not entries:  # most sessions' labels, on every write
        return "{}"
    return encode_json(dict(sorted(entries.items())))


def encode_outcomes(outcomes: Iterable[Outcome]) -> str:
    """A batch's outcomes, a JSON array of ``[revision, changed, todo or null, position, todo ids, removed ids]``."""
    return f"[{','.join(map(_encode_outcome, outcomes))}]"


def _encode_outcome(outcome: Outcome) -> str:
    todo = "null" if outcome.todo is None else encode_todo(outcome.todo)
    ids, removed = encode_json(list(outcome.todo_ids)), encode_json(list(outcome.removed))
    return f"[{outcome.revision},{'true' if outcome.changed else 'false'},{todo},{outcome.position},{ids},{removed}]"


def decode_outcomes(text: str | bytes) -> tuple[Outcome, ...]:
    return tuple(
        Outcome(revision, changed, None if todo is None else todo_from_fields(todo), position, tuple(ids), tuple(gone))
        for revision, changed, todo, position, ids, gone in json.loads(text)
    )


def remembered_batch(fingerprint: str, outcomes: Iterable[Outcome]) -> str:
    """What a store remembers under a batch's request id: ``[fingerprint, outcomes]``."""
    return encode_json([fingerprint, encode_outcomes(outcomes)])


def replayed_batch(remembered: str | bytes, request_id: str, fingerprint: str) -> BatchWritten:
    """The first batch's outcomes for a request id (``tenant\nid``), or BatchRequestIdReused when
    ``remembered`` is another batch's."""
    first, outcomes = json.loads(remembered)
    if first != fingerprint:
        raise BatchRequestIdReused(request_id.partition("\n")[2])
    return BatchWritten(decode_outcomes(outcomes))

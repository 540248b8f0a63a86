"""One encoding of todos, shared by the stores that keep lists outside Python (sqlite, Redis).

A todo is the JSON array ``[id, content, status, priority]``, plus its metadata as an object
with sorted keys when it has any. The encoding is canonical — equal todos encode to equal
bytes — so Redis's scripts, which re-encode a todo they change with the same rules
(``redis/lua/lib.lua``), can compare stored lists byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from sessiontodo_server.todos import Todo, TodoPriority, TodoStatus, frozen

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode_todo(todo: Todo) -> str:
    fields: list[Any] = [todo.id, todo.content, todo.status.value, todo.priority.value]
    if todo.metadata:
        fields.append(dict(sorted(todo.metadata.items())))
    return _encoder.encode(fields)


def encode_todos(todos: Iterable[Todo]) -> str:
    return f"[{','.join(map(encode_todo, todos))}]"


_STATUSES = {status.value: status for status in TodoStatus}
_PRIORITIES = {priority.value: priority for priority in TodoPriority}


def todo_from_fields(fields: list[Any]) -> Todo:
    """A todo from its decoded JSON array."""
    if len(fields) == 4:
        todo_id, content, status, priority = fields
        return Todo(todo_id, content, _STATUSES[status], _PRIORITIES[priority])
    todo_id, content, status, priority, metadata = fields
    return Todo(todo_id, content, _STATUSES[status], _PRIORITIES[priority], frozen(metadata))


def decode_todos(text: str | bytes) -> tuple[Todo, ...]:
    return tuple(map(todo_from_fields, json.loads(text)))


def encode_entries(entries: Mapping[str, str]) -> str:
    """Labels or metadata: a JSON object with sorted keys."""
    return _encoder.encode(dict(sorted(entries.items())))

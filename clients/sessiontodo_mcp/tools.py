"""The MCP face of a todo list, without I/O: tool schemas, argument checks, results and error texts.

The tools are shaped like the todo tools agents already have (Claude Code's TodoWrite, OpenCode's
``todowrite``, Qwen Code's ``todo_write``): the whole list is written at once, each todo with its
content, status and priority, and an id that is kept when given. A failed call is a tool error
whose text starts with its reason (``invalid``, ``not found``, ``conflict``, ``unavailable``,
``denied``, ``limit``), so a model can tell what to do next; nothing is written then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

import jsonschema
from mcp import types

from sessiontodo_client import (
    Aborted,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    ResourceExhausted,
    ServiceError,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    Unauthenticated,
    Unavailable,
    UpdatedTodo,
)

ORIGIN = "mcp"
"""The origin of every write this server makes, echoed on sessiontodo's watch and feed messages."""

_ID: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "The todo's id (todo_read and todo_write return them).",
}
_CONTENT: dict[str, Any] = {"type": "string", "minLength": 1, "description": "What is to be done, in one line."}
_STATUS: dict[str, Any] = {
    "type": "string",
    "enum": [status.value for status in TodoStatus],
    "description": "pending, in_progress (the one being worked on), completed or cancelled.",
}
_PRIORITY: dict[str, Any] = {
    "type": "string",
    "enum": [priority.value for priority in TodoPriority],
    "description": "high, medium or low.",
}
_EXPECTED_REVISION: dict[str, Any] = {
    "type": "integer",
    "minimum": 0,
    "description": "Write only if the list is still at this revision (the revision todo_read returned); "
    "otherwise the call fails with a conflict and changes nothing.",
}

_TODO_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {name: {"type": "string"} for name in ("id", "content", "status", "priority")},
    "required": ["id", "content", "status", "priority"],
}
_LIST_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string", "description": "The sessiontodo session this list belongs to."},
        "revision": {"type": "integer", "description": "The list's revision: every change increments it."},
        "todos": {"type": "array", "items": _TODO_OUT},
    },
    "required": ["session_id", "revision", "todos"],
}
_UPDATE_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "revision": {"type": "integer"},
        "changed": {"type": "boolean", "description": "False when the todo already was as asked."},
        "todo": _TODO_OUT,
    },
    "required": ["session_id", "revision", "changed", "todo"],
}

TODO_READ = types.Tool(
    name="todo_read",
    title="Read the todo list",
    description="Read this session's todo list: every todo in order with its id, content, status and priority, "
    "and the list's revision. Read it before changing a list others may have changed, and to find the ids "
    "todo_update needs.",
    inputSchema={"type": "object", "properties": {}, "additionalProperties": False},
    outputSchema=_LIST_OUT,
    annotations=types.ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False),
)

TODO_WRITE = types.Tool(
    name="todo_write",
    title="Write the todo list",
    description="Replace this session's whole todo list with the given one: send every todo, in order, each time "
    "(like TodoWrite / todowrite). Use it to plan work of several steps and to keep the plan current: mark a todo "
    "in_progress before starting it and completed as soon as it is done, with one in_progress at a time. A todo "
    "sent with its id keeps that id; one without gets a new id. Returns the list as stored, with ids and revision.",
    inputSchema={
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The whole list, in order; an empty array clears it.",
                "items": {
                    "type": "object",
                    "properties": {"id": _ID, "content": _CONTENT, "status": _STATUS, "priority": _PRIORITY},
                    "required": ["content", "status"],
                    "additionalProperties": False,
                },
            },
            "expected_revision": _EXPECTED_REVISION,
        },
        "required": ["todos"],
        "additionalProperties": False,
    },
    outputSchema=_LIST_OUT,
    annotations=types.ToolAnnotations(destructiveHint=True, idempotentHint=True, openWorldHint=False),
)

TODO_UPDATE = types.Tool(
    name="todo_update",
    title="Update one todo",
    description="Change one todo of this session's list by id: its content, status and/or priority (give at least "
    "one); the rest of the list stays as it is. Returns the todo as stored and the list's new revision.",
    inputSchema={
        "type": "object",
        "properties": {
            "id": _ID,
            "content": _CONTENT,
            "status": _STATUS,
            "priority": _PRIORITY,
            "expected_revision": _EXPECTED_REVISION,
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    outputSchema=_UPDATE_OUT,
    annotations=types.ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False),
)

TOOLS = {tool.name: tool for tool in (TODO_READ, TODO_WRITE, TODO_UPDATE)}


class ToolFailure(Exception):
    """A call that failed for a reason the model can act on; its text is the tool error's text."""


def _path(parts: Sequence[str | int]) -> str:
    """``todos[0].status`` for jsonschema's ``["todos", 0, "status"]``: the field names sessiontodo's errors use."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")


def check_arguments(tool: types.Tool, arguments: Mapping[str, Any]) -> None:
    """Raise ``ToolFailure`` ("invalid: <field>: <why>") unless ``arguments`` fit the tool's input schema."""
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(tool.inputSchema).iter_errors(arguments))
    if error is not None:
        where = _path(list(error.absolute_path))
        raise ToolFailure(f"invalid: {where + ': ' if where else ''}{error.message}")


def todos_from(arguments: Mapping[str, Any]) -> list[Todo]:
    """``todo_write``'s list, checked against its schema."""
    return [
        Todo(
            id=item.get("id", ""),
            content=item["content"],
            status=TodoStatus(item["status"]),
            priority=TodoPriority(item.get("priority", TodoPriority.MEDIUM)),
        )
        for item in arguments["todos"]
    ]


def changes_from(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """``todo_update``'s changes as ``TodoClient.update_todo`` keywords; "invalid" when there are none."""
    changes: dict[str, Any] = {}
    if "content" in arguments:
        changes["content"] = arguments["content"]
    if "status" in arguments:
        changes["status"] = TodoStatus(arguments["status"])
    if "priority" in arguments:
        changes["priority"] = TodoPriority(arguments["priority"])
    if not changes:
        raise ToolFailure("invalid: give at least one of content, status and priority to change")
    return changes


def todo_json(todo: Todo) -> dict[str, str]:
    """A todo as the tools and the resource show it (a status or priority unknown to this client as its number)."""
    return {"id": todo.id, "content": todo.content, "status": str(todo.status), "priority": str(todo.priority)}


def list_json(session_id: str, todo_list: TodoList) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "revision": todo_list.revision,
        "todos": [todo_json(todo) for todo in todo_list.todos],
    }


def update_json(session_id: str, updated: UpdatedTodo) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "revision": updated.revision,
        "changed": updated.changed,
        "todo": todo_json(updated.todo),
    }


def failure_text(error: ServiceError) -> str:
    """What a failed sessiontodo call means for the agent, reason first."""
    if isinstance(error, InvalidArgument):
        details = "; ".join(f"{field}: {why}" for field, why in error.violations)
        return f"invalid: {details or error.message}"
    if isinstance(error, NotFound):
        return f"not found: {error.message}"
    if isinstance(error, Aborted):
        return f"conflict: {error.message}; read the list again (todo_read) and retry with its revision"
    if isinstance(error, Unavailable):
        return "unavailable: sessiontodo cannot be reached right now; try again shortly (todo_read shows the list)"
    if isinstance(error, Unauthenticated | PermissionDenied):
        return f"denied: {error.message}"
    if isinstance(error, ResourceExhausted):
        return f"limit: {error.message}"
    return f"{error.code.name.lower().replace('_', ' ')}: {error.message}"


def error_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=True)


RESOURCE_SCHEME = "sessiontodo"


def resource_uri(session_id: str) -> str:
    """The URI of a session's list: ``sessiontodo://sessions/{id}/todos``, the id percent-encoded."""
    return f"{RESOURCE_SCHEME}://sessions/{quote(session_id, safe='')}/todos"

"""The task tools: a session's list as a task graph, shaped like Claude Code's Task tools.

``task_create`` / ``task_get`` / ``task_list`` / ``task_update`` take what Claude Code's
TaskCreate / TaskGet / TaskList / TaskUpdate take (snake_case: ``active_form``, ``add_blocked_by``,
``add_blocks``, ``owner``, ``status`` with ``deleted``), so a model that knows those knows these;
``task_claim`` and ``task_release`` add what a shared list needs: taking ready work atomically
(exactly one of several agents gets a task) and giving it back. Several agents share a list by
naming the same sessiontodo session (``--session-id``, or the ``Sessiontodo-Session-Id`` header),
as Claude Code's sessions share one through ``CLAUDE_CODE_TASK_LIST_ID``. Failures are tool errors
whose text starts with a reason, as the todo tools' (``refused`` when a claim cannot be made).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from mcp import types

from sessiontodo_client import (
    ClaimRefused,
    InvalidArgument,
    ServiceError,
    Todo,
    TodoClient,
    TodoList,
    TodoPriority,
    TodoStatus,
    UpdateTodoWrite,
)
from sessiontodo_mcp.tools import ORIGIN, ToolFailure, check_arguments, error_result, failure_text

DELETED = "deleted"
"""The status ``task_update`` takes to delete a task, as Claude Code's TaskUpdate does."""
FINISHED = (TodoStatus.COMPLETED, TodoStatus.CANCELLED)
"""A blocker in these statuses holds nothing back (todo_service.proto's rule)."""

_TASK_ID: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "description": "A task's id (task_create and task_list return them).",
}
_TASK_IDS: dict[str, Any] = {"type": "array", "items": _TASK_ID, "maxItems": 64, "uniqueItems": True}
_OWNER: dict[str, Any] = {
    "type": "string",
    "maxLength": 128,
    "description": "Who works on the task: your agent name (the same one every time).",
}
_SUBJECT: dict[str, Any] = {"type": "string", "minLength": 1, "description": "What is to be done, in one line."}
_DESCRIPTION: dict[str, Any] = {"type": "string", "description": "The details: what done means, how, where."}
_ACTIVE_FORM: dict[str, Any] = {
    "type": "string",
    "description": "What is shown while it is in progress, in the present tense (Writing the parser).",
}
_PRIORITY: dict[str, Any] = {"type": "string", "enum": [priority.value for priority in TodoPriority]}

_TASK_OUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "subject": {"type": "string"},
        "description": {"type": "string"},
        "active_form": {"type": "string"},
        "status": {"type": "string"},
        "priority": {"type": "string"},
        "owner": {"type": "string", "description": "Empty: nobody works on it."},
        "blocked_by": {"type": "array", "items": {"type": "string"}, "description": "Tasks it waits for."},
        "blocks": {"type": "array", "items": {"type": "string"}, "description": "Tasks waiting for it."},
        "ready": {"type": "boolean", "description": "Pending, unowned, every blocker finished: free to claim."},
        "lease_expires_at": {"type": "string", "description": "When its claim lapses unless renewed."},
    },
    "required": ["id", "subject", "status", "owner", "blocked_by", "ready"],
}
_SESSION_OUT: dict[str, Any] = {
    "session_id": {"type": "string", "description": "The sessiontodo session holding the task list."},
    "revision": {"type": "integer", "description": "The list's revision: every change increments it."},
}


def _output(properties: Mapping[str, Any], required: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**_SESSION_OUT, **properties},
        "required": ["session_id", "revision", *required],
    }


def _input(properties: Mapping[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required), "additionalProperties": False}


TASK_CREATE = types.Tool(
    name="task_create",
    title="Create a task",
    description="Add a task to this session's shared task list (status pending). Give blocked_by to make it wait "
    "for other tasks. Returns the task with its id.",
    inputSchema=_input(
        {
            "subject": _SUBJECT,
            "description": _DESCRIPTION,
            "active_form": _ACTIVE_FORM,
            "priority": _PRIORITY,
            "owner": _OWNER,
            "blocked_by": {**_TASK_IDS, "description": "Ids of tasks that must be finished before this one."},
        },
        ["subject"],
    ),
    outputSchema=_output({"task": _TASK_OUT}, ["task"]),
    annotations=types.ToolAnnotations(destructiveHint=False, idempotentHint=False, openWorldHint=False),
)

TASK_GET = types.Tool(
    name="task_get",
    title="Get a task",
    description="Read one task by id: subject, description, status, owner, what it waits for (blocked_by) "
    "and what waits for it (blocks).",
    inputSchema=_input({"task_id": _TASK_ID}, ["task_id"]),
    outputSchema=_output({"task": _TASK_OUT}, ["task"]),
    annotations=types.ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False),
)

TASK_LIST = types.Tool(
    name="task_list",
    title="List the tasks",
    description="List this session's tasks in order: id, subject, status, owner, the unfinished tasks each "
    "waits for (blocked_by) and whether it is ready to claim. ready: true lists only ready tasks; owner: only "
    "that owner's ('' only unowned ones). Use it to find work, then task_claim.",
    inputSchema=_input({"ready": {"type": "boolean"}, "owner": _OWNER}),
    outputSchema=_output({"tasks": {"type": "array", "items": _TASK_OUT}}, ["tasks"]),
    annotations=types.ToolAnnotations(readOnlyHint=True, idempotentHint=True, openWorldHint=False),
)

TASK_UPDATE = types.Tool(
    name="task_update",
    title="Update a task",
    description="Change one task: subject, description, active_form, priority, status (pending, in_progress, "
    "completed, cancelled; deleted deletes it), owner ('' clears it), add_blocked_by / remove_blocked_by (tasks "
    "it waits for), add_blocks (tasks that wait for it), metadata (a key set to null is removed). Mark a task "
    "completed as soon as it is done: the tasks waiting for it become ready.",
    inputSchema=_input(
        {
            "task_id": _TASK_ID,
            "subject": _SUBJECT,
            "description": _DESCRIPTION,
            "active_form": _ACTIVE_FORM,
            "priority": _PRIORITY,
            "status": {"type": "string", "enum": [*(status.value for status in TodoStatus), DELETED]},
            "owner": _OWNER,
            "add_blocked_by": _TASK_IDS,
            "remove_blocked_by": _TASK_IDS,
            "add_blocks": _TASK_IDS,
            "metadata": {
                "type": "object",
                "additionalProperties": {"type": ["string", "null"]},
                "description": "Entries to set; a null value removes the key.",
            },
        },
        ["task_id"],
    ),
    outputSchema=_output({"task": {"type": ["object", "null"]}, "deleted": {"type": "boolean"}}, ["deleted"]),
    annotations=types.ToolAnnotations(destructiveHint=True, idempotentHint=True, openWorldHint=False),
)

TASK_CLAIM = types.Tool(
    name="task_claim",
    title="Claim a task",
    description="Take a task to work on it: it becomes yours and in_progress, atomically (if several agents "
    "claim at once, exactly one gets it). Without task_id, the first ready task is claimed; when none is ready "
    "the answer says nothing_ready. A task that is taken, blocked or not pending is refused, saying why. "
    "With lease_seconds the claim lapses unless renewed in time (claim it again, or update it with your owner): "
    "the task goes back to pending for others.",
    inputSchema=_input(
        {
            "owner": {**_OWNER, "minLength": 1},
            "task_id": _TASK_ID,
            "lease_seconds": {"type": "integer", "minimum": 1, "maximum": 86400},
        },
        ["owner"],
    ),
    outputSchema=_output(
        {"task": {"type": ["object", "null"]}, "nothing_ready": {"type": "boolean"}}, ["task", "nothing_ready"]
    ),
    annotations=types.ToolAnnotations(destructiveHint=False, idempotentHint=False, openWorldHint=False),
)

TASK_RELEASE = types.Tool(
    name="task_release",
    title="Release a task",
    description="Give back a task you claimed and will not finish: it becomes pending and unowned, ready for "
    "others. (To finish one, task_update it to completed.)",
    inputSchema=_input({"task_id": _TASK_ID, "owner": {**_OWNER, "minLength": 1}}, ["task_id", "owner"]),
    outputSchema=_output({"task": _TASK_OUT}, ["task"]),
    annotations=types.ToolAnnotations(destructiveHint=False, idempotentHint=False, openWorldHint=False),
)

TASK_TOOLS = {tool.name: tool for tool in (TASK_CREATE, TASK_GET, TASK_LIST, TASK_UPDATE, TASK_CLAIM, TASK_RELEASE)}


def task_json(todo: Todo, todos: Sequence[Todo]) -> dict[str, Any]:
    """A task as the tools show it; ``blocked_by`` lists only the blockers not finished yet (as Claude Code's
    TaskList), judged in ``todos``, the list it is part of."""
    statuses = {other.id: other.status for other in todos}
    waiting = [blocker for blocker in todo.blocked_by if statuses.get(blocker) not in FINISHED]
    task: dict[str, Any] = {
        "id": todo.id,
        "subject": todo.content,
        "description": todo.description,
        "active_form": todo.active_form,
        "status": str(todo.status),
        "priority": str(todo.priority),
        "owner": todo.owner,
        "blocked_by": waiting,
        "blocks": todo.blocks,
        "ready": todo.status is TodoStatus.PENDING and not todo.owner and not waiting,
    }
    if todo.metadata:
        task["metadata"] = todo.metadata
    if todo.lease_expires_at is not None:
        task["lease_expires_at"] = todo.lease_expires_at.isoformat()
    return task


def refusal_text(task_id: str, refusal: ClaimRefused) -> str:
    """Why a claim, renewal or release was refused, and what to do instead."""
    name = task_id or refusal.metadata.get("todoId", "the task")
    if refusal.reason == "TODO_TAKEN":
        return f"refused: {name} is taken by {refusal.owner}; claim another (task_list with ready: true)"
    if refusal.reason == "TODO_BLOCKED":
        return (
            f"refused: {name} is blocked by {', '.join(refusal.blocked_by)}; finish those first or claim a ready task"
        )
    if refusal.reason == "TODO_NOT_PENDING":
        return f"refused: {name} is {refusal.status.lower()}, not pending"
    holder = refusal.owner or "nobody"
    return (
        f"refused: {name} is not yours (owner: {holder}, status {refusal.status.lower()}); your claim may have lapsed"
    )


_BATCH_FIELD = re.compile(r"^writes\[(\d+)\]\.update_todo\.")


class TaskTools:
    """The task tools' calls on one sessiontodo session, through ``client``."""

    def __init__(self, client: TodoClient, session_id: str) -> None:
        self._client = client
        self._session_id = session_id

    async def call(self, tool: types.Tool, arguments: Mapping[str, Any]) -> Any:
        """The tool's result, or a tool error saying why; never an exception."""
        try:
            check_arguments(tool, arguments)
            if tool is TASK_CREATE:
                return await self._create(arguments)
            if tool is TASK_GET:
                return await self._get(arguments["task_id"])
            if tool is TASK_LIST:
                return await self._list(arguments)
            if tool is TASK_UPDATE:
                return await self._update(arguments)
            if tool is TASK_CLAIM:
                return await self._claim(arguments)
            return await self._release(arguments)
        except ToolFailure as failure:
            return error_result(str(failure))
        except ClaimRefused as refusal:
            return error_result(refusal_text(arguments.get("task_id", ""), refusal))
        except ServiceError as error:
            return error_result(failure_text(error))

    def _answer(self, revision: int, **fields: Any) -> dict[str, Any]:
        return {"session_id": self._session_id, "revision": revision, **fields}

    async def _with_list(self, todo: Todo | None, revision: int) -> dict[str, Any]:
        """The answer about ``todo``, as the list holds it now (its blockers judged there)."""
        if todo is None:
            return self._answer(revision, task=None)
        todos = (await self._client.get_todos(self._session_id)).todos
        now = next((listed for listed in todos if listed.id == todo.id), todo)
        return self._answer(revision, task=task_json(now, todos))

    async def _create(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        todo = Todo(
            content=arguments["subject"],
            description=arguments.get("description", ""),
            active_form=arguments.get("active_form", ""),
            priority=TodoPriority(arguments.get("priority", TodoPriority.MEDIUM)),
            owner=arguments.get("owner", ""),
            blocked_by=arguments.get("blocked_by", []),
        )
        added = await self._client.add_todo(self._session_id, todo, origin=ORIGIN)
        return await self._with_list(added.todo, added.revision)

    async def _get(self, task_id: str) -> dict[str, Any]:
        todos = await self._client.get_todos(self._session_id)
        todo = next((todo for todo in todos.todos if todo.id == task_id), None)
        if todo is None:
            raise ToolFailure(f"not found: no task {task_id!r} in this list (task_list shows the ids)")
        return self._answer(todos.revision, task=task_json(todo, todos.todos))

    async def _list(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        ready, owner = arguments.get("ready", False), arguments.get("owner")
        whole = await self._client.get_todos(self._session_id)
        selected: TodoList = whole
        if ready or owner is not None:
            selected = await self._client.get_todos(self._session_id, ready=ready, owner=owner)
        return self._answer(selected.revision, tasks=[task_json(todo, whole.todos) for todo in selected.todos])

    async def _update(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        task_id = arguments["task_id"]
        if arguments.get("status") == DELETED:
            if set(arguments) - {"task_id", "status"}:
                raise ToolFailure("invalid: status deleted deletes the task: give no other change with it")
            revision = await self._client.remove_todo(self._session_id, task_id, origin=ORIGIN)
            return self._answer(revision, task=None, deleted=True)
        own = _own_update(self._session_id, task_id, arguments)
        blocks = [
            UpdateTodoWrite(session_id=self._session_id, todo_id=other, add_blocked_by=[task_id])
            for other in arguments.get("add_blocks", [])
        ]
        if own is None and not blocks:
            raise ToolFailure("invalid: nothing to change: give at least one field besides task_id")
        writes = [*blocks, own or UpdateTodoWrite(session_id=self._session_id, todo_id=task_id)]
        try:
            results = await self._client.batch_write(writes, origin=ORIGIN)
        except InvalidArgument as error:
            raise ToolFailure(f"invalid: {_batch_violations(error, len(blocks))}") from None
        last = results[-1]
        answer = await self._with_list(last.todo, last.revision)
        return answer | {"deleted": False}

    async def _claim(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        lease = arguments.get("lease_seconds")
        claim = await self._client.claim_todo(
            self._session_id,
            arguments["owner"],
            arguments.get("task_id", ""),
            lease=float(lease) if lease is not None else None,
            origin=ORIGIN,
        )
        answer = await self._with_list(claim.todo, claim.revision)
        return answer | {"nothing_ready": claim.nothing_ready}

    async def _release(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        released = await self._client.release_todo(
            self._session_id, arguments["task_id"], arguments["owner"], origin=ORIGIN
        )
        return await self._with_list(released.todo, released.revision)


def _own_update(session_id: str, task_id: str, arguments: Mapping[str, Any]) -> UpdateTodoWrite | None:
    """``task_update``'s changes to the task itself, or None when it changes only other tasks."""
    changes: dict[str, Any] = {}
    for argument, field in (("subject", "content"), ("description", "description"), ("active_form", "active_form")):
        if argument in arguments:
            changes[field] = arguments[argument]
    if "owner" in arguments:
        changes["owner"] = arguments["owner"]
    if "status" in arguments:
        changes["status"] = TodoStatus(arguments["status"])
    if "priority" in arguments:
        changes["priority"] = TodoPriority(arguments["priority"])
    for argument in ("add_blocked_by", "remove_blocked_by"):
        if arguments.get(argument):
            changes[argument] = arguments[argument]
    metadata: Mapping[str, str | None] = arguments.get("metadata", {})
    if metadata:
        changes["metadata"] = {key: value for key, value in metadata.items() if value is not None}
        changes["remove_metadata"] = [key for key, value in metadata.items() if value is None]
    if not changes:
        return None
    return UpdateTodoWrite(session_id=session_id, todo_id=task_id, **changes)


def _batch_violations(error: InvalidArgument, blocks: int) -> str:
    """A refused ``task_update``'s field violations in its own arguments' names: the batch's first writes are
    ``add_blocks[i]``, the last one the task's own changes."""
    named = []
    for field, why in error.violations:
        match = _BATCH_FIELD.match(field)
        if match is None:
            named.append(f"{field}: {why}" if field else why)
            continue
        index = int(match.group(1))
        rest = field[match.end() :]
        if index < blocks:
            named.append(f"add_blocks[{index}]: {why}")
        else:
            named.append(f"{re.sub(r'^content', 'subject', rest)}: {why}")
    return "; ".join(named) or error.message

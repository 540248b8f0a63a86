"""OpenCode's todo list as it travels over ACP: the ``todowrite`` tool call (a documented mapping).

OpenCode (``opencode acp``) up to 1.15 sends ACP ``plan`` updates; since 1.16 it sends none,
and its list reaches the editor only inside the ``todowrite`` tool call (captured from 1.18.33):

1. ``tool_call`` — ``title: "todowrite"``, ``status: "pending"``, ``rawInput: {}``;
2. ``tool_call_update`` — ``status: "in_progress"``, ``rawInput: {"todos": [...]}`` (what the
   model asked for);
3. ``tool_call_update`` — ``status: "completed"``, ``rawOutput.metadata.todos`` (what OpenCode
   stored). When a session is loaded the call is replayed as a ``tool_call`` titled ``"N todos"``
   whose ``rawInput`` already holds the list, then the completed update.

A tool call counts as ``todowrite`` when titled so or when its ``rawInput`` holds nothing but a
``todos`` list; its list is taken at step 2 (as early as 1.15's ``plan`` update) and again at
step 3 (the authoritative one). The list's items are OpenCode todos (``content``, ``status``
including ``cancelled``, ``priority``), read like plan entries. Failed calls are ignored.
"""

from __future__ import annotations

from typing import Any

TOOL_TITLE = "todowrite"


def _todos_input(update: dict[str, Any]) -> list[Any] | None:
    raw_input = update.get("rawInput")
    if isinstance(raw_input, dict) and set(raw_input) == {"todos"} and isinstance(raw_input["todos"], list):
        return raw_input["todos"]
    return None


def _todos_output(update: dict[str, Any]) -> list[Any] | None:
    raw_output = update.get("rawOutput")
    metadata = raw_output.get("metadata") if isinstance(raw_output, dict) else None
    todos = metadata.get("todos") if isinstance(metadata, dict) else None
    return todos if isinstance(todos, list) else None


class TodoWriteCalls:
    """Recognises OpenCode's ``todowrite`` tool calls per session and yields the lists they write."""

    def __init__(self) -> None:
        self._open: dict[str, set[str]] = {}

    def observe(self, session_id: str, update: dict[str, Any]) -> list[Any] | None:
        """The todo list this ``session/update`` writes, or None if it is not a ``todowrite`` step carrying one."""
        kind = update.get("sessionUpdate")
        call_id = update.get("toolCallId")
        if kind not in ("tool_call", "tool_call_update") or not isinstance(call_id, str):
            return None
        calls = self._open.setdefault(session_id, set())
        todos_in = _todos_input(update)
        if update.get("title") == TOOL_TITLE or todos_in is not None:
            calls.add(call_id)
        if call_id not in calls:
            if not calls:
                del self._open[session_id]
            return None
        status = update.get("status")
        if status in ("completed", "failed"):
            calls.discard(call_id)
            if not calls:
                del self._open[session_id]
            return _todos_output(update) if status == "completed" else None
        return todos_in if status == "in_progress" else None

    def forget(self, session_id: str) -> None:
        self._open.pop(session_id, None)

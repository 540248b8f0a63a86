"""Pure conversions for ACP's next plan protocol: ``plan_update`` / ``plan_removed`` (several plans per session).

The unstable v1 schema (RFD "plan operations") adds two session updates, sent only to an editor
that advertised ``clientCapabilities.plan``::

    {"sessionUpdate": "plan_update", "plan": {"type": "items", "planId": "p1", "entries": [...]}}
    {"sessionUpdate": "plan_update", "plan": {"type": "markdown", "planId": "p1", "content": "## …"}}
    {"sessionUpdate": "plan_update", "plan": {"type": "file", "planId": "p1", "uri": "file:///…"}}
    {"sessionUpdate": "plan_removed", "planId": "p1"}

The v2 draft keeps ``plan_update`` (``items`` its stable form) as the only plan update, adds a
``cancelled`` status, and reads a v1 ``plan`` update as the plan with id ``"main"``.

How sessiontodo keeps them: the plan ``"main"`` (a v1 ``plan`` update, or ``plan_update`` with
that id) is the ACP session's own list; every other plan is a child session of it
(``plan_session_id``), labelled ``acp.plan_id`` with the agent's plan id. An ``items`` plan is its
entries, as for ``plan``; a ``markdown`` or ``file`` plan is one todo holding the text or URI, with
``acp/plan.type`` in its metadata, so the form travels atomically with the content.
``plan_removed`` removes the child session (or clears ``"main"``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from acp.meta import CLIENT_METHODS

from sessiontodo_acp.conversions import (
    PlanReading,
    plan_entry_from_todo,
    plan_meta_of,
    read_plan_entries,
)
from sessiontodo_client import Todo, TodoStatus

MAIN_PLAN_ID = "main"
"""The plan a v1 ``plan`` update is (the v2 draft's conversion): the ACP session's own list."""

PLAN_ID_LABEL = "acp.plan_id"
"""The label of a plan's child session that holds the agent's plan id."""

PLAN_TYPE_KEY = "acp/plan.type"
"""Todo metadata of a ``markdown`` or ``file`` plan's one todo: the plan's type."""

PlanType = Literal["items", "markdown", "file"]
_TEXT_FIELD: dict[str, str] = {"markdown": "content", "file": "uri"}
"""Where a one-todo plan's text travels on the wire."""


@dataclass(frozen=True)
class EditorPlans:
    """Which plan updates an editor takes, from its ``initialize`` and the protocol version agreed on."""

    plan_updates: bool = False
    """``plan_update`` / ``plan_removed``: advertised ``clientCapabilities.plan``, or protocol 2 and later."""
    cancelled: bool = False
    """The ``cancelled`` status as itself (protocol 2 and later); otherwise the ``[cancelled] `` marker."""
    plain_plans: bool = True
    """The v1 ``plan`` update, which the v2 draft removes."""

    @classmethod
    def negotiated(cls, client_capabilities: Any, protocol_version: Any) -> EditorPlans:
        """``client_capabilities`` from the editor's ``initialize``, ``protocol_version`` from the agent's answer."""
        version = protocol_version if isinstance(protocol_version, int) else 1
        advertised = isinstance(client_capabilities, Mapping) and isinstance(client_capabilities.get("plan"), Mapping)
        return cls(plan_updates=advertised or version >= 2, cancelled=version >= 2, plain_plans=version < 2)


def plan_session_id(session_id: str, plan_id: str) -> str:
    """The sessiontodo session holding a plan: the ACP session itself for ``"main"``, else a child whose id
    is derived from the plan id (any string: hashed into the characters session ids allow)."""
    if plan_id == MAIN_PLAN_ID:
        return session_id
    return f"{session_id}:plan:{hashlib.sha256(plan_id.encode()).hexdigest()[:16]}"


# ACP -> sessiontodo


@dataclass(frozen=True)
class PlanContent:
    """A ``plan_update``'s plan read into todos, or why it cannot be stored."""

    plan_id: str
    reading: PlanReading = field(default_factory=lambda: PlanReading([]))
    refused: str | None = None
    """Set when the plan cannot be stored (no plan id, an unknown type): it is then only forwarded."""


def read_plan_content(plan: Any) -> PlanContent:
    """Read the ``plan`` of a ``plan_update`` (JSON, as on the wire); never raises."""
    if not isinstance(plan, Mapping) or not isinstance(plan.get("planId"), str) or not plan["planId"]:
        return PlanContent("", refused="plan_update without a planId")
    plan_id, kind = plan["planId"], plan.get("type")
    if kind == "items":
        return PlanContent(plan_id, read_plan_entries(plan.get("entries"), plan.get("_meta")))
    if kind in _TEXT_FIELD:
        text = plan.get(_TEXT_FIELD[kind])
        if not isinstance(text, str) or not text.strip():
            return PlanContent(plan_id, refused=f"a {kind} plan without its {_TEXT_FIELD[kind]}")
        return PlanContent(plan_id, PlanReading([Todo(content=text, metadata={PLAN_TYPE_KEY: kind})]))
    return PlanContent(plan_id, refused=f"plan type {kind!r} is not one of items, markdown, file")


# sessiontodo -> ACP


def _entry(todo: Todo, editor: EditorPlans) -> dict[str, Any]:
    """The entry's JSON; a cancelled todo says ``cancelled`` to an editor that takes it, else it has the marker."""
    as_itself = editor.cancelled and todo.status is TodoStatus.CANCELLED
    shown = todo.model_copy(update={"status": TodoStatus.COMPLETED}) if as_itself else todo
    entry = plan_entry_from_todo(shown).model_dump(mode="json", by_alias=True, exclude_none=True)
    return entry | ({"status": TodoStatus.CANCELLED.value} if as_itself else {})


def plan_update(plan_id: str, todos: Sequence[Todo], editor: EditorPlans) -> dict[str, Any]:
    """The ``plan_update`` session update that shows a stored plan (its type read from its todos)."""
    kind = todos[0].metadata.get(PLAN_TYPE_KEY) if len(todos) == 1 else None
    if kind in _TEXT_FIELD:
        return {
            "sessionUpdate": "plan_update",
            "plan": {"type": kind, "planId": plan_id, _TEXT_FIELD[kind]: todos[0].content},
        }
    plan: dict[str, Any] = {"type": "items", "planId": plan_id, "entries": [_entry(todo, editor) for todo in todos]}
    if meta := plan_meta_of(todos):
        plan["_meta"] = meta
    return {"sessionUpdate": "plan_update", "plan": plan}


def plan_removed(plan_id: str) -> dict[str, Any]:
    return {"sessionUpdate": "plan_removed", "planId": plan_id}


def session_update(session_id: str, update: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON-RPC ``session/update`` notification carrying ``update``."""
    return {
        "jsonrpc": "2.0",
        "method": CLIENT_METHODS["session_update"],
        "params": {"sessionId": session_id, "update": dict(update)},
    }

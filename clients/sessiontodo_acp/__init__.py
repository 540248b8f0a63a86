"""sessiontodo over the Agent Client Protocol (ACP), on the official ``agent-client-protocol`` SDK.

- ``PlanPublisher`` (agent side): sends a session's todos to the editor as ``plan`` updates.
- ``PlanSink`` (client side): stores the plans a remote agent sends as that session's todos.
- ``conversions``: todos <-> ACP plan entries (ids in ``_meta``, ``cancelled`` made visible).
- ``sessiontodo-acp-proxy`` (``sessiontodo_acp.launch``): a transparent stdio proxy that puts
  any ACP agent's plans into sessiontodo without changing the agent or the editor.

The names below load on first use: the proxy starts its agent before gRPC and the ACP SDK
(about half a second of imports) are loaded, so that the editor's ``initialize`` never waits.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sessiontodo_acp.conversions import (
        CANCELLED_PREFIX,
        META_TODO_ID,
        META_TODO_STATUS,
        PlanReading,
        keep_known_ids,
        plan_entry_from_todo,
        plan_notification,
        plan_update_from_todos,
        read_plan_entries,
        read_plan_update,
        same_plan,
    )
    from sessiontodo_acp.publisher import PlanPublisher
    from sessiontodo_acp.settings import ProxySettings
    from sessiontodo_acp.sink import PlanSink

_MODULE_OF = {
    **dict.fromkeys(
        [
            "CANCELLED_PREFIX",
            "META_TODO_ID",
            "META_TODO_STATUS",
            "PlanReading",
            "keep_known_ids",
            "plan_entry_from_todo",
            "plan_notification",
            "plan_update_from_todos",
            "read_plan_entries",
            "read_plan_update",
            "same_plan",
        ],
        "sessiontodo_acp.conversions",
    ),
    "PlanPublisher": "sessiontodo_acp.publisher",
    "PlanSink": "sessiontodo_acp.sink",
    "ProxySettings": "sessiontodo_acp.settings",
}

__all__ = [
    "CANCELLED_PREFIX",
    "META_TODO_ID",
    "META_TODO_STATUS",
    "PlanPublisher",
    "PlanReading",
    "PlanSink",
    "ProxySettings",
    "keep_known_ids",
    "plan_entry_from_todo",
    "plan_notification",
    "plan_update_from_todos",
    "read_plan_entries",
    "read_plan_update",
    "same_plan",
]


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

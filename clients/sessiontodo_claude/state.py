"""What a bridge remembers between runs: the pairs it made and the fields both sides last agreed on.

It is the third side of every merge (``merge.merge``'s ``base``) and the memory of which task a
vanished file was, so a restart — or a kill -9 — tells "deleted" from "never seen" and "changed
on this side" from "changed on that side". Written whole to a temporary file and renamed, after
every pass that changed it; a pass cut short is redone on restart (a field equal on both sides
needs nothing, whatever the state says).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from sessiontodo_claude.mapping import Item


@dataclass
class BridgeState:
    session_id: str
    session_created: str = ""
    """When the session the pairs belong to was created (ISO 8601; "" unknown): a session of the same id
    created at another time (removed and made again, a store that keeps nothing restarted) holds none
    of them, and their todos missing from it were not deleted."""
    pairs: dict[str, str] = field(default_factory=dict)
    """todo id → task id, for every todo both sides hold."""
    agreed: dict[str, Item] = field(default_factory=dict)
    """todo id → the fields both sides showed after the last pass."""


def load_state(path: Path, session_id: str) -> BridgeState:
    """The state kept for ``session_id``; a fresh one when there is none (or it was another session's)."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return BridgeState(session_id)
    if document.get("session_id") != session_id:
        return BridgeState(session_id)
    agreed = {
        todo_id: {key: tuple(value) if key == "blocked_by" else value for key, value in item.items()}
        for todo_id, item in document.get("agreed", {}).items()
    }
    return BridgeState(session_id, str(document.get("session_created", "")), dict(document.get("pairs", {})), agreed)


def save_state(path: Path, state: BridgeState) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    document = {
        "session_id": state.session_id,
        "session_created": state.session_created,
        "pairs": state.pairs,
        "agreed": state.agreed,
    }
    temporary.write_text(json.dumps(document, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)

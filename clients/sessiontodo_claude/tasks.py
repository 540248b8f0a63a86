"""Claude Code's task, as one ``<id>.json`` file of a task list holds it.

The schema is the real CLI's (2.1.x): ``id``, ``subject``, ``description``, ``activeForm``?,
``owner``?, ``status`` (``pending`` / ``in_progress`` / ``completed``, nothing else: a file with
another status is invisible to Claude), ``blocks``, ``blockedBy``, ``metadata``? (any JSON values).
Claude writes it as ``JSON.stringify(task, null, 2)``; ``encode`` writes the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

ClaudeStatus = Literal["pending", "in_progress", "completed"]
CLAUDE_STATUSES: tuple[ClaudeStatus, ...] = ("pending", "in_progress", "completed")

TASK_SUFFIX = ".json"


class NotATask(ValueError):
    """A file's text is not a task Claude would read: not JSON (yet), or not its schema."""


@dataclass(frozen=True)
class Task:
    """One task of a Claude Code task list. Other top-level keys of a file are not kept: Claude drops
    them on its next write too (what should travel goes in ``metadata``)."""

    id: str
    subject: str
    description: str = ""
    active_form: str | None = None
    owner: str | None = None
    status: ClaudeStatus = "pending"
    blocks: tuple[str, ...] = ()
    blocked_by: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The file's object in Claude's key order; absent optional fields are left out, as Claude does."""
        document: dict[str, Any] = {"id": self.id, "subject": self.subject, "description": self.description}
        if self.active_form is not None:
            document["activeForm"] = self.active_form
        if self.owner is not None:
            document["owner"] = self.owner
        document |= {"status": self.status, "blocks": list(self.blocks), "blockedBy": list(self.blocked_by)}
        if self.metadata:
            document["metadata"] = dict(self.metadata)
        return document


def _strings(value: object, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise NotATask(f"{name} is not a list of strings")
    return tuple(value)


def _optional_string(document: Mapping[str, Any], name: str) -> str | None:
    value = document.get(name)
    if value is not None and not isinstance(value, str):
        raise NotATask(f"{name} is not a string")
    return value


def task_from_json(document: object) -> Task:
    """A task from a parsed file, checked as Claude checks it; raises ``NotATask``."""
    if not isinstance(document, dict):
        raise NotATask("not a JSON object")
    for name in ("id", "subject", "description"):
        if not isinstance(document.get(name), str):
            raise NotATask(f"{name} is missing or not a string")
    status = document.get("status")
    if status not in CLAUDE_STATUSES:
        raise NotATask(f"status {status!r} is not one of Claude's ({', '.join(CLAUDE_STATUSES)})")
    metadata = document.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise NotATask("metadata is not an object")
    return Task(
        id=document["id"],
        subject=document["subject"],
        description=document["description"],
        active_form=_optional_string(document, "activeForm"),
        owner=_optional_string(document, "owner"),
        status=status,
        blocks=_strings(document.get("blocks"), "blocks"),
        blocked_by=_strings(document.get("blockedBy"), "blockedBy"),
        metadata=metadata or {},
    )


def decode(text: str) -> Task:
    """A task from a file's text; raises ``NotATask`` for a half-written or foreign file."""
    try:
        document = json.loads(text)
    except ValueError as error:
        raise NotATask(f"not JSON: {error}") from None
    return task_from_json(document)


def encode(document: Mapping[str, Any]) -> str:
    """A file's text exactly as Claude writes it (``JSON.stringify(task, null, 2)``, no final newline)."""
    return json.dumps(document, indent=2, ensure_ascii=False)


def task_id_of(file_name: str) -> str | None:
    """The task id a file of the list folder holds, or None for anything else (dot files, locks, temp files)."""
    if file_name.startswith(".") or not file_name.endswith(TASK_SUFFIX):
        return None
    stem = file_name[: -len(TASK_SUFFIX)]
    return stem if stem.isdigit() and not stem.startswith("0") else None

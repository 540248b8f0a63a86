"""Configuration of ``sessiontodo-claude``, read once from flags and ``SESSIONTODO_CLAUDE_*`` variables."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sessiontodo_client import ServiceConnection
from sessiontodo_client.security import CONNECTION_GROUP


def folder_name(list_id: str) -> str:
    """The folder Claude Code keeps a list in: its id with every character but letters, digits, ``_`` and ``-``
    made ``-`` (as the CLI does)."""
    return re.sub(r"[^a-zA-Z0-9_-]", "-", list_id)


class Settings(BaseSettings, ServiceConnection):
    """Mirror one Claude Code task list and one sessiontodo session, both ways, live.

    Every knob is a flag or a SESSIONTODO_CLAUDE_* environment variable; flags win over the
    environment, which wins over the defaults.
    """

    model_config = SettingsConfigDict(
        env_prefix="SESSIONTODO_CLAUDE_", cli_kebab_case=True, cli_prog_name="sessiontodo-claude"
    )

    list: str = Field(
        "",
        validation_alias=AliasChoices("list", "SESSIONTODO_CLAUDE_LIST", "CLAUDE_CODE_TASK_LIST_ID"),
        json_schema_extra={"metavar": "LIST"},
        description="The task list to mirror, as Claude Code's CLAUDE_CODE_TASK_LIST_ID names it (the default).",
    )
    claude_home: Path = Field(
        Path.home(),
        json_schema_extra={"metavar": "DIR"},
        description="The home whose .claude/tasks/<list>/ holds the list (Claude Code's HOME). Default: yours.",
    )
    session_id: str = Field(
        "",
        json_schema_extra={"metavar": "ID"},
        description="The sessiontodo session to mirror into, created if missing (labels claude.list and title). "
        "Default: claude-<list>, the same on every machine sharing the list.",
    )
    log_level: str = Field("INFO", description="Python logging level; logs go to stderr.")

    @model_validator(mode="after")
    def _a_list(self) -> Settings:
        if not self.list:
            raise ValueError("no task list: pass --list or set CLAUDE_CODE_TASK_LIST_ID (as for Claude Code itself)")
        if not self.session_id:
            self.session_id = f"claude-{folder_name(self.list)}"
        return self

    @property
    def folder(self) -> Path:
        return self.claude_home / ".claude" / "tasks" / folder_name(self.list)

    @property
    def state_path(self) -> Path:
        """Where the bridge keeps its memory of the pairs (beside Claude's own folders, not among the tasks)."""
        return self.claude_home / ".claude" / "sessiontodo" / f"{folder_name(self.list)}.{self.session_id}.json"


GROUPS = {
    **CONNECTION_GROUP,
    "the task list": ["list", "claude_home", "session_id"],
}
EXAMPLES = (
    "CLAUDE_CODE_TASK_LIST_ID=parser sessiontodo-claude     # ~/.claude/tasks/parser <-> session claude-parser",
    "sessiontodo-claude --list parser --sessiontodo-address sessiontodo.internal:50051 --tls",
)

"""Real agents besides OpenCode, offline: Qwen Code and claude-agent-acp on the stub model.

Each gets a private ``HOME`` (and XDG dirs) under the test's temporary dir, an environment with
the inherited keys of its vendor removed, and its model pointed at ``StubModel`` on loopback:
Qwen Code speaks OpenAI chat completions, claude-agent-acp (Claude Code) the Anthropic Messages
API. ``todos`` is the list a test asks the agent to write, in the fields of that agent's todo
tool (Qwen Code's ``todo_write`` needs ids and takes no priority; Claude Code's ``TodoWrite``
takes ``activeForm``). Both binaries come from the root lockfile (``npm ci``).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.peers.opencode_real.stub_model import StubModel
from tests.support import ROOT

QWEN_ENTRY = ROOT / "node_modules" / "@qwen-code" / "qwen-code" / "cli-entry.js"
CLAUDE_ACP_ENTRY = ROOT / "node_modules" / "@zed-industries" / "claude-agent-acp" / "dist" / "index.js"

QWEN_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "openai"}},
    # The todo tool is off by default in 0.24.4: without it the model is never offered it.
    "tools": {"approvalMode": "yolo", "todoWrite": {"enabled": True}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False},
    "model": {"skipNextSpeakerCheck": True, "skipLoopDetection": True, "skipStartupContext": True},
}


@dataclass(frozen=True)
class RealAgent:
    """How to run one real agent offline and what it is asked to write."""

    name: str
    command: list[str]
    environment: dict[str, str]
    cwd: Path
    todos: list[dict[str, str]]
    """The list a prompt asks for, in the agent's own tool fields."""
    stored: list[tuple[str, str]]
    """The same list as sessiontodo must hold it: ``(content, status)``."""
    exit_code: int = 0
    """The proxy's exit code once the editor leaves: the agent's own."""


def _private_environment(root: Path, dropped_prefixes: tuple[str, ...]) -> dict[str, str]:
    home = root / "home"
    for name in ("home", "config", "data", "cache", "state"):
        (root / name).mkdir(parents=True, exist_ok=True)
    kept = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("XDG_", *dropped_prefixes)) and key not in ("HOME", "NODE_OPTIONS")
    }
    return kept | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(root / "config"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CACHE_HOME": str(root / "cache"),
        "XDG_STATE_HOME": str(root / "state"),
    }


def installed(entry: Path) -> str:
    assert entry.exists(), f"run `npm ci` (make test does): the root lockfile pins {entry.relative_to(ROOT)}"
    return str(entry)


def _project(root: Path) -> Path:
    project = root / "project"
    project.mkdir(parents=True, exist_ok=True)
    return project


def qwen_environment(root: Path, model: StubModel, settings: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The environment that runs Qwen Code offline on ``model``, in a private home under ``root`` whose
    settings are ``QWEN_SETTINGS`` with the top-level keys of ``settings`` put in their place."""
    environment = _private_environment(root, ("QWEN", "OPENAI")) | {
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "stub-key",
        "OPENAI_MODEL": "stub-model",
        "QWEN_TELEMETRY_ENABLED": "false",
        "QWEN_CODE_DISABLE_PRECONNECT": "1",
        "NO_BROWSER": "1",
    }
    path = Path(environment["HOME"]) / ".qwen" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**QWEN_SETTINGS, **(settings or {})}, indent=2))
    return environment


def qwen_code(root: Path, model: StubModel) -> RealAgent:
    """Qwen Code 0.24.4 in ACP mode (``--acp``), its todo tool enabled, on the OpenAI stub."""
    environment = qwen_environment(root, model)
    command = ["node", installed(QWEN_ENTRY), "--acp", "--auth-type", "openai", "--approval-mode", "yolo"]
    todos = [
        {"id": "1", "content": "Write the failing test", "status": "completed"},
        {"id": "2", "content": "Implement the feature", "status": "in_progress"},
        {"id": "3", "content": "Update the docs", "status": "pending"},
    ]
    return RealAgent(
        name="qwen-code",
        command=[*command, "--model", "stub-model"],
        environment=environment,
        cwd=_project(root),
        todos=todos,
        stored=[(todo["content"], todo["status"]) for todo in todos],
    )


def claude_agent_acp(root: Path, model: StubModel) -> RealAgent:
    """claude-agent-acp 0.23.1 (Claude Code through Zed's adapter) on the Anthropic Messages stub."""
    environment = _private_environment(root, ("ANTHROPIC", "CLAUDE")) | {
        "ANTHROPIC_BASE_URL": model.anthropic_base_url,
        "ANTHROPIC_API_KEY": "stub-key",
        # As root, Claude Code refuses the permission-skipping flag the adapter passes without it.
        "IS_SANDBOX": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    todos = [
        {"content": "Write the failing test", "status": "completed", "activeForm": "Writing the failing test"},
        {"content": "Implement the feature", "status": "in_progress", "activeForm": "Implementing the feature"},
        {"content": "Update the docs", "status": "pending", "activeForm": "Updating the docs"},
    ]
    return RealAgent(
        name="claude-agent-acp",
        command=["node", installed(CLAUDE_ACP_ENTRY)],
        environment=environment,
        cwd=_project(root),
        todos=todos,
        stored=[(todo["content"], todo["status"]) for todo in todos],
        exit_code=128 + signal.SIGTERM,  # it ignores the end of its input: the proxy's SIGTERM ends it
    )


REAL_AGENTS = {"qwen-code": qwen_code, "claude-agent-acp": claude_agent_acp}

"""The real Claude Code CLI (``@anthropic-ai/claude-code``, pinned in package.json), headless and offline.

``ClaudeCode`` runs ``claude -p --input-format stream-json --output-format stream-json`` against
the stub Anthropic API, with a private ``HOME`` (its ``.claude/tasks/<list>/`` is the list) and the
Task tools on. One process stays up across prompts — a *running* session — so a test sends a
script (``run``), changes things outside, and sends the next one; each ``run`` returns the texts
of the tool results Claude produced (what ``TaskList`` printed, for one).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from tests.peers.claude_code.stub_anthropic import SELECT_TASK_TOOLS, Step, StubAnthropic, steps_prompt
from tests.support import ROOT

CLAUDE = ROOT / "node_modules" / ".bin" / "claude"
TURN_TIMEOUT = 60.0
"""Seconds a script may take (a CLI start and a few tool calls take one or two)."""


def claude_environment(home: Path, api: StubAnthropic, list_id: str) -> dict[str, str]:
    """What the CLI needs to run offline with the Task tools, and nothing inherited that could steer it."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": api.base_url,
        "ANTHROPIC_API_KEY": "stub-key",
        "IS_SANDBOX": "1",  # root may skip permissions only in a sandbox
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1",  # the Task tools are off for the default model otherwise
        "CLAUDE_CODE_TASK_LIST_ID": list_id,
    }


class ClaudeCode:
    """One running Claude Code session on the list ``list_id`` of ``home``: ``async with ClaudeCode(...) as claude``."""

    def __init__(self, home: Path, api: StubAnthropic, list_id: str) -> None:
        assert CLAUDE.exists(), "the Claude Code CLI is missing: `make test` installs it (npm ci)"
        self.home = home
        self.list_id = list_id
        self._env = claude_environment(home, api, list_id)
        self._process: asyncio.subprocess.Process | None = None
        self._tools_loaded = False

    @property
    def folder(self) -> Path:
        return self.home / ".claude" / "tasks" / self.list_id

    async def __aenter__(self) -> ClaudeCode:
        self.home.mkdir(parents=True, exist_ok=True)
        self._process = await asyncio.create_subprocess_exec(
            str(CLAUDE),
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
            cwd=self.home,
            env=self._env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            limit=16 * 1024 * 1024,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._process is not None
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            await asyncio.wait_for(self._process.wait(), 10)
        except TimeoutError:
            self._process.kill()
            await self._process.wait()

    async def run(self, *steps: Step) -> list[str]:
        """Have the model call ``steps`` in order (the Task tools are loaded first, once); returns the text of
        every tool result of this prompt, in order, the tool search's left out."""
        process = self._process
        assert process is not None
        assert process.stdin is not None
        assert process.stdout is not None
        script = steps if self._tools_loaded else (SELECT_TASK_TOOLS, *steps)
        message = {"type": "user", "message": {"role": "user", "content": steps_prompt(*script)}}
        process.stdin.write(json.dumps(message).encode() + b"\n")
        await process.stdin.drain()
        results: list[str] = []
        async with asyncio.timeout(TURN_TIMEOUT):
            while True:
                line = await process.stdout.readline()
                assert line, f"Claude Code exited ({await process.wait()}) before answering"
                event: dict[str, Any] = json.loads(line)
                if event.get("type") == "user":
                    results += [_result_text(block) for block in event["message"]["content"] if _is_result(block)]
                elif event.get("type") == "result":
                    assert event.get("subtype") == "success", event
                    break
        if not self._tools_loaded:
            self._tools_loaded = True
            results = results[1:]
        return results

    async def task_list(self) -> str:
        """What Claude's TaskList answers now."""
        (listed,) = await self.run(("TaskList", {}))
        return listed

    def kill(self) -> None:
        assert self._process is not None
        with contextlib.suppress(ProcessLookupError):
            self._process.kill()


def _is_result(block: object) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


LISTED = re.compile(
    r"#(?P<id>\d+) \[(?P<status>\w+)\] (?P<subject>.+?)(?: \((?P<owner>[^)]*)\))?(?: \[blocked by [^]]*\])?$"
)


def listed_subjects(task_list: str) -> dict[str, str]:
    """Subject → status of each line of what TaskList answered."""
    matches = [LISTED.match(line) for line in task_list.splitlines()]
    return {match["subject"]: match["status"] for match in matches if match}


def task_files(folder: Path) -> dict[str, dict[str, Any]]:
    """The task files Claude left in ``folder``, parsed, by id."""
    return {
        path.stem: json.loads(path.read_text(encoding="utf-8"))
        for path in folder.glob("*.json")
        if not path.name.startswith(".")
    }

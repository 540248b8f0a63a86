"""The real OpenCode as a test peer, offline: a temporary home, a project, ``opencode serve``.

``OpenCodeHome`` makes everything OpenCode reads (``HOME``, ``XDG_*`` dirs, a ``git init``ed
project with an ``opencode.json`` whose only provider is the stub model) and the environment
that keeps it off the network; ``command(...)`` runs the binary pinned in package-lock.json
(npm ``opencode-ai``). A home made with ``plugins`` lists them in every project's ``opencode.json``;
without, OpenCode runs ``--pure`` (no external plugins). ``OpenCodeServer`` runs ``opencode serve``
on a fixed free port and can be stopped and started again on the same port with the same state
(an OpenCode restart).
``opencode acp`` users take ``home.command("acp")`` and ``home.environment()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import httpx

from sessiontodo_client import NotFound, TodoClient
from sessiontodo_opencode.translate import todos_from_service
from tests.peers.opencode_real.stub_model import todo_prompt
from tests.support import ROOT, eventually, free_port

OPENCODE_BIN = ROOT / "node_modules" / ".bin" / "opencode"

OFFLINE_ENVIRONMENT = {
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    "OPENCODE_DISABLE_SHARE": "1",
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    # Without it a fresh HOME starts a background `npm install @opencode-ai/plugin`.
    "npm_config_offline": "true",
}
"""What keeps OpenCode from fetching anything (models list, updates, plugins, LSP servers)."""


def opencode_config(model_base_url: str, plugins: Sequence[object] = ()) -> dict[str, object]:
    """``opencode.json`` with the stub model as the only provider, ``todowrite`` allowed, and ``plugins``."""
    return ({"plugin": list(plugins)} if plugins else {}) | {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": "stub/stub-model",
        "small_model": "stub/stub-model",
        "enabled_providers": ["stub"],
        "lsp": False,
        "formatter": False,
        "permission": {"todowrite": "allow"},
        "provider": {
            "stub": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Stub",
                "options": {"baseURL": model_base_url, "apiKey": "x"},
                "models": {
                    "stub-model": {"name": "Stub", "tool_call": True, "limit": {"context": 128000, "output": 4096}}
                },
            }
        },
    }


class OpenCodeHome:
    """A private OpenCode installation state under ``root``: home, XDG dirs and project dirs."""

    def __init__(self, root: Path, model_base_url: str, plugins: Sequence[object] = ()) -> None:
        self.root = root
        self.model_base_url = model_base_url
        self.plugins = list(plugins)
        """``opencode.json``'s ``plugin`` entries: a path, or ``[path, options]``."""
        self.home = root / "home"
        for name in ("home", "config", "data", "cache", "state"):
            (root / name).mkdir(parents=True, exist_ok=True)
        self.project = self.new_project("project")

    def new_project(self, name: str) -> Path:
        """Another git project configured for the stub model (a second ``directory``)."""
        project = self.root / name
        project.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "init", "--quiet", str(project)], check=True)
        config = opencode_config(self.model_base_url, self.plugins)
        (project / "opencode.json").write_text(json.dumps(config, indent=2))
        return project.resolve()

    def environment(self) -> dict[str, str]:
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OPENCODE", "XDG_")) and key not in ("HOME", "NODE_OPTIONS")
        }
        return (
            environment
            | OFFLINE_ENVIRONMENT
            | {
                "HOME": str(self.home),
                "XDG_CONFIG_HOME": str(self.root / "config"),
                "XDG_DATA_HOME": str(self.root / "data"),
                "XDG_CACHE_HOME": str(self.root / "cache"),
                "XDG_STATE_HOME": str(self.root / "state"),
            }
        )

    @staticmethod
    def command(*args: str) -> list[str]:
        assert OPENCODE_BIN.exists(), "run `npm ci` (make test does): it installs opencode-ai"
        return [str(OPENCODE_BIN), *args]


class OpenCodeServer:
    """``opencode serve`` for ``home`` on one free loopback port, across restarts.

    Logs go to ``home.root/serve-<n>.log``; ``log()`` returns the current one (for failures).
    """

    def __init__(self, home: OpenCodeHome, start_timeout: float = 60.0) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._start_timeout = start_timeout
        self._process: asyncio.subprocess.Process | None = None
        self._starts = 0
        self._log_path: Path | None = None

    def log(self) -> str:
        return self._log_path.read_text(errors="replace") if self._log_path else ""

    async def start(self) -> OpenCodeServer:
        self._starts += 1
        self._log_path = self.home.root / f"serve-{self._starts}.log"
        with self._log_path.open("wb") as log_file:
            self._process = await asyncio.create_subprocess_exec(
                *self.home.command(
                    "serve",
                    *(() if self.home.plugins else ("--pure",)),
                    "--print-logs",
                    "--hostname",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                ),
                cwd=self.home.project,
                env=self.home.environment(),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            await asyncio.wait_for(self._until_healthy(), self._start_timeout)
        except BaseException:
            await self.stop()
            raise
        return self

    async def _until_healthy(self) -> None:
        # A connection opened before "server listening on" may never be answered: wait for the line first.
        while "server listening on" not in self.log():
            assert self._process is not None, self.log()
            assert self._process.returncode is None, self.log()
            await asyncio.sleep(0.1)
        async with httpx.AsyncClient(base_url=self.url, timeout=5.0) as http:
            while True:
                with contextlib.suppress(httpx.TransportError):
                    if (await http.get("/global/health")).status_code == 200:
                        return
                await asyncio.sleep(0.1)

    async def stop(self, grace: float = 5.0) -> None:
        """SIGTERM, then SIGKILL: a busy OpenCode can ignore SIGTERM."""
        process, self._process = self._process, None
        if process is None or process.returncode is not None:
            return
        for signum in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
            try:
                await asyncio.wait_for(process.wait(), grace)
                return
            except TimeoutError:
                continue

    async def write_todos(
        self, session_id: str, todos: Sequence[Mapping[str, str]], directory: Path | None = None
    ) -> None:
        """Prompt the session so that the model calls ``todowrite`` with ``todos``; wait until it is idle.

        Done means the session's list is ``todos`` and ``/session/status`` no longer lists it
        as busy (the model's closing turn is over, so the next prompt starts afresh).
        """
        params = {"directory": str(directory or self.home.project)}
        body = {"parts": [{"type": "text", "text": todo_prompt(todos)}]}
        async with httpx.AsyncClient(base_url=self.url, timeout=30.0, params=params) as http:
            response = await http.post(f"/session/{session_id}/prompt_async", json=body)
            assert response.status_code == 204, (response.status_code, response.text)

            async def done() -> bool:
                try:  # a freshly restarted OpenCode on a loaded machine can drop a connection: ask again
                    written = (await http.get(f"/session/{session_id}/todo")).json() == list(todos)
                    return written and session_id not in (await http.get("/session/status")).json()
                except httpx.TransportError:
                    return False

            await eventually(done, timeout=60.0, interval=0.1)

    async def restart(self) -> None:
        await self.stop()
        await self.start()

    async def __aenter__(self) -> OpenCodeServer:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


async def contents_in_sessiontodo(client: TodoClient, session_id: str) -> list[dict[str, str]] | None:
    """The session's list as OpenCode todos (status/priority as given), or None if it does not exist."""
    try:
        todos = (await client.get_todos(session_id)).todos
    except NotFound:
        return None
    return [todo.model_dump(exclude={"id"}) for todo in todos_from_service(todos)]

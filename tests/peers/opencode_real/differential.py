"""Run tests/peers/node/opencode-differential.mjs against a server and compare two reports field by field."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from tests.support import NODE_SUITES, ROOT

SCRIPT = NODE_SUITES / "opencode-differential.mjs"

GiveTodos = Callable[[str, list[dict[str, str]]], Awaitable[None]]
"""How the harness makes a session's list be the given todos on the server under test."""


async def sdk_report(url: str, directory: str, give_todos: GiveTodos, timeout: float = 180.0) -> dict[str, Any]:
    """What the SDK script saw of the server at ``url``; it asks ``give_todos`` for each list it needs."""
    node = shutil.which("node")
    assert node, "node must be on PATH"
    process = await asyncio.create_subprocess_exec(
        node,
        str(SCRIPT),
        cwd=ROOT,
        env={**os.environ, "OPENCODE_URL": url, "OPENCODE_DIRECTORY": directory},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdin
    assert process.stdout
    assert process.stderr
    try:
        async with asyncio.timeout(timeout):
            async for line in process.stdout:
                message = json.loads(line)
                if "report" in message:
                    report: dict[str, Any] = message["report"]
                    return report
                await give_todos(message["sessionID"], message["todos"])
                process.stdin.write(b"ok\n")
                await process.stdin.drain()
            raise AssertionError(f"the SDK script ended without a report: {(await process.stderr.read()).decode()}")
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def differences(upstream: Any, sidecar: Any) -> dict[str, str]:
    """Every place where the two reports differ: ``{path: "upstream != sidecar"}``; list indexes read ``[*]``."""
    return dict(_differences(upstream, sidecar, ""))


def _differences(upstream: Any, sidecar: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(upstream, dict) and isinstance(sidecar, dict):
        for key in sorted(upstream.keys() | sidecar.keys()):
            where = f"{path}.{key}" if path else key
            if key not in sidecar:
                yield where, "only upstream has it"
            elif key not in upstream:
                yield where, "only the sidecar has it"
            else:
                yield from _differences(upstream[key], sidecar[key], where)
    elif isinstance(upstream, list) and isinstance(sidecar, list) and len(upstream) == len(sidecar):
        for left, right in zip(upstream, sidecar, strict=True):
            yield from _differences(left, right, f"{path}[*]")
    elif upstream != sidecar:
        yield path, f"{json.dumps(upstream)} != {json.dumps(sidecar)}"

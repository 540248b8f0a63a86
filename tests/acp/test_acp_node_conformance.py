"""Conformance with a real editor-side client: tests/node/acp_proxy.test.mjs on the TypeScript ACP SDK.

The Node suite spawns ``sessiontodo-acp-proxy -- plan_agent.py`` as its agent, talks to it
with ``@agentclientprotocol/sdk`` (2.x) and checks sessiontodo with ``@grpc/grpc-js``,
against the real server this test starts.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from pathlib import Path

from sessiontodo_server.app import RunningServer

ROOT = Path(__file__).resolve().parents[2]
NODE_SUITE = ROOT / "tests" / "node" / "acp_proxy.test.mjs"
PLAN_AGENT = Path(__file__).with_name("plan_agent.py")
NODE_TIMEOUT = 240.0


async def test_the_typescript_sdk_editor_passes_the_acp_proxy_conformance_suite(server: RunningServer) -> None:
    node = shutil.which("node")
    assert node, "node must be on PATH"
    assert (ROOT / "node_modules" / "@agentclientprotocol" / "sdk").is_dir(), "run `npm ci` (make test does)"
    proxy = [sys.executable, "-m", "sessiontodo_acp", "--", sys.executable, str(PLAN_AGENT)]
    env = {**os.environ, "SESSIONTODO_ADDRESS": server.address, "ACP_PROXY_COMMAND": json.dumps(proxy)}
    process = await asyncio.create_subprocess_exec(
        node,
        "--test",
        "--test-reporter=tap",
        str(NODE_SUITE),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        raw, _ = await asyncio.wait_for(process.communicate(), NODE_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    output = raw.decode()

    assert process.returncode == 0, output
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) == 5, output

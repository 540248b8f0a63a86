"""Conformance with a real editor-side client: tests/peers/node/acp_proxy.test.mjs on the TypeScript ACP SDK.

The Node suite spawns ``sessiontodo-acp-proxy -- plan_agent.py`` as its agent, talks to it
with ``@agentclientprotocol/sdk`` (2.x) and checks sessiontodo with ``@grpc/grpc-js``,
against the real server this test starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.support import NODE_SUITES, run_node_suite

pytestmark = pytest.mark.process

NODE_SUITE = NODE_SUITES / "acp_proxy.test.mjs"
PLAN_AGENT = Path(__file__).with_name("plan_agent.py")


async def test_the_typescript_sdk_editor_passes_the_acp_proxy_conformance_suite(server: RunningServer) -> None:
    proxy = [sys.executable, "-m", "sessiontodo_acp", "--", sys.executable, str(PLAN_AGENT)]
    run = await run_node_suite(
        NODE_SUITE, {"SESSIONTODO_ADDRESS": server.address, "ACP_PROXY_COMMAND": json.dumps(proxy)}
    )

    run.assert_all_passed(at_least=5)

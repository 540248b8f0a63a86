"""ACP's next plan protocol with real editors: tests/peers/node/acp_plan_operations.test.mjs on the TypeScript SDK.

The Node suite spawns ``sessiontodo-acp-proxy -- plan_agent.py`` (the Python SDK test agent, which
sends ``plan`` and ``plan_update`` forms on command) and talks to it as an editor that advertises
the plan capability (the SDK's unstable entry point) and as one that does not (its stable one).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.support import NODE_SUITES, run_node_suite

pytestmark = [pytest.mark.slow, pytest.mark.process]

NODE_SUITE = NODE_SUITES / "acp_plan_operations.test.mjs"
NODE_SUITE_V2 = NODE_SUITES / "acp_plan_operations_v2.test.mjs"
PLAN_AGENT = Path(__file__).with_name("plan_agent.py")


async def test_typescript_sdk_editors_with_and_without_the_plan_capability(server: RunningServer) -> None:
    proxy = [sys.executable, "-m", "sessiontodo_acp", "--", sys.executable, str(PLAN_AGENT)]
    run = await run_node_suite(
        NODE_SUITE, {"SESSIONTODO_ADDRESS": server.address, "ACP_PROXY_COMMAND": json.dumps(proxy)}
    )

    run.assert_all_passed(at_least=6)


async def test_the_typescript_sdks_v2_draft_as_editor_and_agent(server: RunningServer) -> None:
    agent = ["node", str(NODE_SUITES / "acp-v2-agent.mjs")]
    proxy = [sys.executable, "-m", "sessiontodo_acp", "--", *agent]
    run = await run_node_suite(
        NODE_SUITE_V2, {"SESSIONTODO_ADDRESS": server.address, "ACP_PROXY_COMMAND": json.dumps(proxy)}
    )

    run.assert_all_passed(at_least=3)

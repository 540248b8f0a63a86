"""The proxy in front of real ACP agents besides OpenCode, with the TypeScript SDK as the editor.

Qwen Code 0.24.4 and claude-agent-acp 0.23.1 (``opencode_real.real_agents``) run offline on the stub model;
the suite itself is ``tests/peers/node/acp_agents.test.mjs``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.peers.opencode_real.real_agents import REAL_AGENTS
from tests.peers.opencode_real.stub_model import StubModel
from tests.support import NODE_SUITES, run_node_suite

pytestmark = [pytest.mark.slow, pytest.mark.process]

NODE_SUITE = NODE_SUITES / "acp_agents.test.mjs"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", sorted(REAL_AGENTS))
async def test_the_proxy_mirrors_a_real_acp_agent(server: RunningServer, tmp_path: Path, name: str) -> None:
    with StubModel() as model:
        agent = REAL_AGENTS[name](tmp_path / name, model)
        run = await run_node_suite(
            NODE_SUITE,
            {
                "SESSIONTODO_ADDRESS": server.address,
                "ACP_PROXY_COMMAND": json.dumps([sys.executable, "-m", "sessiontodo_acp", "--", *agent.command]),
                "ACP_AGENT_ENV": json.dumps(agent.environment),
                "ACP_AGENT_CWD": str(agent.cwd),
                "ACP_WAIT_MS": "60000",
                "ACP_AGENT_EXIT_CODE": str(agent.exit_code),
                "SESSIONTODO_ACP_AGENT_EXIT_TIMEOUT": "1",
                "AGENT_NAME": agent.name,
                "AGENT_TODOS": json.dumps(agent.todos),
                "AGENT_STORED": json.dumps(agent.stored),
            },
            timeout=600,
        )
    run.assert_all_passed(at_least=3)

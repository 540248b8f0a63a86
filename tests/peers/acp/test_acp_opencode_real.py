"""The proxy in front of the real OpenCode (``opencode acp``), with the TypeScript SDK as the editor.

Two real versions, because they differ: 1.15.4 sends ACP ``plan`` updates; 1.18.33 sends none and
its list travels only in the ``todowrite`` tool call. OpenCode runs offline on the stub model
(``tests/peers/opencode_real``); the suite itself is ``tests/peers/node/acp_opencode.test.mjs``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.peers.opencode_real.opencode_peer import OPENCODE_BIN, OpenCodeHome
from tests.peers.opencode_real.stub_model import StubModel
from tests.support import NODE_SUITES, ROOT, run_node_suite

pytestmark = [pytest.mark.slow, pytest.mark.process]

NODE_SUITE = NODE_SUITES / "acp_opencode.test.mjs"
OPENCODE_BINARIES = {
    "1.15.4": ROOT / "node_modules" / "opencode-ai-1154" / "bin" / "opencode.exe",
    "1.18.33": OPENCODE_BIN,
}
"""The two versions package.json pins (1.15.4 under the npm alias ``opencode-ai-1154``)."""


@pytest.mark.timeout(600)
@pytest.mark.parametrize("version", sorted(OPENCODE_BINARIES))
async def test_the_proxy_mirrors_the_real_opencode_acp_agent(
    server: RunningServer, tmp_path: Path, version: str
) -> None:
    binary = OPENCODE_BINARIES[version]
    assert binary.exists(), "run `npm ci` (make test does): package.json pins both OpenCode versions"
    with StubModel() as model:
        home = OpenCodeHome(tmp_path / "opencode", model.base_url)
        proxy = [sys.executable, "-m", "sessiontodo_acp", "--", str(binary), "acp"]
        run = await run_node_suite(
            NODE_SUITE,
            {
                "SESSIONTODO_ADDRESS": server.address,
                "ACP_PROXY_COMMAND": json.dumps(proxy),
                "ACP_AGENT_ENV": json.dumps(home.environment()),
                "ACP_AGENT_CWD": str(home.project),
                "ACP_WAIT_MS": "60000",
                "OPENCODE_VERSION": version,
            },
            timeout=600,
        )
    run.assert_all_passed(at_least=7)

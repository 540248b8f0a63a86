"""Conformance with OpenCode's real client: the Node suites in tests/peers/node/opencode*.test.mjs.

Each suite drives the sidecar (in front of a real sessiontodo server) with
``@opencode-ai/sdk`` — the default client, whose SSE parser only accepts LF framing, and
the ``/v2`` client — exactly as OpenCode's TUI and integrators call it.
"""

from __future__ import annotations

import pytest

from sessiontodo_opencode import RunningSidecar
from tests.support import NODE_SUITES, run_node_suite

pytestmark = pytest.mark.process


@pytest.mark.parametrize("suite", ["opencode.test.mjs", "opencode-v2.test.mjs"], ids=["default-client", "v2-client"])
async def test_the_opencode_sdk_passes_the_conformance_suite_against_the_sidecar(
    sidecar: RunningSidecar, suite: str
) -> None:
    run = await run_node_suite(NODE_SUITES / suite, {"OPENCODE_URL": sidecar.url})

    run.assert_all_passed()

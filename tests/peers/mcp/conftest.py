"""Fixtures of the MCP gateway's tests: the gateway's log file and an HTTP gateway for the test's server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.peers.mcp.mcp_support import HttpGateway


@pytest.fixture
def gateway_log(tmp_path: Path) -> Path:
    """Where the gateways of a test write their stderr (printed when the test fails)."""
    return tmp_path / "sessiontodo-mcp.log"


@pytest.fixture
async def http_gateway(server: RunningServer, gateway_log: Path) -> AsyncIterator[HttpGateway]:
    gateway = HttpGateway(server.address, log=gateway_log)
    await gateway.start()
    yield gateway
    gateway.stop()

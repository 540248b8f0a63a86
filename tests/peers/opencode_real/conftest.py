"""Fixtures that run the real OpenCode offline: the stub model, a private home, ``opencode serve``."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from tests.peers.opencode_real.opencode_peer import OpenCodeHome, OpenCodeServer
from tests.peers.opencode_real.stub_model import StubModel


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    with StubModel() as model:
        yield model


@pytest.fixture
def opencode_home(tmp_path: Path, stub_model: StubModel) -> OpenCodeHome:
    return OpenCodeHome(tmp_path / "opencode", stub_model.base_url)


@pytest.fixture
async def opencode(opencode_home: OpenCodeHome) -> AsyncIterator[OpenCodeServer]:
    """``opencode serve`` on a free port, stopped (SIGKILL if need be) after the test."""
    async with OpenCodeServer(opencode_home) as server:
        yield server

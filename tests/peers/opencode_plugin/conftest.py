"""Fixtures: the OpenCode plugin installed as a user installs it, the stub model, a home for OpenCode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.peers.npm_packages import CLIENT, OPENCODE_PLUGIN, fresh_project, pack
from tests.peers.opencode_real.stub_model import StubModel


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin's folder after ``npm install`` of the packed client and plugin into a fresh project."""
    packed = tmp_path_factory.mktemp("packed")
    project = fresh_project(
        tmp_path_factory.mktemp("plugins") / "plugins", pack(CLIENT, packed), pack(OPENCODE_PLUGIN, packed)
    )
    return project / "node_modules" / "@sessiontodo" / "opencode-plugin"


@pytest.fixture
def stub_model() -> Iterator[StubModel]:
    with StubModel() as model:
        yield model

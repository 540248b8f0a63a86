"""Fixtures: the OpenCode plugin installed as a user installs it, and the real OpenCode's stub model."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.peers.npm_packages import CLIENT, OPENCODE_PLUGIN, fresh_project, pack
from tests.peers.opencode_real.conftest import stub_model as stub_model


@pytest.fixture(scope="module")
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The plugin's folder after ``npm install`` of the packed client and plugin into a fresh project."""
    packed = tmp_path_factory.mktemp("packed")
    project = fresh_project(
        tmp_path_factory.mktemp("plugins") / "plugins", pack(CLIENT, packed), pack(OPENCODE_PLUGIN, packed)
    )
    return project / "node_modules" / "@sessiontodo" / "opencode-plugin"

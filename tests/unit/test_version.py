"""One version source: pyproject.toml's, which the code reads from the installed metadata and the npm
packages (the TypeScript client and the OpenCode plugin on it) repeat."""

from __future__ import annotations

import json
import tomllib

import sessiontodo_client
from tests.support import ROOT

NPM_PACKAGES = ("typescript", "opencode-plugin")


def test_the_client_reports_the_version_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    assert sessiontodo_client.__version__ == declared


def test_the_npm_packages_carry_the_version_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    client, plugin = (json.loads((ROOT / "clients" / name / "package.json").read_text()) for name in NPM_PACKAGES)

    assert (client["version"], plugin["version"]) == (declared, declared)
    assert plugin["dependencies"]["@sessiontodo/client"] == declared

"""One version source: pyproject.toml's, which the code reads from the installed metadata."""

from __future__ import annotations

import tomllib

import sessiontodo_client
from tests.support import ROOT


def test_the_client_reports_the_version_pyproject_declares() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]

    assert sessiontodo_client.__version__ == declared

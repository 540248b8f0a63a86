"""The unit tier stays fast: none of its tests may be slow, start a process or need a peer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markers import HEAVY_MARKERS

UNIT = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if UNIT in item.path.parents and (heavy := HEAVY_MARKERS & {mark.name for mark in item.iter_markers()}):
            raise pytest.UsageError(f"{item.nodeid} is marked {sorted(heavy)}: it belongs in another tier")

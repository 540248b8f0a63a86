"""The peer tier: every test under tests/peers/ drives a real external peer, so it is marked ``peer``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.markers import mark_folder


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).parent, pytest.mark.peer)

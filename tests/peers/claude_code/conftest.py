"""Fixtures for the real Claude Code CLI: the stub Anthropic API it talks to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.peers.claude_code.stub_anthropic import StubAnthropic


@pytest.fixture(scope="module")
def anthropic() -> Iterator[StubAnthropic]:
    """One stub for the module's tests: it keeps no state between conversations."""
    with StubAnthropic() as api:
        yield api

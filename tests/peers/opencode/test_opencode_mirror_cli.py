"""``sessiontodo-opencode-mirror``'s command line: a missing or unusable ``--opencode`` is one line and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.process


def mirror(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sessiontodo_opencode.mirror_main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [((), "--opencode"), (("--opencode", "127.0.0.1:4096"), "http://127.0.0.1:4096")],
    ids=["missing", "without-a-scheme"],
)
def test_an_unusable_opencode_flag_is_one_line_and_exit_2(args: tuple[str, ...], said: str) -> None:
    finished = mirror(*args)

    lines = finished.stderr.splitlines()
    assert (finished.returncode, len(lines)) == (2, 1), finished.stderr
    assert lines[0].startswith("sessiontodo-opencode-mirror: ")
    assert said in lines[0]

"""The proxy's standard streams when they are not pipes: ``/dev/null`` (a service run without input)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from tests.support import ROOT

pytestmark = pytest.mark.process


async def test_with_stdin_and_stdout_at_dev_null_the_proxy_ends_cleanly_with_its_agent() -> None:
    agent = [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read())"]
    process = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "sessiontodo_acp", "--", *agent),
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()

    assert (process.returncode, b"Traceback" in stderr) == (0, False), stderr.decode()

"""A second language: the Node suite in tests/node/grpc.test.mjs, run against a real server.

The Node client loads protos/sessiontodo/v1/todo_service.proto at run time with
@grpc/proto-loader and talks to the server with @grpc/grpc-js, as a TypeScript agent backend
would; it decodes rich errors with googleapis' own google/rpc/*.proto files.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

from google.rpc import status_pb2

from sessiontodo_server.app import RunningServer
from support import ROOT

NODE_SUITE = ROOT / "tests" / "node" / "grpc.test.mjs"
NODE_TIMEOUT = 120.0
# The folder holding google/rpc/status.proto and error_details.proto (googleapis-common-protos).
GOOGLEAPIS_PROTO_DIR = Path(status_pb2.__file__).resolve().parent.parent.parent


async def run_node_suite(suite: Path, env: dict[str, str]) -> tuple[int, str]:
    """``node --test suite``: its exit code and its combined output."""
    node = shutil.which("node")
    assert node, "node must be on PATH"
    assert (ROOT / "node_modules" / "@grpc" / "grpc-js").is_dir(), "run `npm ci` (make test does)"
    process = await asyncio.create_subprocess_exec(
        node,
        "--test",
        "--test-reporter=tap",
        str(suite),
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    try:
        output, _ = await asyncio.wait_for(process.communicate(), NODE_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, output.decode()


async def test_a_grpc_js_client_loading_the_proto_passes_the_node_suite(server: RunningServer) -> None:
    assert (GOOGLEAPIS_PROTO_DIR / "google" / "rpc" / "status.proto").is_file()

    exit_code, output = await run_node_suite(
        NODE_SUITE, {"SESSIONTODO_ADDRESS": server.address, "GOOGLEAPIS_PROTO_DIR": str(GOOGLEAPIS_PROTO_DIR)}
    )

    assert exit_code == 0, output
    passed = re.search(r"^# pass (\d+)$", output, re.MULTILINE)
    assert passed and int(passed.group(1)) > 0, output

"""A second language: the Node suite in tests/peers/node/grpc.test.mjs, run against a real server.

The Node client loads protos/sessiontodo/v1/todo_service.proto at run time with
@grpc/proto-loader and talks to the server with @grpc/grpc-js, as a TypeScript agent backend
would; it decodes rich errors with googleapis' own google/rpc/*.proto files.
"""

from __future__ import annotations

import pytest

from sessiontodo_server.app import RunningServer
from tests.support import GOOGLEAPIS_PROTO_DIR, NODE_SUITES, run_node_suite

pytestmark = pytest.mark.process

NODE_SUITE = NODE_SUITES / "grpc.test.mjs"


async def test_a_grpc_js_client_loading_the_proto_passes_the_node_suite(server: RunningServer) -> None:
    assert (GOOGLEAPIS_PROTO_DIR / "google" / "rpc" / "status.proto").is_file()

    run = await run_node_suite(
        NODE_SUITE, {"SESSIONTODO_ADDRESS": server.address, "GOOGLEAPIS_PROTO_DIR": str(GOOGLEAPIS_PROTO_DIR)}
    )

    run.assert_all_passed()

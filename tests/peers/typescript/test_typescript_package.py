"""@sessiontodo/client as a user installs it (``npm pack``, then ``npm install`` of the tarball into a
fresh project, offline), used from JavaScript against a real server and type-checked from
TypeScript through its ``.d.ts`` files.
"""

from __future__ import annotations

import asyncio
import json
import tarfile
from pathlib import Path

import pytest

from sessiontodo_server.app import RunningServer
from tests.peers.npm_packages import CLIENT, fresh_project, pack
from tests.system.test_packaging import run

pytestmark = [pytest.mark.slow, pytest.mark.process]

TSC = CLIENT / "node_modules" / ".bin" / "tsc"

USE = """
import { NotFound, TodoClient } from '@sessiontodo/client';

const client = TodoClient.connect(process.argv[2]);
const { session } = await client.createSession({ labels: { title: 'packed' } });
await client.replaceTodos(session.sessionId, [{ content: 'Install the tarball', status: 'completed' }]);
const events = client.watch(session.sessionId);
const { value: snapshot } = await events.next();
await events.return();
const missing = await client.getTodos('nobody').catch((error) => error);
client.close();
console.log(JSON.stringify({
  kind: snapshot.kind,
  todos: snapshot.todos.map(({ content, status }) => [content, status]),
  notFound: missing instanceof NotFound && missing.reason,
}));
"""

CHECK = """
import { TodoClient, type TodoStatus, type WatchEvent, type Write } from '@sessiontodo/client';
import { TodoService } from '@sessiontodo/client/proto';

const status: TodoStatus = 'in_progress';
// @ts-expect-error: a status the API does not have
const wrong: TodoStatus = 'done';
const revision: WatchEvent['revision'] = 1n;
// @ts-expect-error: a write kind the API does not have
const write: Write = { kind: 'add', sessionId: 'typed' };

/** Each result of a batch has its write's type. */
async function batch(client: TodoClient): Promise<string> {
  const [created, added] = await client.batchWrite([
    { kind: 'create_session', sessionId: 'typed' },
    { kind: 'add_todo', sessionId: 'typed', todo: { content: 'typed' } },
  ]);
  // @ts-expect-error: a created session's result has no todo
  created.todo;
  return added.todo.content;
}
export const used = [status, wrong, revision, write, batch, TodoService.typeName, TodoClient.connect];
"""


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return pack(CLIENT, tmp_path_factory.mktemp("packed"))


@pytest.fixture
def project(tarball: Path, tmp_path: Path) -> Path:
    return fresh_project(tmp_path / "app", tarball)


def test_the_tarball_holds_the_built_code_and_types_and_no_sources(tarball: Path) -> None:
    with tarfile.open(tarball) as archive:
        names = {name.removeprefix("package/") for name in archive.getnames()}

    assert {"package.json", "README.md", "dist/index.js", "dist/index.d.ts"} <= names
    assert {"dist/gen/sessiontodo/v1/todo_service_pb.js", "dist/gen/google/rpc/error_details_pb.js"} <= names
    assert not {name for name in names if name.startswith(("src/", "node_modules/"))}


async def test_the_installed_package_talks_to_a_real_server(project: Path, server: RunningServer) -> None:
    (project / "use.mjs").write_text(USE)

    # In a thread: the server runs on this test's event loop.
    printed = json.loads(await asyncio.to_thread(run, "node", "use.mjs", server.address, cwd=project))

    assert printed == {
        "kind": "snapshot",
        "todos": [["Install the tarball", "completed"]],
        "notFound": "SESSION_NOT_FOUND",
    }


def test_the_installed_package_type_checks_from_typescript(project: Path) -> None:
    (project / "check.ts").write_text(CHECK)
    types = CLIENT / "node_modules" / "@types"

    run(
        TSC,
        "--noEmit",
        "--strict",
        "--module",
        "nodenext",
        "--target",
        "es2022",
        "--skipLibCheck",
        "--typeRoots",
        types,
        "--types",
        "node",
        "check.ts",
        cwd=project,
    )

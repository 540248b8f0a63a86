"""One session, five ways in, six ways out: writers and observers over every protocol of sessiontodo.

Ways in: gRPC (``UpdateTodo``), MCP (the ``todo_update`` tool), the OpenCode sidecar (``GET`` then
``PUT /session/{id}/todo``), an ACP agent behind the proxy (a plan, through a real SDK editor) and
the web board (``PATCH`` with the revision a read returned, again on 409). Ways out: ``WatchTodos``,
``WatchChanges``, the sidecar's ``/event``, the board's SSE, an MCP resource subscription (each
update read back) and the ACP editor's plans.

The session holds one todo per way in; write ``k`` of a way sets its todo's content to
``"<way> #<k>"``, so every list the session goes through is unique and names the writes in it.
A dedicated ``WatchTodos`` records the truth: the list at every revision. ``run_matrix`` gives,
per observer, every list it showed and when, and per write when it was acknowledged; ``score``
turns them into latencies (acknowledgement to that observer showing the write's exact list),
missing, out-of-order and wrong counts, and whether each way out ended on the last list.

Used by the system test (tests/system/test_ways_in_and_out.py: the rules, no timing) and by
``make bench`` (figure 17, bench/ways.py: the timings).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import secrets
import socket
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import acp
import httpx
from acp.schema import AgentPlanUpdate, TextContentBlock
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from pydantic import AnyUrl

from sessiontodo_client import ChangeKind, Todo, TodoClient
from tests.support import eventually

ROOT = Path(__file__).resolve().parents[2]
SESSION = "ses_ways"
WAYS_IN = ("grpc", "mcp", "sidecar", "acp", "web")
WAYS_OUT = ("WatchTodos", "WatchChanges", "sidecar /event", "board SSE", "MCP subscription", "ACP editor")
STREAMS = ("WatchTodos", "WatchChanges", "sidecar /event", "board SSE")
"""Ways out that deliver every list; the others may skip a list a newer one overtook."""
PLAN_AGENT = ROOT / "tests" / "peers" / "acp" / "plan_agent.py"
_LIST_KINDS = {ChangeKind.TODOS_REPLACED, ChangeKind.TODO_ADDED, ChangeKind.TODO_UPDATED, ChangeKind.TODO_REMOVED}
Command = Callable[[list[str]], list[str]]


def _initial() -> list[Todo]:
    return [Todo(id=f"t-{way}", content=f"{way} #0") for way in WAYS_IN]


@dataclass
class Matrix:
    """What one run recorded: the truth, every observer's lists, and every write's acknowledgement."""

    truth: dict[tuple[str, ...], int] = field(default_factory=dict)
    """Each list the session went through (its contents in order) -> its revision."""
    final: tuple[str, ...] = ()
    seen: dict[str, list[tuple[float, tuple[str, ...]]]] = field(default_factory=lambda: {out: [] for out in WAYS_OUT})
    acked: dict[str, float] = field(default_factory=dict)
    """``"<way> #<k>"`` -> when the write was acknowledged (``time.monotonic``)."""
    conflicts: int = 0
    """Board edits answered 409 (someone wrote after the read) and made again."""
    agent_plans: set[tuple[str, ...]] = field(default_factory=set)
    """The plans the agent sent: forwarded to the editor as is, so they are not lists of the session."""
    after_restart: str | None = None
    """The write made once sessiontodo was restarted (with ``run_matrix(restart=…)``)."""
    restarted_at: float = 0.0
    """When the restarted sessiontodo served again."""

    def see(self, out: str, contents: tuple[str, ...]) -> None:
        self.seen[out].append((time.monotonic(), contents))


@dataclass(frozen=True)
class Score:
    latencies: dict[tuple[str, str], list[float]]
    """(way in, way out) -> milliseconds from each write's acknowledgement to the exact list shown."""
    missing: dict[tuple[str, str], int]
    out_of_order: dict[str, int]
    wrong: dict[str, int]
    converged: dict[str, bool]
    """Whether each way out ended showing the session's last list."""
    writes: dict[str, int]
    undone: dict[str, int]
    """Per way in: its writes that also changed another way's todo (undid a write made before them). The
    sidecar's are full replaces (OpenCode's todowrite), which may; no other way in may."""
    after_restart: dict[str, float | None]
    """Milliseconds from a restarted sessiontodo serving again to each way out showing the first write made
    then (None: never shown, or no restart): the gateways' reconnection included."""


def score(matrix: Matrix) -> Score:
    """The figures of a run (the write after a restart apart from the others)."""
    acked = {marker: at for marker, at in matrix.acked.items() if marker != matrix.after_restart}
    first_with: dict[str, tuple[str, ...]] = {}
    for contents, _ in sorted(matrix.truth.items(), key=lambda item: item[1]):
        for marker in contents:
            first_with.setdefault(marker, contents)
    latencies: dict[tuple[str, str], list[float]] = {(i, o): [] for i in WAYS_IN for o in WAYS_OUT}
    missing = dict.fromkeys(latencies, 0)
    out_of_order, wrong, converged = dict.fromkeys(WAYS_OUT, 0), dict.fromkeys(WAYS_OUT, 0), {}
    for out in WAYS_OUT:
        shown = [(at, lst) for at, lst in matrix.seen[out] if lst not in matrix.agent_plans or lst in matrix.truth]
        first_seen: dict[tuple[str, ...], float] = {}
        newest = -1
        for at, contents in shown:
            first_seen.setdefault(contents, at)
            revision = matrix.truth.get(contents)
            if revision is None:
                wrong[out] += 1
            elif revision < newest:
                out_of_order[out] += 1
            newest = max(newest, revision if revision is not None else -1)
        converged[out] = bool(shown) and shown[-1][1] == matrix.final
        for marker, acknowledged in acked.items():
            way = marker.split(" #")[0]
            shown_at = first_seen.get(first_with.get(marker, ()))
            if shown_at is None:
                missing[(way, out)] += 1
            else:
                latencies[(way, out)].append((shown_at - acknowledged) * 1000)
    after_restart: dict[str, float | None] = dict.fromkeys(WAYS_OUT)
    if matrix.after_restart is not None:
        restarted = matrix.restarted_at
        for out in WAYS_OUT:
            seen_at = next((at for at, contents in matrix.seen[out] if matrix.after_restart in contents), None)
            after_restart[out] = None if seen_at is None else (seen_at - restarted) * 1000
    writes = {way: sum(marker.startswith(f"{way} #") for marker in acked) for way in WAYS_IN}
    return Score(latencies, missing, out_of_order, wrong, converged, writes, _undone(matrix), after_restart)


def _undone(matrix: Matrix) -> dict[str, int]:
    """Count, per way in, the writes after which another way's todo went back to an older write's content."""
    undone = dict.fromkeys(WAYS_IN, 0)

    def numbers(contents: tuple[str, ...]) -> dict[str, int]:
        return {way: int(number) for way, _, number in (entry.partition(" #") for entry in contents)}

    lists = [numbers(contents) for contents, _ in sorted(matrix.truth.items(), key=lambda item: item[1])]
    for before, after in itertools.pairwise(lists):
        if any(after[way] < before[way] for way in WAYS_IN):
            for writer in (way for way in WAYS_IN if after[way] > before[way]):
                undone[writer] += 1
    return undone


class _Editor:
    """The ACP editor: records every plan it is shown."""

    def __init__(self, matrix: Matrix) -> None:
        self._matrix = matrix

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if isinstance(update, AgentPlanUpdate) and session_id == SESSION:
            self._matrix.see("ACP editor", tuple(entry.content for entry in update.entries))

    async def request_permission(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


@dataclass
class _Peers:
    client: TodoClient
    sidecar: httpx.AsyncClient
    board: httpx.AsyncClient
    mcp: ClientSession
    mcp_updates: _McpUpdates
    editor: Any


async def _serving(url: str, path: str, process: asyncio.subprocess.Process, name: str) -> None:
    deadline = time.monotonic() + 120
    async with httpx.AsyncClient(base_url=url) as http:
        while True:
            try:
                await http.get(path)
                return
            except httpx.TransportError:
                if time.monotonic() > deadline or process.returncode is not None:
                    raise RuntimeError(f"{name} did not start") from None
                await asyncio.sleep(0.1)


@asynccontextmanager
async def _process(argv: list[str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(*argv, cwd=ROOT, stdout=out, stderr=out)
    try:
        yield process
    finally:
        if process.returncode is None:
            process.terminate()
            await process.wait()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def _peers(address: str, scratch: Path, matrix: Matrix, command: Command) -> AsyncIterator[_Peers]:
    """Every gateway started for sessiontodo at ``address``, with a client of each."""
    python = sys.executable
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(TodoClient.connect(address))
        await client.create_session(SESSION)
        await client.replace_todos(SESSION, _initial())

        sidecar_port, board_port = _free_port(), _free_port()
        sidecar = await stack.enter_async_context(
            _process(
                command(
                    [
                        python,
                        "-m",
                        "sessiontodo_opencode",
                        "--sessiontodo-address",
                        address,
                        "--port",
                        str(sidecar_port),
                    ]
                ),
                scratch / "sidecar.log",
            )
        )
        token = secrets.token_urlsafe(24)
        (scratch / "board.token").write_text(token)
        board_flags = ["--port", str(board_port), "--viewer-token-file", str(scratch / "board.token")]
        board = await stack.enter_async_context(
            _process(
                command([python, "-m", "sessiontodo_web", "--sessiontodo-address", address, *board_flags]),
                scratch / "board.log",
            )
        )
        await _serving(f"http://127.0.0.1:{sidecar_port}", "/session", sidecar, "the sidecar")
        await _serving(f"http://127.0.0.1:{board_port}", "/login", board, "the board")
        sidecar_http = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{sidecar_port}", timeout=60)
        )
        board_http = await stack.enter_async_context(
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{board_port}", timeout=60)
        )
        await board_http.post("/login", data={"token": token})
        board_http.headers["x-csrf-token"] = (await board_http.get("/api/me")).json()["csrf_token"]

        mcp_log = stack.enter_context((scratch / "mcp.log").open("w"))
        mcp_argv = command([str(Path(python).with_name("sessiontodo-mcp")), "--sessiontodo-address", address])
        mcp_params = StdioServerParameters(command=mcp_argv[0], args=[*mcp_argv[1:], "--session-id", SESSION], cwd=ROOT)
        reading, writing = await stack.enter_async_context(stdio_client(mcp_params, errlog=mcp_log))
        mcp_updates = _McpUpdates()
        mcp = await stack.enter_async_context(ClientSession(reading, writing, message_handler=mcp_updates))
        await mcp.initialize()

        proxy_argv = command([python, "-m", "sessiontodo_acp", "--sessiontodo-address", address, "--", python])
        agent_log = stack.enter_context((scratch / "acp.log").open("wb"))
        proxy = await asyncio.create_subprocess_exec(
            *proxy_argv,
            str(PLAN_AGENT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=agent_log,
            cwd=ROOT,
            env=os.environ.copy(),
            limit=64 << 20,
        )
        stack.push_async_callback(_stop, proxy)
        assert proxy.stdin is not None
        assert proxy.stdout is not None
        editor = acp.connect_to_agent(cast(acp.Client, _Editor(matrix)), proxy.stdin, proxy.stdout)
        stack.push_async_callback(editor.close)
        await asyncio.wait_for(editor.initialize(protocol_version=acp.PROTOCOL_VERSION), 60)
        await asyncio.wait_for(editor.new_session(cwd=str(ROOT), mcp_servers=[], wantedSessionId=SESSION), 60)
        # The proxy reads the list its agent starts from once it has loaded gRPC (in the background): wait for it,
        # as the agent's first plan is read against that list.
        await eventually(lambda: f"session {SESSION}: watching" in (scratch / "acp.log").read_text(), timeout=60)
        yield _Peers(client, sidecar_http, board_http, mcp, mcp_updates, editor)


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.stdin is not None and not process.stdin.is_closing():
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), 15)
    except TimeoutError:
        process.kill()
        await process.wait()


class _McpUpdates:
    """The MCP client's message handler: queues each resource update, for the observer to read the list."""

    def __init__(self) -> None:
        self.reads: asyncio.Queue[None] = asyncio.Queue()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ResourceUpdatedNotification
        ):
            self.reads.put_nowait(None)


# Observers


async def _watch_todos(client: TodoClient, matrix: Matrix, out: str | None) -> None:
    async for event in client.watch(SESSION):
        contents = tuple(todo.content for todo in event.todos)
        if out is None:  # the truth
            if event.kind in _LIST_KINDS or event.kind is ChangeKind.SNAPSHOT:
                matrix.truth.setdefault(contents, event.revision)
                matrix.final = contents
        elif event.kind in _LIST_KINDS:
            matrix.see(out, contents)


async def _watch_changes(client: TodoClient, matrix: Matrix) -> None:
    async for event in client.watch_changes(session_ids=[SESSION]):
        if event.kind in _LIST_KINDS:
            matrix.see("WatchChanges", tuple(todo.content for todo in event.todos))


async def _sse(http: httpx.AsyncClient, path: str) -> AsyncIterator[tuple[str, Any]]:
    """(event name, data) of each frame of an SSE stream."""
    async with http.stream("GET", path, timeout=None) as response:
        buffer = b""
        async for chunk in response.aiter_raw():
            buffer += chunk
            while b"\n\n" in buffer:
                raw, buffer = buffer.split(b"\n\n", 1)
                fields = dict(
                    line.split(": ", 1)
                    for line in raw.decode().split("\n")
                    if ": " in line and not line.startswith(":")
                )
                if "data" in fields:
                    yield fields.get("event", ""), json.loads(fields["data"])


async def _sidecar_events(http: httpx.AsyncClient, matrix: Matrix) -> None:
    async for _, data in _sse(http, "/event"):
        properties = data.get("properties", {})
        if data.get("type") == "todo.updated" and properties.get("sessionID") == SESSION:
            matrix.see("sidecar /event", tuple(todo["content"] for todo in properties["todos"]))


async def _board_events(http: httpx.AsyncClient, matrix: Matrix) -> None:
    async for event, data in _sse(http, "/api/events"):
        if event == "change" and data["session"]["id"] == SESSION:
            matrix.see("board SSE", tuple(todo["content"] for todo in data["todos"]))


async def _mcp_subscription(mcp: ClientSession, updates: _McpUpdates, matrix: Matrix) -> None:
    uri = AnyUrl(f"sessiontodo://sessions/{SESSION}/todos")
    await mcp.subscribe_resource(uri)
    while True:
        await updates.reads.get()
        while not updates.reads.empty():  # one read answers every update that came before it
            updates.reads.get_nowait()
        read = await mcp.read_resource(uri)
        document = json.loads(cast(types.TextResourceContents, read.contents[0]).text)
        matrix.see("MCP subscription", tuple(todo["content"] for todo in document["todos"]))


# Writers


async def _write(peers: _Peers, matrix: Matrix, way: str, k: int) -> None:
    content = f"{way} #{k}"
    if way == "grpc":
        await peers.client.update_todo(SESSION, "t-grpc", content=content)
    elif way == "mcp":
        result = await peers.mcp.call_tool("todo_update", {"id": "t-mcp", "content": content})
        assert not result.isError, result
    elif way == "sidecar":
        todos = (await peers.sidecar.get(f"/session/{SESSION}/todo")).json()
        for todo in todos:
            if todo["id"] == "t-sidecar":
                todo["content"] = content
        answer = await peers.sidecar.put(f"/session/{SESSION}/todo", json=todos)
        assert answer.status_code == 200, answer.text
    elif way == "acp":
        plan = [(f"{w} #0" if w != "acp" else content) for w in WAYS_IN]
        matrix.agent_plans.add(tuple(plan))
        entries = [{"content": text, "status": "pending", "priority": "medium"} for text in plan]
        prompt = [TextContentBlock(type="text", text=json.dumps({"plans": [entries]}))]
        await asyncio.wait_for(peers.editor.prompt(session_id=SESSION, prompt=prompt), 60)
    else:
        revision = (await peers.board.get(f"/api/sessions/{SESSION}")).json()["session"]["revision"]
        while True:
            answer = await peers.board.patch(
                f"/api/sessions/{SESSION}/todos/t-web", json={"content": content, "expected_revision": revision}
            )
            if answer.status_code != 409:
                assert answer.status_code == 200, answer.text
                break
            matrix.conflicts += 1
            revision = answer.json()["current"]["session"]["revision"]
    matrix.acked[content] = time.monotonic()


async def _writes(peers: _Peers, matrix: Matrix, way: str, count: int, gap: float, start: int) -> None:
    for k in range(start, start + count):
        await _write(peers, matrix, way, k)
        await asyncio.sleep(gap)


async def _settled(matrix: Matrix, timeout: float) -> None:
    """Wait until every way out shows the session's last list (at most ``timeout`` seconds)."""

    def settled() -> bool:
        known = {marker for contents in matrix.truth for marker in contents}
        return matrix.acked.keys() <= known and all(
            matrix.seen[out] and matrix.seen[out][-1][1] == matrix.final for out in WAYS_OUT
        )

    with contextlib.suppress(AssertionError):  # a bound only: the caller scores what it has
        await eventually(settled, timeout=timeout, interval=0.05)


async def run_matrix(
    address: str,
    scratch: Path,
    *,
    writes: int,
    gap: float = 0.05,
    interleaved: bool,
    command: Command = lambda argv: argv,
    settle: float = 60.0,
    restart: Callable[[], Awaitable[None]] | None = None,
) -> Matrix:
    """``writes`` writes through each way in (one way after another, or all at once), every way out
    observing; returns once every way out shows the last list (or after ``settle`` seconds).

    With ``restart``: then sessiontodo is restarted (``restart()`` returns once it serves again) and
    one more gRPC write is made, which every way out must show too."""
    matrix = Matrix()
    async with _peers(address, scratch, matrix, command) as peers, asyncio.TaskGroup() as tasks:
        observers = [
            tasks.create_task(_watch_todos(peers.client, matrix, None)),
            tasks.create_task(_watch_todos(peers.client, matrix, "WatchTodos")),
            tasks.create_task(_watch_changes(peers.client, matrix)),
            tasks.create_task(_sidecar_events(peers.sidecar, matrix)),
            tasks.create_task(_board_events(peers.board, matrix)),
            tasks.create_task(_mcp_subscription(peers.mcp, peers.mcp_updates, matrix)),
        ]
        await asyncio.sleep(1.0)  # every stream open before the first write
        if interleaved:
            await asyncio.gather(*(_writes(peers, matrix, way, writes, gap, 1) for way in WAYS_IN))
        else:
            for way in WAYS_IN:
                await _writes(peers, matrix, way, writes, gap, 1)
        await _settled(matrix, settle)
        if restart is not None:
            await restart()
            matrix.restarted_at = time.monotonic()
            matrix.after_restart = f"grpc #{writes + 1}"
            await _write(peers, matrix, "grpc", writes + 1)
            await _settled(matrix, settle)
        for observer in observers:
            observer.cancel()
    return matrix

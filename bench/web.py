"""Figure 13: the web board in a real browser (bench/run.py calls ``measure_web``).

- Time to first render: from a page's navigation start to its ``board-rendered`` mark (the whole
  tree drawn) with ``sessions`` sessions of ``todos`` todos each, against the same with one session.
- p95 write-to-page latency: from the start of a gRPC write to the moment an open page has applied
  it (a MutationObserver on the session row's revision), with one page against a gRPC
  ``WatchChanges`` client's p95 for the same writes, and with ``pages`` pages against one.

sessiontodo and the board run in their own processes on the server CPU; this process, Debian's
chromium (driven by playwright-core through the web tests' browser remote) and every page share the
others, so the many-pages figure also counts the pages competing for one CPU.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import httpx

from processes import ROOT, ServerProcess, free_port, pinned
from report import Row, percentile
from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc

sys.path.append(str(ROOT))  # the browser remote of the web board's tests
from tests.peers.web.browser_remote import CHROMIUM, Browser, Page

SEED_CONCURRENCY = 50
APPLIED_TIMEOUT = 120.0
"""Seconds every page gets to apply every write before the figure fails."""
READY_MS = 600_000
"""Milliseconds a page gets to show the whole board: dozens of pages share one loaded CPU here."""
WRITE_GAP = 0.05
"""Seconds between writes: a paced stream of changes, not a burst."""
WATCH_APPLIED = """
window.boardApplied = [];
new MutationObserver((records) => {
  const now = performance.timeOrigin + performance.now();
  for (const record of records) {
    window.boardApplied.push([record.target.dataset.sessionId, Number(record.target.dataset.revision), now]);
  }
}).observe(document.getElementById('tree'), { attributes: true, attributeFilter: ['data-revision'], subtree: true });
"""
FIRST_RENDER = "return performance.getEntriesByName('board-rendered')[0]?.startTime ?? null"


def browser_available() -> bool:
    """Whether node, playwright-core (``npm ci``) and Debian's chromium are here."""
    return (
        bool(shutil.which("node")) and (ROOT / "node_modules" / "playwright-core").is_dir() and Path(CHROMIUM).exists()
    )


class WebBoardProcess:
    """``python -m sessiontodo_web`` for one sessiontodo server, pinned like the servers."""

    def __init__(self, sessiontodo: ServerProcess, cpus: set[int], log_dir: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_urlsafe(24)
        token_file = log_dir / f"web-{self.port}.token"
        token_file.write_text(self.token)
        flags = ["--port", str(self.port), "--viewer-token-file", str(token_file), "--log-level", "WARNING"]
        argv = [sys.executable, "-m", "sessiontodo_web", "--sessiontodo-address", sessiontodo.address, *flags]
        self._argv = pinned(cpus, argv)
        self._log = log_dir / f"web-{self.port}.log"
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        with self._log.open("wb") as log:
            self._process = await asyncio.create_subprocess_exec(*self._argv, cwd=ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + 120  # it first loads the feed's snapshot of every session
        async with httpx.AsyncClient(base_url=self.url) as http:
            while True:
                try:
                    if (await http.get("/login")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or self._process.returncode is not None:
                    raise RuntimeError(f"the board did not start:\n{self._log.read_text()}")
                await asyncio.sleep(0.1)

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            await self._process.wait()


async def _seed(stub: pb_grpc.TodoServiceStub, sessions: int, todos: int) -> list[str]:
    """``sessions`` sessions with ``todos`` todos each (ids ``t0``…), written concurrently; their ids."""
    ids = [f"ses_board{n:05d}" for n in range(sessions)]
    queue = iter(ids)

    async def worker() -> None:
        for session_id in queue:
            labels = {"title": f"Session {session_id[-5:]}", "directory": f"/src/project{int(session_id[-5:]) % 20}"}
            await stub.CreateSession(pb.CreateSessionRequest(session_id=session_id, labels=labels))
            listed = [pb.Todo(id=f"t{n}", content=f"Step {n} of the plan") for n in range(todos)]
            await stub.ReplaceTodos(pb.ReplaceTodosRequest(session_id=session_id, todos=listed))

    await asyncio.gather(*(worker() for _ in range(SEED_CONCURRENCY)))
    return ids


async def _open_pages(browser: Browser, web: WebBoardProcess, count: int) -> list[Page]:
    """``count`` pages showing the whole board, each in its own context, all signed in with one cookie."""
    first = await browser.new_page()
    await first.goto(f"{web.url}/login")
    await first.fill("#token", web.token)
    await first.click("#token-form button[type=submit]")
    await first.wait_for("body[data-board=ready]", timeout=READY_MS)
    cookies = await first.cookies()
    pages = [first]
    for _ in range(count - 1):
        page = await browser.new_page()
        await page.add_cookies(cookies)
        await page.goto(f"{web.url}/", waitUntil="commit", timeout=READY_MS)
        await page.wait_for("body[data-board=ready]", timeout=READY_MS)
        pages.append(page)
    return pages


async def _first_render_ms(browser: Browser, web: WebBoardProcess, renders: int) -> float:
    """Median milliseconds from navigation start to the whole tree drawn, over ``renders`` loads."""
    (page,) = await _open_pages(browser, web, 1)
    times = []
    for _ in range(renders):
        await page.goto("about:blank")
        await page.goto(f"{web.url}/")
        await page.wait_for("body[data-board=ready]", timeout=READY_MS)
        times.append(await page.evaluate(FIRST_RENDER))
    await page.close()
    return statistics.median(times)


async def _write_to_page_ms(
    browser: Browser, web: WebBoardProcess, stub: pb_grpc.TodoServiceStub, ids: list[str], pages: int, samples: int
) -> tuple[list[float], list[float]]:
    """Milliseconds from each write's start to each page applying it, and to a gRPC feed client receiving it."""
    opened = await _open_pages(browser, web, pages)
    for page in opened:
        await page.evaluate(WATCH_APPLIED)
    fed: dict[tuple[str, int], float] = {}
    touched = ids[: min(samples, len(ids))]
    feed = stub.WatchChanges(
        pb.WatchChangesRequest(include_snapshot=True, filter=pb.SessionFilter(session_ids=touched))
    )
    feed_open = asyncio.Event()

    async def follow() -> None:
        async for change in feed:
            if change.kind == pb.CHANGE_KIND_PROGRESS:
                feed_open.set()  # the snapshot's bookmark: every later write reaches this feed
            elif change.kind != pb.CHANGE_KIND_SNAPSHOT:
                fed[(change.session_id, change.revision)] = time.time() * 1000

    following = asyncio.get_running_loop().create_task(follow())
    started: dict[tuple[str, int], float] = {}
    try:
        await asyncio.wait_for(feed_open.wait(), APPLIED_TIMEOUT)
        for n in range(samples):
            session_id = touched[n % len(touched)]
            content = f"Step 0 of the plan, edit {time.time_ns()}"  # always a change, so always an event
            began = time.time() * 1000
            written = await stub.UpdateTodo(pb.UpdateTodoRequest(session_id=session_id, todo_id="t0", content=content))
            started[(session_id, written.revision)] = began
            await asyncio.sleep(WRITE_GAP)
        applied = [await _applied(page, set(started)) for page in opened]
    finally:
        following.cancel()
        feed.cancel()
        await asyncio.gather(following, return_exceptions=True)
        for page in opened:
            await page.close()
    to_pages = [seen[key] - began for seen in applied for key, began in started.items()]
    to_feed = [fed[key] - began for key, began in started.items() if key in fed]
    return to_pages, to_feed


async def _applied(page: Page, keys: set[tuple[str, int]]) -> dict[tuple[str, int], float]:
    """When the page applied each of ``keys`` (epoch milliseconds), once it has applied them all."""
    deadline = time.monotonic() + APPLIED_TIMEOUT
    while True:
        seen = {
            (session_id, revision): at for session_id, revision, at in await page.evaluate("return window.boardApplied")
        }
        if keys <= seen.keys():
            return seen
        if time.monotonic() > deadline:
            raise RuntimeError(f"a page applied {len(keys & seen.keys())} of {len(keys)} writes")
        await asyncio.sleep(0.2)


async def _measure_board(
    sessions: int, todos: int, renders: int, scratch: Path, cpus: set[int], browser: Browser
) -> tuple[ServerProcess, WebBoardProcess, list[str], float]:
    server = ServerProcess.sessiontodo(f"web-{sessions}", "memory://", cpus, scratch)
    await server.start()
    async with grpc.aio.insecure_channel(server.address) as channel:
        ids = await _seed(pb_grpc.TodoServiceStub(channel), sessions, todos)
    web = WebBoardProcess(server, cpus, scratch)
    await web.start()
    return server, web, ids, await _first_render_ms(browser, web, renders)


async def measure_web(
    sessions: int, todos: int, pages: int, samples: int, renders: int, cpus: set[int], scratch: Path
) -> dict[str, Any]:
    """First render with one and with ``sessions`` sessions; p95 write-to-page with 1 and ``pages`` pages."""
    browser = Browser.launch()
    try:
        server, web, _, one_ms = await _measure_board(1, todos, renders, scratch, cpus, browser)
        await web.stop()
        await server.stop()
        server, web, ids, many_ms = await _measure_board(sessions, todos, renders, scratch, cpus, browser)
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = pb_grpc.TodoServiceStub(channel)
                one_page, feed = await _write_to_page_ms(browser, web, stub, ids, 1, samples)
                many_pages, _ = await _write_to_page_ms(browser, web, stub, ids, pages, samples)
        finally:
            await web.stop()
            await server.stop()
    finally:
        browser.close()
    return {
        "sizes": {"sessions": sessions, "todos": todos, "pages": pages, "samples": samples},
        "first_render_ms": {"one_session": one_ms, "many_sessions": many_ms},
        "p95_ms": {
            "feed": percentile(feed, 0.95),
            "one_page": percentile(one_page, 0.95),
            "many_pages": percentile(many_pages, 0.95),
        },
    }


def web_rows(result: dict[str, Any]) -> list[Row]:
    sizes, render, p95 = result["sizes"], result["first_render_ms"], result["p95_ms"]
    board = f"{sizes['sessions']:,} sessions x {sizes['todos']} todos"
    return [
        Row(
            "13. web board",
            f"time to first render, {board}",
            render["many_sessions"],
            "ms",
            baseline=render["one_session"],
            baseline_name="with 1 session",
            target=("<=", 10.0),
        ),
        Row(
            "13. web board",
            f"write-to-page p95, 1 open page ({board})",
            p95["one_page"],
            "ms",
            baseline=p95["feed"],
            baseline_name="write-to-WatchChanges p95, same writes",
            target=("<=", 3.0),
        ),
        Row(
            "13. web board",
            f"write-to-page p95, {sizes['pages']} open pages ({board})",
            p95["many_pages"],
            "ms",
            baseline=p95["one_page"],
            baseline_name="with 1 open page",
            target=("<=", 3.0),
        ),
    ]

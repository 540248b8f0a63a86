"""Python's handle on a real browser: ``browser.mjs`` (playwright-core driving Debian's chromium), over JSON lines.

The tests and ``make bench`` use it the same way: start one with ``Browser.launch()``, open pages
(each in its own context: own cookies, own connections), drive them with Playwright's own method
names, close them and it. Only the browser process is started here; the servers are the caller's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

REMOTE = Path(__file__).resolve().parent / "browser.mjs"
ROOT = REMOTE.parents[3]
CHROMIUM = "/usr/bin/chromium"
ANSWER_TIMEOUT = 900.0
"""Seconds an operation may take: longer than any wait given to Playwright, which then reports what it waited for."""
WAIT_MS = 10_000
"""Milliseconds a page is given to show something (``Page.wait_for``)."""


class BrowserError(Exception):
    """An operation failed in the browser (a timeout, a missing element…): the message is Playwright's."""


class Browser:
    """One chromium and the pages opened in it.

    The remote is talked to with blocking pipes in a worker thread, so one browser can serve any
    number of event loops in turn (each test has its own loop; launching chromium costs seconds).
    """

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self._process = process
        self._ids = itertools.count()
        self._names = itertools.count()
        self._lock = threading.Lock()

    @classmethod
    def launch(cls) -> Browser:
        node = shutil.which("node")
        assert node, "node must be on PATH"
        assert (ROOT / "node_modules" / "playwright-core").is_dir(), "run `npm ci` (make test does)"
        process = subprocess.Popen(
            [node, str(REMOTE)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "CHROMIUM": CHROMIUM, "HOME": str(Path.home())},
        )
        return cls(process)

    async def request(self, op: str, **fields: Any) -> Any:
        """Run one operation and return its value; raises ``BrowserError`` with Playwright's message."""
        answer = await asyncio.wait_for(asyncio.to_thread(self._exchange, {"op": op, **fields}), ANSWER_TIMEOUT)
        if not answer["ok"]:
            raise BrowserError(answer["error"])
        return answer["value"]

    def _exchange(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        with self._lock:
            request_id = next(self._ids)
            self._process.stdin.write(json.dumps({"id": request_id, **request}).encode() + b"\n")
            self._process.stdin.flush()
            answer_line = self._process.stdout.readline()
        if not answer_line:
            raise BrowserError(f"the browser remote exited (code {self._process.wait()})")
        answer: dict[str, Any] = json.loads(answer_line)
        assert answer["id"] == request_id, answer
        return answer

    async def new_page(self, *, color_scheme: str = "light", width: int = 1280, height: int = 800) -> Page:
        name = f"page{next(self._names)}"
        await self.request("newPage", page=name, colorScheme=color_scheme, viewport={"width": width, "height": height})
        return Page(self, name)

    def close(self) -> None:
        if self._process.poll() is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                self._process.wait(15.0)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()


class Page:
    """One page of the browser, driven with Playwright's method names."""

    def __init__(self, browser: Browser, name: str) -> None:
        self._browser = browser
        self.name = name

    async def goto(self, url: str, **options: Any) -> int | None:
        """Load ``url`` (Playwright's ``goto`` options, e.g. ``waitUntil``); the HTTP status of the final answer."""
        result = await self.call("goto", url, options)
        return result["status"]

    async def url(self) -> str:
        return await self.call("url")

    async def call(self, method: str, *args: Any) -> Any:
        return await self._browser.request("call", page=self.name, method=method, args=list(args))

    async def locator(self, selector: str, method: str, *args: Any) -> Any:
        return await self._browser.request("locator", page=self.name, selector=selector, method=method, args=list(args))

    async def evaluate(self, expression: str, arg: Any = None) -> Any:
        """Run a function body in the page (``arg`` is its argument) and return what it returns."""
        return await self._browser.request("evaluate", page=self.name, expression=expression, arg=arg)

    async def wait_for(self, selector: str, state: str = "visible", timeout: int = WAIT_MS) -> None:
        """Wait until exactly one element matches ``selector`` in ``state`` (visible, hidden, attached, detached)."""
        await self.locator(selector, "waitFor", {"state": state, "timeout": timeout})

    async def text(self, selector: str) -> str:
        return await self.locator(selector, "textContent", {"timeout": WAIT_MS})

    async def count(self, selector: str) -> int:
        return await self.locator(selector, "count")

    async def click(self, selector: str) -> None:
        await self.locator(selector, "click", {"timeout": WAIT_MS})

    async def fill(self, selector: str, value: str) -> None:
        await self.locator(selector, "fill", value, {"timeout": WAIT_MS})

    async def press(self, key: str) -> None:
        """A key press where the focus is."""
        await self.call("keyboard.press", key)

    async def focused(self, attribute: str) -> str | None:
        """An attribute of the element that has the focus."""
        return await self.evaluate("return document.activeElement?.getAttribute(arg) ?? null", attribute)

    async def screenshot(self, path: Path) -> None:
        await self.call("screenshot", {"path": str(path), "animations": "disabled", "caret": "hide"})

    async def cookies(self) -> list[dict[str, Any]]:
        return await self._browser.request("cookies", page=self.name)

    async def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        await self._browser.request("addCookies", page=self.name, cookies=cookies)

    async def axe(self) -> list[dict[str, Any]]:
        """axe-core's accessibility violations (id, impact, help, targets) on the page as it is."""
        return await self._browser.request("axe", page=self.name)

    async def problems(self) -> list[str]:
        """Script errors, console errors and Content-Security-Policy refusals the page reported."""
        return await self._browser.request("problems", page=self.name)

    async def close(self) -> None:
        await self._browser.request("closePage", page=self.name)

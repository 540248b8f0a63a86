"""Python's handle on a real browser: ``browser.mjs`` (playwright-core driving Debian's chromium), over JSON lines.

The tests and ``make bench`` use it the same way: start one with ``Browser.launch()``, open pages
(each in its own context: own cookies, own connections), drive them with Playwright's own method
names, close it. Only the browser process is started here; the servers are the caller's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from pathlib import Path
from typing import Any

REMOTE = Path(__file__).resolve().parent / "browser.mjs"
ROOT = REMOTE.parents[3]
CHROMIUM = "/usr/bin/chromium"
ANSWER_TIMEOUT = 60.0
"""Seconds an operation may take (Playwright's own waits are given shorter timeouts)."""
WAIT_MS = 10_000
"""Milliseconds a page is given to show something (``Page.wait_for``)."""


class BrowserError(Exception):
    """An operation failed in the browser (a timeout, a missing element…): the message is Playwright's."""


class Browser:
    """One chromium and the pages opened in it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self._ids = itertools.count()
        self._names = itertools.count()
        self._lock = asyncio.Lock()

    @classmethod
    async def launch(cls) -> Browser:
        node = shutil.which("node")
        assert node, "node must be on PATH"
        assert (ROOT / "node_modules" / "playwright-core").is_dir(), "run `npm ci` (make test does)"
        process = await asyncio.create_subprocess_exec(
            node,
            str(REMOTE),
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", "CHROMIUM": CHROMIUM, "HOME": str(Path.home())},
            limit=64 * 1024 * 1024,  # screenshots and axe reports come back as single lines
        )
        return cls(process)

    async def request(self, op: str, **fields: Any) -> Any:
        """Run one operation and return its value; raises ``BrowserError`` with Playwright's message."""
        assert self._process.stdin is not None and self._process.stdout is not None
        async with self._lock:
            request_id = next(self._ids)
            self._process.stdin.write(json.dumps({"id": request_id, "op": op, **fields}).encode() + b"\n")
            await self._process.stdin.drain()
            line = await asyncio.wait_for(self._process.stdout.readline(), ANSWER_TIMEOUT)
        if not line:
            raise BrowserError(f"the browser remote exited (code {await self._process.wait()})")
        answer = json.loads(line)
        assert answer["id"] == request_id, answer
        if not answer["ok"]:
            raise BrowserError(answer["error"])
        return answer["value"]

    async def new_page(self, *, color_scheme: str = "light", width: int = 1280, height: int = 800) -> Page:
        name = f"page{next(self._names)}"
        await self.request("newPage", page=name, colorScheme=color_scheme, viewport={"width": width, "height": height})
        return Page(self, name)

    async def close(self) -> None:
        if self._process.returncode is None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            try:
                await asyncio.wait_for(self._process.wait(), 15.0)
            except TimeoutError:
                self._process.kill()
                await self._process.wait()


class Page:
    """One page of the browser, driven with Playwright's method names."""

    def __init__(self, browser: Browser, name: str) -> None:
        self._browser = browser
        self.name = name

    async def goto(self, url: str) -> int | None:
        """Load ``url``; the HTTP status of the final answer."""
        result = await self.call("goto", url)
        return result["status"]  # type: ignore[no-any-return]

    async def url(self) -> str:
        return await self.call("url")  # type: ignore[no-any-return]

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
        return await self.locator(selector, "textContent", {"timeout": WAIT_MS})  # type: ignore[no-any-return]

    async def count(self, selector: str) -> int:
        return await self.locator(selector, "count")  # type: ignore[no-any-return]

    async def click(self, selector: str) -> None:
        await self.locator(selector, "click", {"timeout": WAIT_MS})

    async def fill(self, selector: str, value: str) -> None:
        await self.locator(selector, "fill", value, {"timeout": WAIT_MS})

    async def press(self, key: str) -> None:
        """A key press where the focus is."""
        await self.call("keyboard.press", key)

    async def focused(self, attribute: str) -> str | None:
        """An attribute of the element that has the focus."""
        return await self.evaluate(  # type: ignore[no-any-return]
            "return document.activeElement?.getAttribute(arg) ?? null", attribute
        )

    async def screenshot(self, path: Path) -> None:
        await self.call("screenshot", {"path": str(path), "animations": "disabled", "caret": "hide"})

    async def cookies(self) -> list[dict[str, Any]]:
        return await self._browser.request("cookies", page=self.name)  # type: ignore[no-any-return]

    async def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        await self._browser.request("addCookies", page=self.name, cookies=cookies)

    async def axe(self) -> list[dict[str, Any]]:
        """axe-core's accessibility violations (id, impact, help, targets) on the page as it is."""
        return await self._browser.request("axe", page=self.name)  # type: ignore[no-any-return]

    async def problems(self) -> list[str]:
        """Script errors, console errors and Content-Security-Policy refusals the page reported."""
        return await self._browser.request("problems", page=self.name)  # type: ignore[no-any-return]

    async def close(self) -> None:
        await self._browser.request("closePage", page=self.name)

"""The board's static assets: handwritten modules served as they are (no build step, no CDN), small,
and never a way for data to become markup."""

from __future__ import annotations

import gzip
import re

import httpx

from sessiontodo_web.app import STATIC

SCRIPT_BUDGET = 100 * 1024
"""Bytes of gzip-compressed script the board may ship."""
SCRIPTS = sorted((STATIC / "assets").rglob("*.js"))
PAGES = sorted(STATIC.glob("*.html"))
MARKUP_SINKS = re.compile(
    r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|DOMParser|createContextualFragment|eval\("
)


def test_the_compressed_script_fits_the_budget() -> None:
    compressed = sum(len(gzip.compress(script.read_bytes(), 9)) for script in SCRIPTS)

    assert compressed <= SCRIPT_BUDGET


def test_no_script_writes_markup() -> None:
    assert [script.name for script in SCRIPTS if MARKUP_SINKS.search(script.read_text())] == []


def test_nothing_is_loaded_from_another_origin() -> None:
    references = [
        reference
        for asset in [*PAGES, *SCRIPTS, *STATIC.rglob("*.css")]
        for reference in re.findall(
            r"""(?:src|href)=["']([^"']+)|import[^'"]*['"]([^'"]+)['"]|url\(([^)]+)\)""", asset.read_text()
        )
    ]

    assert [ref for group in references for ref in group if ref and not ref.startswith(("/", "./"))] == []


async def test_every_script_the_page_imports_is_served_as_a_javascript_module(http: httpx.AsyncClient) -> None:
    answers = [await http.get(f"/assets/{script.relative_to(STATIC / 'assets')}") for script in SCRIPTS]

    assert {answer.headers["content-type"] for answer in answers} == {"text/javascript; charset=utf-8"}


async def test_the_sign_in_page_and_the_assets_need_no_sign_in(http: httpx.AsyncClient) -> None:
    anonymous = httpx.AsyncClient(base_url=str(http.base_url))
    async with anonymous:
        page = await anonymous.get("/login")
        script = await anonymous.get("/assets/js/main.js")

    assert (page.status_code, script.status_code) == (200, 200)

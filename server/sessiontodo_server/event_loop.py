"""Which asyncio event loop serves: uvloop where it is installed (the default), else asyncio's own.

``make bench`` measured uvloop against asyncio's loop on the same run (bench/RESULTS.md): less
server CPU per call for the echo floor and for sessiontodo, and no test behaves differently.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

log = logging.getLogger(__name__)

EventLoop = Literal["auto", "uvloop", "asyncio"]


def loop_factory(choice: EventLoop) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The factory for ``asyncio.Runner``; None is asyncio's default loop.

    ``auto`` takes uvloop when it can be imported (it is not built for Windows); ``uvloop``
    insists on it."""
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise SystemExit("--event-loop uvloop: uvloop is not installed (pip install uvloop)") from None
        log.info("uvloop is not installed: serving on asyncio's own event loop")
        return None
    return uvloop.new_event_loop

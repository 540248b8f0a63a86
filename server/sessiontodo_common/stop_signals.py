"""How every long-running program is told to stop: SIGTERM (a service manager, ``kill``) or SIGINT (Ctrl-C)."""

from __future__ import annotations

import asyncio
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_requested() -> asyncio.Event:
    """An event the first SIGTERM or SIGINT sets from now on (handled by the running loop, so a signal
    that comes while the program still starts up stops it as soon as it waits on the event)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    return stop

"""File descriptors: every connection holds one, so they bound the connections.

Without a limit, a flood of idle connections takes the last descriptor and every new client
is locked out with nothing logged. So the server raises its soft descriptor limit to the hard
one, accepts at most that many connections less a reserve (for the store, logs and the
listening socket), and logs a warning while the descriptors in use cross ``WARN_FRACTION``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import resource

log = logging.getLogger(__name__)

RESERVE = 64
"""Descriptors kept for everything that is not a client connection."""

WARN_FRACTION = 0.8
CHECK_INTERVAL = 5.0


def raise_soft_limit() -> int:
    """The soft RLIMIT_NOFILE, first raised as far as the hard limit allows."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft


def connection_limit(configured: int, descriptors: int) -> int:
    """``configured``, or (0) what the descriptors allow; warns when they cannot carry it."""
    allowed = max(1, descriptors - RESERVE)
    if configured == 0:
        return allowed
    if configured > allowed:
        log.warning(
            "max-connections %d exceeds what %d file descriptors can carry (%d); raise `ulimit -n`",
            configured,
            descriptors,
            allowed,
        )
    return configured


def in_use() -> int | None:
    """Open descriptors of this process, where the platform tells (Linux ``/proc``)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return None


async def watch(descriptors: int, connections: int, interval: float = CHECK_INTERVAL) -> None:
    """Log a warning each time the descriptors in use cross ``WARN_FRACTION`` of what the
    process can use (its limit, or the connection limit plus the reserve when that is lower)."""
    capacity = min(descriptors, connections + RESERVE)
    warned = False
    while (used := in_use()) is not None:
        if not warned and used >= capacity * WARN_FRACTION:
            log.warning(
                "%d file descriptors in use, near the capacity of %d: connections beyond %d are refused"
                " (raise `ulimit -n` or --max-connections, or add replicas)",
                used,
                capacity,
                connections,
            )
            warned = True
        elif warned and used < capacity * (WARN_FRACTION - 0.1):
            warned = False
        await asyncio.sleep(interval)

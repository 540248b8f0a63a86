"""The signals the proxy passes on to its agent: shared by the launcher and the proxy, which the
launcher imports only once the agent runs (so neither imports the other's module at load)."""

from __future__ import annotations

import signal

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

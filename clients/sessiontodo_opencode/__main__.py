"""``python -m sessiontodo_opencode``: serve OpenCode's todo routes until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from sessiontodo_client import TodoClient
from sessiontodo_opencode.settings import Settings
from sessiontodo_opencode.sidecar import start_sidecar

log = logging.getLogger("sessiontodo_opencode")


async def serve(settings: Settings) -> None:
    security = settings.channel_security()
    async with TodoClient.connect(settings.sessiontodo_address, security=security) as client:
        running = await start_sidecar(settings, client)
        log.info("serving OpenCode on %s for sessiontodo at %s", running.url, settings.sessiontodo_address)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        await running.stop()


def main() -> None:
    settings = Settings(_cli_parse_args=sys.argv[1:])  # type: ignore[call-arg]
    logging.basicConfig(
        stream=sys.stderr, level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        asyncio.run(serve(settings))
    except (OSError, ValueError) as error:  # the CA, certificate or token files
        sys.exit(f"sessiontodo-opencode: {error}")


if __name__ == "__main__":
    main()

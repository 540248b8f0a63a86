"""``python -m sessiontodo_server``: serve until SIGTERM or SIGINT, then shut down gracefully;
SIGHUP reloads the TLS certificate and the auth file."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from sessiontodo_server.app import ListenError, StartupError, start_server
from sessiontodo_server.domain.store import StoreStartupError
from sessiontodo_server.event_loop import loop_factory
from sessiontodo_server.observability.logs import configure_logging
from sessiontodo_server.settings import Settings


async def serve(settings: Settings) -> None:
    running = await start_server(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGHUP, running.reload)
    await stop.wait()
    await running.stop()


def main() -> None:
    settings = Settings(_cli_parse_args=sys.argv[1:])  # type: ignore[call-arg]
    configure_logging(settings.log_level, settings.log_format)
    try:
        with asyncio.Runner(loop_factory=loop_factory(settings.event_loop)) as runner:
            runner.run(serve(settings))
    except (StoreStartupError, StartupError) as error:
        logging.getLogger("sessiontodo_server").critical("%s", error)
        sys.exit(1)
    except ListenError as error:
        print(f"sessiontodo-server: {error}; set another with --port / SESSIONTODO_PORT", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

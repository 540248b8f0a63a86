"""``sessiontodo-web`` / ``python -m sessiontodo_web``: serve the live board until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys

from sessiontodo_client import TodoClient
from sessiontodo_common.command_line import fail, log_to_stderr, parse_settings, run_command
from sessiontodo_common.stop_signals import stop_requested
from sessiontodo_opencode.sidecar import ListenError, StartupError
from sessiontodo_web.settings import EXAMPLES, HELP_GROUPS, Settings
from sessiontodo_web.web import start_web

log = logging.getLogger("sessiontodo_web")

PROG = "sessiontodo-web"


async def serve(settings: Settings) -> None:
    security = settings.channel_security()
    async with TodoClient.connect(settings.sessiontodo_address, security=security) as client:
        running = await start_web(settings, client)
        log.info("serving the board on %s for sessiontodo at %s", running.url, settings.sessiontodo_address)
        if running.made_token:
            log.info(
                "sign in at %s (a token made for this run; set --viewer-token-file to keep one)", running.sign_in_url
            )
        else:
            log.info("sign in at %s with the viewer token", running.sign_in_url)
        stop = stop_requested()
        await stop.wait()
        await running.stop()


def _run(settings: Settings) -> None:
    try:
        asyncio.run(serve(settings))
    except StartupError as error:
        log.critical("%s", error)
        sys.exit(1)
    except ListenError as error:
        fail(PROG, f"{error}; set another with --port / SESSIONTODO_WEB_PORT")
    except (OSError, ValueError) as error:  # the CA, certificate, key or token files
        fail(PROG, str(error))


def main() -> None:
    settings = parse_settings(Settings, sys.argv[1:], prog=PROG, groups=HELP_GROUPS, examples=EXAMPLES)
    log_to_stderr(settings.log_level)
    run_command(PROG, lambda: _run(settings), log_level=settings.log_level)


if __name__ == "__main__":
    main()

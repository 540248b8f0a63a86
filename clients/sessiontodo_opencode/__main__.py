"""``python -m sessiontodo_opencode``: serve OpenCode's todo routes until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys

from sessiontodo_client import ServiceError, TodoClient
from sessiontodo_common.command_line import fail, log_to_stderr, parse_settings, run_command
from sessiontodo_common.stop_signals import stop_requested
from sessiontodo_opencode.settings import SIDECAR_EXAMPLES, SIDECAR_GROUPS, Settings
from sessiontodo_opencode.sidecar import ListenError, StartupError, start_sidecar

log = logging.getLogger("sessiontodo_opencode")

PROG = "sessiontodo-opencode"


async def check_sessiontodo(client: TodoClient, address: str) -> None:
    """Say at start-up when sessiontodo does not answer, rather than with 503s later. Asked over the
    sidecar's own channel, so with the TLS and token its calls use."""
    try:
        serving = await client.serving()
    except ServiceError as error:
        log.error(
            "sessiontodo at %s is unreachable (%s): requests fail with 503 until it answers"
            " (--sessiontodo-address / SESSIONTODO_OPENCODE_SESSIONTODO_ADDRESS)",
            address,
            error.code.name,
        )
        return
    if not serving:
        log.warning("sessiontodo at %s is not serving yet", address)


async def serve(settings: Settings) -> None:
    security = settings.channel_security()
    async with TodoClient.connect(settings.sessiontodo_address, security=security) as client:
        running = await start_sidecar(settings, client)
        log.info("serving OpenCode on %s for sessiontodo at %s", running.url, settings.sessiontodo_address)
        stop = stop_requested()
        await check_sessiontodo(client, settings.sessiontodo_address)  # a signal meanwhile stops right after it
        await stop.wait()
        await running.stop()


def _run(settings: Settings) -> None:
    try:
        asyncio.run(serve(settings))
    except StartupError as error:
        log.critical("%s", error)
        sys.exit(1)
    except ListenError as error:
        fail(
            PROG,
            f"{error}; stop what uses that port (another sidecar, or OpenCode itself), or pass another --port "
            "(SESSIONTODO_OPENCODE_PORT)",
        )
    except (OSError, ValueError) as error:  # the CA, certificate or token files
        fail(PROG, str(error))


def main() -> None:
    settings = parse_settings(Settings, sys.argv[1:], prog=PROG, groups=SIDECAR_GROUPS, examples=SIDECAR_EXAMPLES)
    log_to_stderr(settings.log_level)
    run_command(PROG, lambda: _run(settings), log_level=settings.log_level)


if __name__ == "__main__":
    main()

"""``sessiontodo-opencode-mirror --opencode URL``: mirror an OpenCode server until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys

import httpx

from sessiontodo_client import TodoClient
from sessiontodo_common.command_line import fail, log_to_stderr, parse_settings, run_command
from sessiontodo_common.stop_signals import stop_requested
from sessiontodo_opencode.mirror import OpenCodeImporter
from sessiontodo_opencode.settings import MIRROR_EXAMPLES, MIRROR_GROUPS, MirrorSettings

log = logging.getLogger("sessiontodo_opencode.mirror")

PROG = "sessiontodo-opencode-mirror"


async def serve(settings: MirrorSettings) -> None:
    password = settings.opencode_password
    auth = httpx.BasicAuth(settings.opencode_username, password.get_secret_value()) if password else None
    async with (
        TodoClient.connect(settings.sessiontodo_address, security=settings.channel_security()) as client,
        httpx.AsyncClient(base_url=settings.opencode, timeout=30.0, auth=auth) as http,
    ):
        log.info("mirroring OpenCode at %s into sessiontodo at %s", settings.opencode, settings.sessiontodo_address)
        mirroring = asyncio.create_task(OpenCodeImporter(client, http).run())
        stop = stop_requested()
        await stop.wait()
        mirroring.cancel()
        await asyncio.gather(mirroring, return_exceptions=True)


def _run(settings: MirrorSettings) -> None:
    try:
        asyncio.run(serve(settings))
    except (OSError, ValueError) as error:  # the CA, certificate or token files
        fail(PROG, str(error))


def main() -> None:
    settings = parse_settings(MirrorSettings, sys.argv[1:], prog=PROG, groups=MIRROR_GROUPS, examples=MIRROR_EXAMPLES)
    log_to_stderr(settings.log_level)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request otherwise
    run_command(PROG, lambda: _run(settings), log_level=settings.log_level)


if __name__ == "__main__":
    main()

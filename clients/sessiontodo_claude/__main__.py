"""``sessiontodo-claude --list LIST``: mirror a Claude Code task list and a session until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import sys

from sessiontodo_claude.bridge import ClaudeBridge
from sessiontodo_claude.folder import TaskFolder
from sessiontodo_claude.settings import EXAMPLES, GROUPS, Settings
from sessiontodo_client import TodoClient
from sessiontodo_common.command_line import fail, log_to_stderr, parse_settings, run_command
from sessiontodo_common.stop_signals import stop_requested

log = logging.getLogger("sessiontodo_claude")

PROG = "sessiontodo-claude"


async def serve(settings: Settings) -> None:
    async with TodoClient.connect(settings.sessiontodo_address, security=settings.channel_security()) as client:
        bridge = ClaudeBridge(
            client,
            TaskFolder(settings.folder),
            session_id=settings.session_id,
            list_id=settings.list,
            state_path=settings.state_path,
        )
        log.info(
            "mirroring %s and session %s at %s", settings.folder, settings.session_id, settings.sessiontodo_address
        )
        running = asyncio.create_task(bridge.run())
        stop = asyncio.create_task(stop_requested().wait())
        done, _ = await asyncio.wait([running, stop], return_when=asyncio.FIRST_COMPLETED)
        for task in (running, stop):
            task.cancel()
        await asyncio.gather(running, stop, return_exceptions=True)
        if running in done:
            try:
                running.result()  # the bridge only ends by failing: say why
            except ExceptionGroup as failed:  # its followers' task group: the first failure is the story
                raise failed.exceptions[0] from None


def _run(settings: Settings) -> None:
    try:
        asyncio.run(serve(settings))
    except (OSError, ValueError) as error:  # the CA, certificate or token files
        fail(PROG, str(error))


def main() -> None:
    settings = parse_settings(Settings, sys.argv[1:], prog=PROG, groups=GROUPS, examples=EXAMPLES)
    log_to_stderr(settings.log_level)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # a line per change otherwise
    run_command(PROG, lambda: _run(settings), log_level=settings.log_level)


if __name__ == "__main__":
    main()

"""``sessiontodo-mcp`` / ``python -m sessiontodo_mcp``: serve MCP over stdio (until stdin closes) or HTTP."""

from __future__ import annotations

import asyncio
import logging
import sys

from mcp.server.stdio import stdio_server

from sessiontodo_client import ChannelSecurity, TodoClient
from sessiontodo_common.command_line import fail, log_to_stderr, parse_settings
from sessiontodo_mcp.http import PATH, http_app, serve_http
from sessiontodo_mcp.server import build_server
from sessiontodo_mcp.settings import EXAMPLES, HELP_GROUPS, Settings, Transport

log = logging.getLogger("sessiontodo_mcp")

PROG = "sessiontodo-mcp"


async def serve(settings: Settings, security: ChannelSecurity, token: str | None) -> None:
    async with TodoClient.connect(settings.sessiontodo_address, security=security) as client:
        server = build_server(client, session_id=settings.session_id, idle_ttl=settings.idle_ttl or None)
        if settings.transport is Transport.STDIO:
            log.info("serving MCP on stdio for sessiontodo at %s", settings.sessiontodo_address)
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())
            return
        # uvicorn's own next line names the address, the port too when --port 0 picked one
        log.info("serving MCP over streamable HTTP at %s for sessiontodo at %s", PATH, settings.sessiontodo_address)
        app = http_app(
            server,
            token=token,
            allowed_hosts=settings.allowed_hosts,
            allowed_origins=settings.allowed_origins,
            max_sessions=settings.max_sessions,
        )
        await serve_http(app, settings.host, settings.port)


def main() -> None:
    settings = parse_settings(Settings, sys.argv[1:], prog=PROG, groups=HELP_GROUPS, examples=EXAMPLES)
    if refusal := settings.refusal():
        fail(PROG, refusal)
    log_to_stderr(settings.log_level)
    if logging.getLogger().level > logging.DEBUG:  # the SDK logs every request at INFO
        logging.getLogger("mcp").setLevel(logging.WARNING)
    try:  # the CA, certificate and token files, read once before serving
        security = settings.channel_security()
        token = settings.client_token()
        security.credentials(settings.sessiontodo_address)  # a token in plaintext to another host: refused now
    except (OSError, ValueError) as error:
        sys.exit(f"sessiontodo-mcp: {error}")
    asyncio.run(serve(settings, security, token))


if __name__ == "__main__":
    main()

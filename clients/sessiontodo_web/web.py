"""Composition: the board, the app and a uvicorn server, shared by ``__main__``, the tests and the bench."""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass

import uvicorn

from sessiontodo_client import TodoClient
from sessiontodo_opencode.guard import HttpGuard
from sessiontodo_opencode.sidecar import StartupError, probe_port, start_uvicorn
from sessiontodo_web.app import create_app
from sessiontodo_web.auth import Viewers
from sessiontodo_web.board import Board
from sessiontodo_web.edits import Editor
from sessiontodo_web.settings import Settings


@dataclass
class RunningWeb:
    server: uvicorn.Server
    serving: asyncio.Task[None]
    board: Board
    url: str
    made_token: str | None
    """The sign-in token the board made at start, when none was configured."""

    @property
    def sign_in_url(self) -> str:
        """Where a viewer signs in; with a made token, a link that signs in (the token stays in the fragment)."""
        return f"{self.url}/login" + (f"#token={self.made_token}" if self.made_token else "")

    async def stop(self) -> None:
        """End every page's stream and the feed, then let in-flight requests finish."""
        await self.board.aclose()
        self.server.should_exit = True
        await self.serving


async def start_web(settings: Settings, client: TodoClient) -> RunningWeb:
    """Serve the board of the sessiontodo service behind ``client`` (whose token picks the tenant)."""
    if refusal := settings.refusal():
        raise StartupError(refusal)
    probe_port(settings.host, settings.port)
    configured = settings.viewer_secret()
    token = configured or secrets.token_urlsafe(24)
    viewers = Viewers(
        token=token,
        username=settings.username,
        password=settings.password.get_secret_value() if settings.password else None,
        lifetime=settings.sign_in_lifetime,
        https=settings.https,
    )
    board = Board(
        client,
        resume_window=settings.resume_window,
        changes_per_session=settings.changes_per_session,
        subscriber_buffer=settings.subscriber_buffer,
        feed_timeout=settings.feed_timeout,
        ready_timeout=settings.ready_timeout,
    )
    await board.start()
    app = HttpGuard(
        create_app(
            board,
            Editor(client, board),
            viewers,
            heartbeat_interval=settings.heartbeat_interval,
            max_body_bytes=settings.max_body_bytes,
        ),
        allowed_hosts=settings.allowed_hosts,
    )
    try:
        server, serving, port = await start_uvicorn(
            app,
            host=settings.host,
            port=settings.port,
            shutdown_grace=settings.shutdown_grace,
            ssl_certfile=settings.https_cert,
            ssl_keyfile=settings.https_key,
        )
    except BaseException:
        await board.aclose()
        raise
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"{'https' if settings.https else 'http'}://{host}:{port}"
    return RunningWeb(server, serving, board, url, None if configured else token)

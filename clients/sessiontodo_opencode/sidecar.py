"""Composition: the bridge, the app and a uvicorn server, shared by ``__main__`` and the tests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from sessiontodo_client import TodoClient
from sessiontodo_opencode.app import create_app
from sessiontodo_opencode.bridge import TodoBridge
from sessiontodo_opencode.guard import HttpGuard
from sessiontodo_opencode.metrics import SidecarMetrics
from sessiontodo_opencode.settings import Settings

log = logging.getLogger("sessiontodo_opencode")


class ListenError(Exception):
    """The sidecar cannot listen on its address: taken, not an address of this host, or not permitted."""


class StartupError(Exception):
    """The settings must not start a sidecar (e.g. a public address without basic auth)."""


class _Server(uvicorn.Server):
    """A uvicorn server that leaves signals to its owner, who ends the event streams before stopping."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass
class RunningSidecar:
    server: uvicorn.Server
    serving: asyncio.Task[None]
    bridge: TodoBridge
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def stop(self) -> None:
        """End every event stream and watch, then let in-flight requests finish."""
        await self.bridge.aclose()
        self.server.should_exit = True
        await self.serving


async def start_sidecar(settings: Settings, client: TodoClient) -> RunningSidecar:
    """Serve OpenCode's todo routes for the sessiontodo service behind ``client``."""
    if refusal := settings.refusal():
        raise StartupError(refusal)
    host = settings.host.strip("[]")  # an IPv6 address, bracketed or not
    probe_port(host, settings.port)
    bridge = TodoBridge(
        client,
        directory=settings.directory,
        project=settings.project,
        subscriber_buffer=settings.subscriber_buffer,
        catch_up_window=settings.catch_up_window,
        ready_timeout=settings.ready_timeout,
    )
    metrics = SidecarMetrics() if settings.metrics else None
    app = HttpGuard(
        create_app(
            bridge,
            heartbeat_interval=settings.heartbeat_interval,
            max_body_bytes=settings.max_body_bytes,
            metrics=metrics,
        ),
        username=settings.server_username,
        password=settings.server_password.get_secret_value() if settings.server_password else None,
        allowed_hosts=settings.allowed_hosts,
        allowed_origins=settings.allowed_origins,
    )
    try:
        server, serving, port = await start_uvicorn(
            app, host=host, port=settings.port, shutdown_grace=settings.shutdown_grace
        )
    except BaseException:
        await bridge.aclose()
        raise
    # Said at once: with sessiontodo down, reading its sessions waits for the whole ready timeout.
    log.info(
        "listening on http://%s:%d; reading the sessions of sessiontodo at %s (waiting at most %gs; "
        "requests are answered 503 while it does not answer)",
        settings.host,
        port,
        settings.sessiontodo_address,
        settings.ready_timeout,
    )
    try:
        await bridge.start()
    except BaseException:
        server.should_exit = True
        await serving
        await bridge.aclose()
        raise
    return RunningSidecar(server, serving, bridge, settings.host, port)


def probe_port(host: str, port: int) -> None:
    """Raise ``ListenError`` if ``host:port`` cannot be listened on (port 0 always can).

    uvicorn reports a taken port only with a log line and SystemExit, so this asks first.
    """
    if not port:
        return
    try:
        with socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET):
            pass
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise ListenError(f"cannot listen on {host}:{port}: {reason}") from error


async def start_uvicorn(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    shutdown_grace: float,
    ssl_certfile: Path | None = None,
    ssl_keyfile: Path | None = None,
) -> tuple[uvicorn.Server, asyncio.Task[None], int]:
    """Serve ``app`` on ``host:port`` (HTTPS with a certificate) in a task of the running loop, once
    it listens: the server (set ``should_exit`` and await the task to stop it), the task and the port."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(shutdown_grace),
        ssl_certfile=ssl_certfile,
        ssl_keyfile=ssl_keyfile,
    )
    # uvicorn binds the port itself: handed a ready socket, its transports keep Nagle's
    # algorithm on and every request on a kept-alive connection waits ~40 ms for a delayed ACK.
    server = _Server(config)
    serving = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("the HTTP server stopped while starting")
        await asyncio.sleep(0.01)
    return server, serving, server.servers[0].sockets[0].getsockname()[1]

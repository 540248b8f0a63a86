"""Composition: the bridge, the app and a uvicorn server, shared by ``__main__`` and the tests."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import uvicorn

from sessiontodo_client import TodoClient
from sessiontodo_opencode.app import create_app
from sessiontodo_opencode.bridge import TodoBridge
from sessiontodo_opencode.guard import HttpGuard
from sessiontodo_opencode.metrics import SidecarMetrics
from sessiontodo_opencode.settings import Settings


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
    if settings.port:
        # Probe first: uvicorn reports a taken port only with a log line and SystemExit.
        try:
            with socket.create_server((host, settings.port), family=socket.AF_INET6 if ":" in host else socket.AF_INET):
                pass
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise ListenError(f"cannot listen on {settings.host}:{settings.port}: {reason}") from error
    bridge = TodoBridge(
        client,
        directory=settings.directory,
        project=settings.project,
        subscriber_buffer=settings.subscriber_buffer,
        catch_up_window=settings.catch_up_window,
        ready_timeout=settings.ready_timeout,
    )
    await bridge.start()
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
    config = uvicorn.Config(
        app,
        host=host,
        port=settings.port,
        lifespan="off",
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=math.ceil(settings.shutdown_grace),
    )
    # uvicorn binds the port itself: handed a ready socket, its transports keep Nagle's
    # algorithm on and every request on a kept-alive connection waits ~40 ms for a delayed ACK.
    server = _Server(config)
    serving = asyncio.get_running_loop().create_task(server.serve())
    while not server.started:
        if serving.done():
            await bridge.aclose()
            serving.result()
            raise RuntimeError("the sidecar stopped while starting")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return RunningSidecar(server, serving, bridge, settings.host, port)

"""Calls wait for a starting server: the channel must become ready within the call's deadline.

gRPC fails a call at once while its channel cannot connect ("fail fast"), so a client started a
moment before its server, or calling during a restart, spent its retries in a second and a half.
``ChannelReadiness.wait`` instead waits for the channel to be READY (what gRPC's
``wait_for_ready`` does) but within the call's own timeout, and tells once, on the log, that it is
waiting, so a restart inside the deadline costs no error and no silence. A channel that does not
become ready in time is ``NotReady``, an ``Unavailable``: nothing was sent, so a caller's own retry
loop may try again (where gRPC's ``wait_for_ready`` would have ended in an ambiguous
DEADLINE_EXCEEDED); the client's retry policy does not, since the wait already spent the call's time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from sessiontodo_client.errors import Unavailable

log = logging.getLogger("sessiontodo_client")

READY = grpc.ChannelConnectivity.READY


class NotReady(Unavailable):
    """The channel did not become ready within the call's timeout: the call was never sent."""


class ChannelReadiness:
    """Waits for one channel to be READY, and says once per outage that calls are waiting for it."""

    def __init__(self, channel: grpc.aio.Channel, target: str) -> None:
        self._channel = channel
        self._server = f"sessiontodo at {target}" if target else "sessiontodo"
        self._told = False

    async def wait(self, timeout: float) -> float:
        """Wait until the channel is READY, at most ``timeout`` seconds; returns what is left of them.
        Raises ``Unavailable`` when the channel is not ready in time (no call was sent)."""
        state = self._channel.get_state(try_to_connect=True)
        if state is READY:
            self._told = False
            return timeout
        loop = asyncio.get_running_loop()
        give_up_at = loop.time() + timeout
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout_at(give_up_at):
                while state is not READY:
                    if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE:
                        self._tell_waiting(timeout)
                    await self._channel.wait_for_state_change(state)
                    state = self._channel.get_state(try_to_connect=True)
                if self._told:
                    log.info("%s accepts connections again", self._server)
                self._told = False
                return max(give_up_at - loop.time(), 0.0)
        raise NotReady(grpc.StatusCode.UNAVAILABLE, f"{self._server} did not accept a connection within {timeout:g}s")

    def _tell_waiting(self, timeout: float) -> None:
        if not self._told:
            self._told = True
            log.warning("%s does not accept connections yet: calls wait up to %gs each for it", self._server, timeout)

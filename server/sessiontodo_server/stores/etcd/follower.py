"""This replica's one etcd watch: every event under the store's prefix, in revision order, once.

The watch starts after the last revision handed over, so after a lost connection, a member's
crash or a leader election it resumes on another member exactly where it stopped — etcd keeps
the history until it is compacted. It asks for etcd's progress notifications, and asks for
progress itself every ``PROGRESS_SECONDS``: a stream that answers nothing for
``SILENT_SECONDS`` (a frozen or cut-off member) is given up and opened on the next member — at
once when the store's calls to that member fail.

When the history it needs was compacted away, or etcd came back without it (a new cluster, a
restored backup), it cannot tell what changed: the store resynchronises (``resync``), which
resets every watcher and feed, and the watch goes on from the revision resynchronised to.

Availability is reported as health: a failed stream is reopened on the next member at once; if
that fails too, the replica reports etcd unavailable until a stream is open again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

import grpc

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.stores.etcd.client import EtcdClient
from sessiontodo_server.stores.etcd.events import by_revision
from sessiontodo_server.stores.etcd.keys import range_end

log = logging.getLogger(__name__)

PROGRESS_SECONDS = 1.0
SILENT_SECONDS = 3.0
_RECONNECT_DELAYS = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)

Deliver = Callable[[int, Sequence[kv_pb2.Event]], Awaitable[None]]
"""Takes the events of one revision."""


class HistoryLost(Exception):
    """The watch cannot resume where it stopped."""


class Follower:
    def __init__(
        self, client: EtcdClient, prefix: bytes, deliver: Deliver, resync: Callable[[], Awaitable[int]]
    ) -> None:
        self._client = client
        self._prefix = prefix
        self._deliver = deliver
        self._resync = resync
        self._availability: Callable[[bool], Awaitable[None]] | None = None
        self.revision = 0
        """Every event up to this revision has been delivered."""
        self._streaming = False
        """Whether the current stream was opened (then its failure is a first failure)."""
        self._down = False
        """Whether etcd was reported unavailable."""
        self._member = -1
        """The member the current stream reads from."""
        self._stream: grpc.aio.StreamStreamCall | None = None
        self._given_up = ""
        """Why this replica ended the current stream itself (it then reads as cancelled)."""
        self._heard = 0.0
        """When the current stream last said anything (loop time)."""
        client.on_failure(self._member_failed)

    def _member_failed(self, member: int) -> None:
        """Calls to ``member`` failed: a stream on it is given up without waiting for silence."""
        if member == self._member:
            self._give_up(f"calls to etcd member {member + 1} failed")

    def _give_up(self, why: str) -> None:
        if self._stream is not None and not self._stream.done():
            self._given_up = why
            self._stream.cancel()

    def on_availability(self, listener: Callable[[bool], Awaitable[None]]) -> None:
        self._availability = listener

    async def run(self) -> None:
        """The store's own task: follow etcd until cancelled."""
        failures = 0
        while True:
            self._streaming = False
            try:
                await self._follow()
            except HistoryLost as lost:
                log.warning("%s: every watcher re-reads", lost)
                self.revision = await self._resync_until_done()
                continue
            except (grpc.aio.AioRpcError, Unavailable, TimeoutError, ConnectionError) as error:
                detail = error.details() if isinstance(error, grpc.aio.AioRpcError) else repr(error)
                log.debug("the etcd watch failed: %s", detail)
            except Exception:  # a bug: never stop following
                log.exception("the etcd watch failed")
            failures = 1 if self._streaming else failures + 1
            if failures == 2 and not self._down:
                log.warning("lost the etcd cluster; reconnecting")
                self._down = True
                await self._announce(False)
            await asyncio.sleep(_RECONNECT_DELAYS[min(failures - 1, len(_RECONNECT_DELAYS) - 1)])

    async def _resync_until_done(self) -> int:
        delays = iter(_RECONNECT_DELAYS[1:])
        while True:
            try:
                return await self._resync()
            except (grpc.aio.AioRpcError, Unavailable) as error:
                log.debug("resynchronising with etcd failed: %r", error)
                await asyncio.sleep(next(delays, _RECONNECT_DELAYS[-1]))

    async def _follow(self) -> None:
        """One watch stream, until it fails."""
        member, stubs = self._client.member()
        loop = asyncio.get_running_loop()
        call = stubs.watch.Watch(metadata=self._client.metadata)
        self._member, self._stream, self._given_up, self._heard = member, call, "", loop.time()
        create = pb.WatchCreateRequest(key=self._prefix, range_end=range_end(self._prefix))
        create.start_revision, create.progress_notify = self.revision + 1, True
        watching_over = asyncio.create_task(self._watch_over(call, member), name="etcd-watch-liveness")
        try:
            try:
                await self._read(call, create)
            except asyncio.CancelledError:  # the stream given up (the call cancelled), or the store closing
                task = asyncio.current_task()
                if not self._given_up or (task is not None and task.cancelling()):
                    raise
                raise ConnectionError(self._given_up) from None
        except (grpc.aio.AioRpcError, TimeoutError, ConnectionError):
            self._client.failed(member)
            raise
        finally:
            self._stream = None
            watching_over.cancel()
            call.cancel()
            await asyncio.wait([watching_over])

    async def _read(self, call: grpc.aio.StreamStreamCall, create: pb.WatchCreateRequest) -> None:
        """Create the watch, then deliver what the stream carries until it fails."""
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self._client.location.timeout):  # grpc's write waits for ever on a call
            await call.write(pb.WatchRequest(create_request=create))  # that failed before it started
        while True:
            response = await call.read()
            self._heard = loop.time()
            if response is grpc.aio.EOF:
                raise ConnectionError("the etcd watch stream ended")
            if response.created:
                if response.header.revision < self.revision:
                    raise HistoryLost(f"etcd is at revision {response.header.revision}, behind {self.revision}")
                self._streaming = True
                if self._down:
                    log.info("following the etcd cluster again")
                    self._down = False
                    await self._announce(True)
            if response.compact_revision:
                raise HistoryLost(f"etcd compacted its history past revision {self.revision}")
            if response.canceled:
                raise ConnectionError(f"etcd ended the watch: {response.cancel_reason}")
            for revision, events in by_revision(response.events):
                await self._deliver(revision, events)
                self.revision = revision

    async def _watch_over(self, call: grpc.aio.StreamStreamCall, member: int) -> None:
        """Ask for progress when the stream is quiet; give it up when it stays silent."""
        loop = asyncio.get_running_loop()
        while not call.done():
            await asyncio.sleep(PROGRESS_SECONDS)
            silent = loop.time() - self._heard
            if silent >= SILENT_SECONDS:
                self._give_up(f"etcd member {member + 1} silent for {silent:.0f}s")
            elif silent >= PROGRESS_SECONDS and not call.done():
                with contextlib.suppress(asyncio.InvalidStateError, TimeoutError):  # ended meanwhile
                    async with asyncio.timeout(PROGRESS_SECONDS):
                        await call.write(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))

    async def _announce(self, available: bool) -> None:
        if self._availability is not None:
            await self._availability(available)

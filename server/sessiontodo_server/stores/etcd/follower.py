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
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
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
        self._abandoned: asyncio.Future[None] | None = None
        """Set when calls to that member fail: the stream is given up without waiting for silence."""
        client.on_failure(self._member_failed)

    def _member_failed(self, member: int) -> None:
        if member == self._member and self._abandoned is not None and not self._abandoned.done():
            self._abandoned.set_result(None)

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
        member, channel = self._client.member()
        self._member, self._abandoned = member, asyncio.get_running_loop().create_future()
        call = pb_grpc.WatchStub(channel).Watch(metadata=self._client.metadata)
        reading: asyncio.Future[pb.WatchResponse] | None = None
        try:
            create = pb.WatchCreateRequest(
                key=self._prefix,
                range_end=range_end(self._prefix),
                start_revision=self.revision + 1,
                progress_notify=True,
            )
            await call.write(pb.WatchRequest(create_request=create))
            silent = 0.0
            while True:
                if reading is None:
                    reading = asyncio.ensure_future(call.read())
                done, _ = await asyncio.wait(
                    [reading, self._abandoned], timeout=PROGRESS_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                if self._abandoned.done():
                    raise ConnectionError(f"calls to etcd member {member + 1} failed")
                if not done:
                    silent += PROGRESS_SECONDS
                    if silent >= SILENT_SECONDS:
                        raise TimeoutError(f"etcd member {member + 1} silent for {silent:.0f}s")
                    if call.done():  # ended meanwhile: its status is read next
                        continue
                    await call.write(pb.WatchRequest(progress_request=pb.WatchProgressRequest()))
                    continue
                response = reading.result()
                reading, silent = None, 0.0
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
        except (grpc.aio.AioRpcError, TimeoutError, ConnectionError):
            self._client.failed(member)
            raise
        finally:
            if reading is not None:
                reading.cancel()
                with contextlib.suppress(BaseException):
                    await reading
            call.cancel()

    async def _announce(self, available: bool) -> None:
        if self._availability is not None:
            await self._availability(available)

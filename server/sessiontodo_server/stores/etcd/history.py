"""Reading etcd's MVCC history back: a session's versions, and the feed between two cursors.

etcd keeps every revision until it is compacted; these reads are bounded by the store's
``--history-limit`` and ``--feed-history`` all the same, and answer None (a RESET for the
watcher or feed) when what they need is beyond them or was compacted away.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.mvccpb import kv_pb2
from sessiontodo_server.domain.errors import Unavailable
from sessiontodo_server.domain.values import Change
from sessiontodo_server.stores.etcd.cache import Version
from sessiontodo_server.stores.etcd.client import EtcdClient, unavailable
from sessiontodo_server.stores.etcd.events import by_revision, changes_of, cursor, revision_of
from sessiontodo_server.stores.etcd.keys import Keys, range_end
from sessiontodo_server.stores.etcd.records import IN_BATCH, Record, decode_batch, decode_record

PAGE = 256
"""Keys read per Range when listing or snapshotting."""


async def pages(
    client: EtcdClient, start: bytes, end: bytes, revision: int = 0, *, keys_only: bool = False
) -> AsyncIterator[kv_pb2.KeyValue]:
    """Every key in [start, end), ``PAGE`` at a time (at ``revision``, or the newest)."""
    while True:
        request = pb.RangeRequest(key=start, range_end=end, limit=PAGE, revision=revision, keys_only=keys_only)
        response = await client.range(request)
        for kv in response.kvs:
            yield kv
        if not response.more:
            return
        start = response.kvs[-1].key + b"\0"


async def session_history(
    client: EtcdClient, keys: Keys, session_id: str, newest: Version, after: int
) -> list[Change] | None:
    """The session's changes after its revision ``after`` up to ``newest``, read by following each
    version back to the one before (it names that one's etcd revision, or the batch record)."""
    changes: list[Change] = []
    record, at, position = newest.record, newest.revision, cursor(newest.revision)
    in_batch: dict[int, tuple[Record, int]] = {}
    """The session's versions the batch at ``at`` made, by revision, with their cursors."""
    while record.revision > after:
        if record.previous == IN_BATCH and not in_batch:
            in_batch = await _batch_versions(client, keys, session_id, record, at)
            if not in_batch:
                return None  # compacted
            record, position = in_batch[record.revision]
        change = record.change(session_id, position)
        if change is None or (record.revision > after + 1 and not record.previous):
            return None  # an earlier incarnation's, or the list before the store began
        changes.append(change)
        if record.revision == after + 1:
            break
        if record.previous == IN_BATCH:
            record, position = in_batch[record.revision - 1]
            continue
        at, in_batch = record.previous, {}
        older = await _read_at(client, keys.session(session_id), at)
        if older is None:
            return None  # compacted
        record, position = decode_record(older), cursor(at)
    return changes[::-1]


async def _batch_versions(
    client: EtcdClient, keys: Keys, session_id: str, final: Record, at: int
) -> dict[int, tuple[Record, int]]:
    """The versions of ``session_id`` the batch at revision ``at`` made (``final``: the last), with cursors."""
    value = await _read_at(client, keys.batch, at)
    if value is None:
        return {}
    decoded = decode_batch(value).decoded({session_id: final}, only=session_id)
    return {
        version.revision: (version, cursor(at, later)) for later, (_, version) in decoded if isinstance(version, Record)
    }


async def _read_at(client: EtcdClient, key: bytes, revision: int) -> bytes | None:
    """``key``'s value as of ``revision``; None when etcd compacted that revision away."""
    try:  # a past revision never changes: any member may answer (serializable)
        found = await client.range(pb.RangeRequest(key=key, revision=revision, serializable=True))
    except grpc.aio.AioRpcError as error:
        if error.code() == grpc.StatusCode.OUT_OF_RANGE:
            return None
        raise
    return found.kvs[0].value if found.kvs else None


async def feed_between(
    client: EtcdClient, keys: Keys, after: int, until: int, limit: int, timeout: float
) -> list[Change] | None:
    """The changes with cursors in (after, until], read with a watch of their revisions; None when
    there are more than ``limit`` or etcd compacted them away. ``until`` must be a change's cursor."""
    changes: list[Change] = []
    last_revision = revision_of(until)
    member, stubs = client.member()
    call = stubs.watch.Watch(metadata=client.metadata)
    try:
        create = pb.WatchCreateRequest(key=keys.prefix, range_end=range_end(keys.prefix))
        create.start_revision = revision_of(after)
        async with asyncio.timeout(timeout):  # grpc's write waits for ever on a call that failed before it started
            await call.write(pb.WatchRequest(create_request=create))
        while True:
            async with asyncio.timeout(timeout):
                response = await call.read()
            if response is grpc.aio.EOF or (response.canceled and not response.compact_revision):
                raise Unavailable("the store is unreachable; retry")
            if response.compact_revision:
                return None
            for revision, events in by_revision(response.events):
                if revision <= last_revision:
                    _, found = changes_of(keys, revision, events)
                    changes += [change for change in found if after < change.cursor <= until]
                    if len(changes) > limit:
                        return None
                if revision >= last_revision:
                    return changes
    except (grpc.aio.AioRpcError, TimeoutError) as error:
        client.failed(member)
        raise unavailable(error) from error
    finally:
        call.cancel()

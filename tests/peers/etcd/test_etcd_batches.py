"""BatchWrite on the etcd store, as replicas see it: several stores on one cluster stand for
replicas (no gRPC). A batch is one Txn: these tests race it, read it back through other
replicas and the history, and push it against etcd's limits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
from sessiontodo_server.domain.batch import Batch, BatchWritten, Create, Operation, Remove, Write, WriteContext
from sessiontodo_server.domain.errors import InvalidArgument, LimitExceeded, RevisionMismatch
from sessiontodo_server.domain.mutations import AddTodo, ReplaceTodos, UpdateTodo
from sessiontodo_server.domain.store import REQUEST_RETENTION_SECONDS
from sessiontodo_server.domain.values import Change, ChangeKind, Limits, SessionInfo, Todo
from sessiontodo_server.stores.etcd import EtcdStore
from sessiontodo_server.stores.etcd.client import EtcdClient
from sessiontodo_server.stores.etcd.events import revision_of
from tests.support import eventually
from tests.support.etcd_cluster import EtcdCluster
from tests.support.replicas import OpenReplica

LIMITS = Limits()


async def _batch(store: EtcdStore, *operations: Operation, request_id: str = "", fingerprint: str = "") -> BatchWritten:
    return await store.write_batch(Batch(operations, fingerprint), WriteContext(request_id, "batch", 1.0, LIMITS))


def _add(session_id: str, content: str, expected: int | None = None) -> Write:
    return Write(session_id, AddTodo(Todo(content, content), None, True), expected)


async def _contents(store: EtcdStore, session_id: str) -> list[str]:
    state = await store.get(session_id)
    assert state is not None
    return [todo.content for todo in state.todos]


async def _replace(store: EtcdStore, session_id: str, content: str) -> Change:
    written = await store.write(
        Write(session_id, ReplaceTodos((Todo(content, content),))), WriteContext("", "racer", 1.0, LIMITS)
    )
    assert written.change is not None
    return written.change


def _summary(changes: Sequence[Change]) -> list[tuple[str, ChangeKind, int, tuple[Todo, ...], str, int]]:
    return [(c.session_id, c.kind, c.revision, c.todos, c.origin, c.cursor) for c in changes]


def _raced_by(racer: EtcdStore, monkeypatch: pytest.MonkeyPatch) -> list[Change]:
    """Just before the next batch's Txn is sent, ``racer`` replaces session ``a``'s list: the write
    another replica commits while a batch is under way."""
    raced: list[Change] = []
    send = EtcdClient.txn

    async def race_then_send(client: EtcdClient, request: pb.TxnRequest, *, writes: bool = True) -> pb.TxnResponse:
        if not raced and any(op.request_put.key == b"sessiontodo/batch" for op in request.success):
            raced.append(await _replace(racer, "a", "racer"))
        return await send(client, request, writes=writes)

    monkeypatch.setattr(EtcdClient, "txn", race_then_send)
    return raced


@pytest.mark.parametrize("creating", [False, True], ids=["writes only", "creating a session too"])
async def test_a_batch_raced_by_another_replica_is_applied_whole_on_top_of_that_write(
    open_replica: OpenReplica[EtcdStore], monkeypatch: pytest.MonkeyPatch, creating: bool
) -> None:
    batcher, racer = await open_replica(), await open_replica()
    await _batch(batcher, Create("a", SessionInfo()), Create("b", SessionInfo()))
    raced = _raced_by(racer, monkeypatch)
    creation = [Create("c", SessionInfo())] if creating else []

    written = await _batch(batcher, *creation, _add("a", "mine"), _add("b", "mine too"))

    assert await _contents(batcher, "a") == ["racer", "mine"]
    assert await _contents(batcher, "b") == ["mine too"]
    assert [outcome.revision for outcome in written.outcomes[-2:]] == [raced[0].revision + 1, 1]


async def test_a_batch_whose_expected_revision_a_racing_replica_moved_fails_whole(
    open_replica: OpenReplica[EtcdStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    batcher, racer = await open_replica(), await open_replica()
    await _batch(batcher, Create("a", SessionInfo()), Create("b", SessionInfo()))
    before = (await batcher.snapshot())[0]
    raced = _raced_by(racer, monkeypatch)

    with pytest.raises(RevisionMismatch) as refused:
        await _batch(batcher, _add("b", "lost"), _add("a", "lost", expected=0))

    assert refused.value.write_index == 1
    assert await _contents(batcher, "b") == []
    feed = await batcher.feed_after(before)
    assert [(change.session_id, change.origin) for change in feed or ()] == [("a", raced[0].origin)]


async def test_another_replica_hears_a_batchs_changes_in_order_with_consecutive_cursors(
    open_replica: OpenReplica[EtcdStore],
) -> None:
    batcher, listener = await open_replica(), await open_replica()
    heard: list[Change] = []
    listener.on_external_change(heard.append)
    await _batch(batcher, Create("gone", SessionInfo()), Create("gone.child", SessionInfo("gone")))
    await eventually(lambda: len(heard) == 2)

    written = await _batch(
        batcher,
        Create("p", SessionInfo()),
        _add("p", "one"),
        Remove("gone"),
        _add("p", "two"),
        Write("p", UpdateTodo("one", content="uno")),
    )

    await eventually(lambda: len(heard) == 2 + len(written.changes))
    assert _summary(heard[2:]) == _summary(written.changes)
    first = written.changes[0].cursor
    assert [change.cursor for change in heard[2:]] == list(range(first, first + 6))
    kinds = [change.kind for change in heard[2:]]
    assert kinds == [
        ChangeKind.SESSION_CREATED,
        ChangeKind.TODO_ADDED,
        ChangeKind.SESSION_REMOVED,
        ChangeKind.SESSION_REMOVED,
        ChangeKind.TODO_ADDED,
        ChangeKind.TODO_UPDATED,
    ]


async def test_a_watcher_resuming_inside_a_batch_gets_the_versions_after_its_revision(
    open_replica: OpenReplica[EtcdStore],
) -> None:
    writer, reader = await open_replica(), await open_replica()
    await _batch(writer, Create("s", SessionInfo()), _add("s", "a"), _add("s", "b"))
    await _batch(writer, _add("s", "c"), _add("s", "d"))

    history = await reader.changes_after("s", 1)

    assert [(c.revision, [t.content for t in c.todos]) for c in history or ()] == [
        (2, ["a", "b"]),
        (3, ["a", "b", "c"]),
        (4, ["a", "b", "c", "d"]),
    ]


async def test_a_batch_of_1000_writes_to_a_few_sessions_is_one_txn_within_etcds_default_limits(
    open_replica: OpenReplica[EtcdStore],
) -> None:
    store = await open_replica()
    await _batch(store, *(Create(f"s{n}", SessionInfo()) for n in range(10)))

    written = await _batch(store, *(_add(f"s{n % 10}", f"todo {n}") for n in range(1000)))

    assert len({revision_of(change.cursor) for change in written.changes}) == 1
    assert len(await _contents(store, "s9")) == 100


async def test_a_batch_needing_more_txn_operations_than_etcd_allows_is_refused_naming_the_limit(
    open_replica: OpenReplica[EtcdStore],
) -> None:
    store = await open_replica()
    before = await store.snapshot()

    with pytest.raises(InvalidArgument) as refused:
        await _batch(store, *(Create(f"s{n}", SessionInfo()) for n in range(100)))

    assert "max_txn_ops (128, etcd's --max-txn-ops)" in str(refused.value)
    assert await store.snapshot() == before


async def test_with_max_txn_ops_raised_a_batch_creating_1000_sessions_is_one_txn() -> None:
    with EtcdCluster(flags=["--max-txn-ops", "5120"]) as etcd:
        store = EtcdStore(f"{etcd.url()}?max_txn_ops=5120")
        await store.open()
        try:
            written = await _batch(store, *(Create(f"s{n:04}", SessionInfo()) for n in range(1000)))
            count = await store.session_count()
        finally:
            await store.close()
    assert len({revision_of(change.cursor) for change in written.changes}) == 1
    assert count == 1000


async def test_a_batch_past_etcds_request_size_is_refused_as_a_limit_and_writes_nothing(
    open_replica: OpenReplica[EtcdStore], etcd: EtcdCluster
) -> None:
    store = await open_replica(f"{etcd.url()}?max_request_bytes=65536")
    await _batch(store, *(Create(f"s{n}", SessionInfo()) for n in range(8)))
    before = await store.snapshot()
    big = tuple(Todo(f"t{k}", "x" * 1000) for k in range(10))

    with pytest.raises(LimitExceeded) as refused:
        await _batch(store, *(Write(f"s{n}", ReplaceTodos(big)) for n in range(8)))

    assert refused.value.limit == "etcd request bytes"
    assert await store.snapshot() == before


async def test_a_batch_request_id_is_honoured_through_another_replica(open_replica: OpenReplica[EtcdStore]) -> None:
    first, second = await open_replica(), await open_replica()
    written = await _batch(first, Create("s", SessionInfo()), _add("s", "once"), request_id="\nr1", fingerprint="f")

    again = await _batch(second, Create("s", SessionInfo()), _add("s", "once"), request_id="\nr1", fingerprint="f")

    assert again == BatchWritten(written.outcomes)
    assert await _contents(second, "s") == ["once"]


async def test_a_retried_batch_of_writes_to_cached_sessions_returns_the_first_outcomes(
    open_replica: OpenReplica[EtcdStore],
) -> None:
    store = await open_replica()
    await _batch(store, Create("s", SessionInfo()))
    first = await _batch(store, _add("s", "once"), request_id="\nr1", fingerprint="f")

    again = await _batch(store, _add("s", "once"), request_id="\nr1", fingerprint="f")

    assert again == BatchWritten(first.outcomes)
    assert await _contents(store, "s") == ["once"]


def _remembered_lease(etcd: EtcdCluster, request_id: str) -> pb.LeaseTimeToLiveResponse:
    def read(channel: Any) -> pb.LeaseTimeToLiveResponse:
        found = pb_grpc.KVStub(channel).Range(pb.RangeRequest(key=f"sessiontodo/b/{request_id}".encode()))
        return pb_grpc.LeaseStub(channel).LeaseTimeToLive(pb.LeaseTimeToLiveRequest(ID=found.kvs[0].lease))

    return etcd.call(etcd.members[0], read)


async def test_a_batch_request_id_is_remembered_on_a_lease_of_the_retention_at_least(
    open_replica: OpenReplica[EtcdStore], etcd: EtcdCluster
) -> None:
    store = await open_replica()
    await _batch(store, Create("s", SessionInfo()), request_id="\nr1", fingerprint="f")

    assert _remembered_lease(etcd, "\nr1").TTL >= REQUEST_RETENTION_SECONDS


async def test_a_batch_remembers_its_request_id_on_a_new_lease_when_etcd_lost_the_last(
    open_replica: OpenReplica[EtcdStore], etcd: EtcdCluster
) -> None:
    store = await open_replica()
    await _batch(store, Create("a", SessionInfo()), request_id="\nr1", fingerprint="f")
    lost = _remembered_lease(etcd, "\nr1").ID
    etcd.call(etcd.members[0], lambda channel: pb_grpc.LeaseStub(channel).LeaseRevoke(pb.LeaseRevokeRequest(ID=lost)))

    await _batch(store, Create("b", SessionInfo()), request_id="\nr2", fingerprint="f")

    assert _remembered_lease(etcd, "\nr2").TTL >= REQUEST_RETENTION_SECONDS

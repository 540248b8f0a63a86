"""The etcd store as replicas see it: several stores on one etcd cluster stand for replicas (no gRPC)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
from sessiontodo_server.app import open_store
from sessiontodo_server.domain.budget import MemoryBudget
from sessiontodo_server.domain.errors import LimitExceeded, RevisionMismatch, SessionNotFound, Unavailable
from sessiontodo_server.domain.mutations import AddTodo, Mutation, ReplaceTodos
from sessiontodo_server.domain.store import GLOBAL_SESSION_ID, StoreStartupError, Written
from sessiontodo_server.domain.todos import EVERY_SESSION, Change, ChangeKind, Limits, RemovalReason, SessionInfo, Todo
from sessiontodo_server.settings import redact_url
from sessiontodo_server.stores.etcd import EtcdStore, parse_etcd_url, tree
from sessiontodo_server.stores.etcd import store as etcd_store
from tests.support import eventually
from tests.support.certificates import CertificateAuthority
from tests.support.etcd_cluster import EtcdCluster

OpenReplica = Callable[..., Awaitable[EtcdStore]]
LIMITS = Limits()


def _listen(store: EtcdStore) -> list[Change]:
    """Every change ``store`` reports from other replicas, in the order reported."""
    heard: list[Change] = []
    store.on_external_change(heard.append)
    return heard


async def _write(store: EtcdStore, session_id: str, mutation: Mutation, expected: int | None = None) -> Written:
    return await store.write(
        session_id, mutation, expected_revision=expected, request_id="", origin="test", now=1.0, limits=LIMITS
    )


async def _replace(store: EtcdStore, session_id: str, *contents: str) -> Change:
    todos = tuple(Todo(f"t{n}", content) for n, content in enumerate(contents))
    written = await _write(store, session_id, ReplaceTodos(todos))
    assert written.change is not None
    return written.change


async def _create(store: EtcdStore, session_id: str, parent_id: str = "", max_sessions: int = 1000) -> Change | None:
    _, created = await store.create_session(session_id, SessionInfo(parent_id), max_sessions, "test")
    return created


def _summary(changes: list[Change]) -> list[tuple[ChangeKind, str, int, tuple[str, ...]]]:
    return [(c.kind, c.session_id, c.revision, tuple(t.content for t in c.todos)) for c in changes]


def _keys(etcd: EtcdCluster, prefix: bytes) -> list[str]:
    request = pb.RangeRequest(key=prefix, range_end=prefix[:-1] + bytes([prefix[-1] + 1]), keys_only=True)
    response = etcd.call(etcd.members[0], lambda channel: pb_grpc.KVStub(channel).Range(request))
    return [kv.key.decode() for kv in response.kvs]


async def test_a_replica_hears_every_change_others_make_in_commit_order(open_replica: OpenReplica) -> None:
    first, second, reader = await open_replica(), await open_replica(), await open_replica()
    heard = _listen(reader)
    made = [await _create(first, "s")]
    for n in range(10):
        made.append(await _replace([first, second][n % 2], "s", f"v{n}"))
    made += await second.remove_session("s", RemovalReason.REMOVED)
    await eventually(lambda: len(heard) == len(made))
    assert _summary(heard) == _summary([c for c in made if c is not None])
    assert [c.cursor for c in heard] == [c.cursor for c in made if c is not None]


async def test_a_replica_hears_only_what_others_made(open_replica: OpenReplica) -> None:
    writer, other = await open_replica(), await open_replica()
    heard_by_writer = _listen(writer)
    await _create(writer, "s")
    await _replace(writer, "s", "mine")
    theirs = await _replace(other, "s", "theirs")
    marker = await _replace(other, "s", "marker")
    await eventually(lambda: len(heard_by_writer) == 2)
    assert _summary(heard_by_writer) == _summary([theirs, marker])


async def test_a_write_is_answered_after_every_earlier_change_of_other_replicas_was_heard(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    heard = _listen(second)
    created = await _create(first, "s")
    assert created is not None
    earlier = [created, *[await _replace(first, "s", f"elsewhere {n}") for n in range(5)]]
    await _replace(second, "s", "mine")
    assert _summary(heard) == _summary(earlier)  # already, before its own change is published


async def test_conditional_writes_racing_through_several_replicas_have_exactly_one_winner(
    open_replica: OpenReplica,
) -> None:
    replicas = [await open_replica() for _ in range(3)]
    await _create(replicas[0], "s")
    for round_ in range(10):
        state = await replicas[1].get("s")
        assert state is not None
        attempts = [
            _write(r, "s", ReplaceTodos((Todo("t", f"round {round_} by {n}"),)), state.revision)
            for n, r in enumerate(replicas)
        ]
        outcomes = await asyncio.gather(*attempts, return_exceptions=True)
        winners = [o for o in outcomes if isinstance(o, Written)]
        assert len(winners) == 1
        assert all(isinstance(o, RevisionMismatch) for o in outcomes if o is not winners[0])
        assert await replicas[2].get("s") == winners[0].state


async def test_unconditional_writers_on_two_replicas_never_fail_on_contention(open_replica: OpenReplica) -> None:
    replicas = [await open_replica(), await open_replica()]
    await _create(replicas[0], "s")
    writers = [
        _write(replicas[n % 2], "s", AddTodo(Todo(f"w{n}-{k}", f"writer {n} #{k}"), None, True))
        for n in range(32)
        for k in range(5)
    ]
    written = await asyncio.gather(*writers)
    assert sorted(w.state.revision for w in written) == list(range(1, 161))
    state = await replicas[1].get("s")
    assert state is not None
    assert len(state.todos) == 160


async def test_a_request_id_recorded_through_one_replica_is_honoured_through_another(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "s")
    add = AddTodo(Todo("t", "once"), None, False)
    original = await first.write("s", add, expected_revision=None, request_id="req", origin="", now=1.0, limits=LIMITS)
    await _replace(second, "s", "moved on")  # the first replica's cached version is stale now
    retried = await first.write("s", add, expected_revision=None, request_id="req", origin="", now=2.0, limits=LIMITS)
    elsewhere = await second.write(
        "s", add, expected_revision=None, request_id="req", origin="", now=2.0, limits=LIMITS
    )
    assert retried.change is None
    assert retried.result == original.result
    assert elsewhere.change is None
    assert elsewhere.result == original.result


async def test_a_refusal_is_decided_on_the_current_version_not_a_cached_one(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "s")
    stale = await _replace(first, "s", "cached here")
    current = await _replace(second, "s", "written elsewhere")
    written = await _write(first, "s", ReplaceTodos((Todo("t0", "written elsewhere"),)), expected=stale.revision + 1)
    assert written.change is None
    assert written.state.revision == current.revision
    with pytest.raises(RevisionMismatch) as refused:
        await _write(first, "s", ReplaceTodos(()), expected=stale.revision)
    assert refused.value.actual == current.revision


async def test_the_session_limit_counts_sessions_created_through_every_replica(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "a", max_sessions=2)
    await _create(second, "b", max_sessions=2)
    with pytest.raises(LimitExceeded):
        await _create(first, "c", max_sessions=2)


async def test_a_session_removed_on_one_replica_and_recreated_on_another_starts_above_its_removal(
    open_replica: OpenReplica,
) -> None:
    first, second = await open_replica(), await open_replica()
    await _create(first, "s")
    await _replace(first, "s", "old")
    (removal,) = await first.remove_session("s", RemovalReason.REMOVED)
    created = await _create(second, "s")
    assert created is not None
    assert created.revision > removal.revision
    with pytest.raises(SessionNotFound):
        await _replace(first, "s-gone", "never")


async def test_a_tree_larger_than_one_txn_is_removed_parents_first_with_every_descendant(
    open_replica: OpenReplica, etcd: EtcdCluster
) -> None:
    remover, other = await open_replica(), await open_replica()
    heard = _listen(other)
    await _create(remover, "root")
    children = [f"child{n:02}" for n in range(tree.SESSIONS_PER_TXN + 10)]
    for child in children:
        await _create(remover, child, "root")
    await _create(remover, "grandchild", children[-1])
    await _create(remover, "bystander")
    removed = await remover.remove_session("root", RemovalReason.REMOVED)
    assert [c.session_id for c in removed] == ["root", *children, "grandchild"]
    assert len({c.cursor for c in removed}) == len(removed)
    assert [c.cursor for c in removed] == sorted(c.cursor for c in removed)
    assert [s.session_id for s in await other.list_sessions("", 100, EVERY_SESSION)] == ["bystander"]
    await eventually(lambda: [c.session_id for c in heard[-len(removed) :]] == [c.session_id for c in removed])
    assert _keys(etcd, b"sessiontodo/c/") == []


async def test_a_removal_of_several_txns_interleaved_with_another_replica_resets_its_own_watchers(
    open_replica: OpenReplica, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The book publishes a removal's changes together: one committed between its Txns cannot
    follow them in order on the removing replica, so its watchers and feeds reset instead of
    missing it."""
    remover, writer = await open_replica(), await open_replica()
    heard = _listen(remover)
    await _create(remover, "root")
    await _create(remover, "child", "root")
    await _create(remover, "other")
    monkeypatch.setattr(tree, "SESSIONS_PER_TXN", 1)
    interleaved: list[Change] = []

    async def read_between(*args: Any) -> Any:
        if args[-1] == ["child"]:
            interleaved.append(await _replace(writer, "other", "in between"))
        return await tree.read_tree(*args)

    monkeypatch.setattr(etcd_store, "read_tree", read_between)
    removed = await remover.remove_session("root", RemovalReason.REMOVED)
    assert [c.session_id for c in removed] == ["root", "child"]
    await eventually(lambda: len(heard) == 2)
    assert (heard[0].kind, heard[0].session_id) == (ChangeKind.RESET, "")
    assert heard[0].cursor >= removed[-1].cursor
    assert _summary(heard[1:]) == _summary(interleaved)


async def test_an_expired_session_is_removed_once_whichever_replicas_reap_it(open_replica: OpenReplica) -> None:
    reapers = [await open_replica(), await open_replica()]
    watcher = await open_replica()
    heard = _listen(watcher)
    await reapers[0].create_session("idle", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    await eventually(lambda: len(heard) == 1)
    await eventually(lambda: all(r.held_bytes()[0] > 0 for r in reapers))  # every replica follows the deadline
    due = [await r.expired(200.0) for r in reapers]
    assert due == [["idle"], ["idle"]]
    removed = [change for reaper in reapers for change in await reaper.remove_session("idle", RemovalReason.EXPIRED)]
    assert [c.reason for c in removed] == [RemovalReason.EXPIRED]
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)


async def test_a_session_written_after_it_came_due_is_not_removed(open_replica: OpenReplica) -> None:
    reaper, writer = await open_replica(), await open_replica()
    await reaper.create_session("s", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    assert await reaper.expired(111.0) == ["s"]
    renewal = ReplaceTodos((Todo("t", "busy"),))
    await writer.write("s", renewal, expected_revision=None, request_id="", origin="", now=110.5, limits=LIMITS)
    assert await reaper.remove_session("s", RemovalReason.EXPIRED) == []
    assert await reaper.get("s") is not None
    assert await reaper.expired(119.0) == []
    assert await reaper.expired(121.0) == ["s"]


async def test_the_feed_resumes_on_any_replica_and_snapshots_are_consistent(open_replica: OpenReplica) -> None:
    first, second = await open_replica(), await open_replica()
    start, _ = await second.snapshot()
    made = [await _create(first, "a"), await _replace(first, "a", "x"), await _create(second, "b")]
    made.append(await _replace(second, "a", "y"))
    feed = await first.feed_after(start)
    assert feed is not None
    assert _summary(feed) == _summary([c for c in made if c is not None])
    assert first.feed_epoch == second.feed_epoch
    cursor, states = await first.snapshot()
    assert cursor == feed[-1].cursor
    assert [(s.session_id, s.revision) for s in states] == [("a", 2), ("b", 0), (GLOBAL_SESSION_ID, 0)]


async def test_a_feed_cursor_survives_a_restart_of_the_replica_that_gave_it(open_replica: OpenReplica) -> None:
    first = await open_replica()
    await _create(first, "s")
    given = await _replace(first, "s", "before")
    await first.close()
    later = await _replace(await open_replica(), "s", "while it was away")
    restarted = await open_replica()
    assert _summary(await restarted.feed_after(given.cursor) or []) == _summary([later])


async def test_history_compacted_away_resets_the_feed_the_history_and_a_replica_that_missed_it(
    open_replica: OpenReplica, etcd: EtcdCluster
) -> None:
    writer, slow = await open_replica(), await open_replica()
    heard = _listen(slow)
    await _create(writer, "s")
    first = await _replace(writer, "s", "one")
    await eventually(lambda: len(heard) == 2)
    assert slow._task is not None
    slow._task.cancel()  # a replica that stops following for a while
    await asyncio.wait([slow._task])
    last = await _replace(writer, "s", "two")
    await _replace(writer, "s", "three")
    etcd.compact()
    assert await writer.feed_after(first.cursor) is None
    assert await writer.changes_after("s", last.revision - 1) is None
    slow._task = asyncio.create_task(slow._follower.run())
    await eventually(lambda: len(heard) == 3)
    assert (heard[2].kind, heard[2].session_id) == (ChangeKind.RESET, "")
    state = await slow.get("s")
    assert state is not None
    assert [t.content for t in state.todos] == ["three"]


async def test_stores_with_different_prefixes_share_one_cluster_without_seeing_each_other(
    open_replica: OpenReplica, etcd: EtcdCluster
) -> None:
    blue = await open_replica(etcd.url("blue"))
    green = await open_replica(etcd.url("green"))
    await _create(blue, "s")
    await _replace(blue, "s", "blue only")
    assert await green.get("s") is None
    assert await green.list_sessions("", 10, EVERY_SESSION) == []
    assert "blue/s/s" in _keys(etcd, b"blue/")
    assert "green/s/s" not in _keys(etcd, b"green/")


async def test_the_cache_is_counted_against_the_budget_and_kept_within_the_lists_share(etcd: EtcdCluster) -> None:
    store = EtcdStore(etcd.url(), budget=MemoryBudget(total=64 << 10))  # a lists share of 32 KiB
    await store.open()
    try:
        for n in range(20):
            await _create(store, f"s{n}")
            await _replace(store, f"s{n}", "x" * 4000)
        lists, history = store.held_bytes()
        assert 4000 < lists <= 32 << 10
        assert history == 0
        for n in range(20):  # evicted or not, every session reads and writes the same
            assert (await _replace(store, f"s{n}", "y")).revision == 2
    finally:
        await store.close()


async def test_while_etcd_is_down_calls_fail_as_unavailable_without_its_address_and_change_nothing(
    open_replica: OpenReplica, etcd: EtcdCluster
) -> None:
    store = await open_replica()
    await _create(store, "s")
    before = await _replace(store, "s", "kept")
    etcd.members[0].kill()
    with pytest.raises(Unavailable) as refused:
        await _replace(store, "s", "lost")
    assert str(etcd.members[0].port) not in str(refused.value)
    assert "127.0.0.1" not in str(refused.value)
    with pytest.raises(Unavailable):
        await store.get("s")
    etcd.start()
    state = await store.get("s")
    assert state is not None
    assert state.revision == before.revision
    assert state.todos == before.todos


async def test_the_store_reports_losing_etcd_and_getting_it_back(open_replica: OpenReplica, etcd: EtcdCluster) -> None:
    store = await open_replica()
    reports: list[bool] = []

    async def report(available: bool) -> None:
        reports.append(available)

    store.on_availability_change(report)
    etcd.members[0].kill()
    await eventually(lambda: reports == [False], timeout=10)
    etcd.start()
    await eventually(lambda: reports == [False, True], timeout=10)


async def test_a_store_that_cannot_reach_etcd_does_not_start(etcd: EtcdCluster) -> None:
    etcd.members[0].kill()
    store = EtcdStore(f"{etcd.url()}?timeout=0.5")
    with pytest.raises(StoreStartupError, match="cannot reach the etcd cluster"):
        await store.open()


async def test_tls_with_a_client_certificate(tmp_path: Path) -> None:
    with EtcdCluster(ca=CertificateAuthority(tmp_path)) as secured:
        store = EtcdStore(secured.url())
        await store.open()
        try:
            await _create(store, "s")
            assert (await _replace(store, "s", "over TLS")).revision == 1
        finally:
            await store.close()
        without_certificate = EtcdStore(secured.url().split("&cert=")[0])
        with pytest.raises(StoreStartupError):
            await without_certificate.open()


async def test_a_user_and_password_when_the_cluster_requires_them(etcd: EtcdCluster) -> None:
    etcd.enable_auth("s3cret-pass")
    host = etcd.url().removeprefix("etcd://")
    store = EtcdStore(f"etcd://root:s3cret-pass@{host}")
    await store.open()
    try:
        await _create(store, "s")
        assert (await _replace(store, "s", "authenticated")).revision == 1
    finally:
        await store.close()
    with pytest.raises(StoreStartupError, match="etcd refused the user 'root'"):
        await EtcdStore(f"etcd://root:wrong@{host}").open()
    anonymous = EtcdStore(f"etcd://{host}")
    with pytest.raises((StoreStartupError, grpc.aio.AioRpcError)):
        await anonymous.open()


def test_an_etcd_url_names_the_members_the_prefix_and_the_tls_files() -> None:
    location = parse_etcd_url("etcds://root:p%40ss@a:2379,b,[::1]:2380/team/blue?ca=/ca.pem&timeout=2")
    assert location.endpoints == ("a:2379", "b:2379", "[::1]:2380")
    assert (location.prefix, location.user, location.password, location.timeout) == ("team/blue/", "root", "p@ss", 2.0)
    assert (location.tls, str(location.ca), location.cert) == (True, "/ca.pem", None)
    assert parse_etcd_url("etcd://a:2379").prefix == "sessiontodo/"


def test_an_etcd_url_takes_etcds_txn_operations_limit_defaulting_to_etcds_own() -> None:
    assert parse_etcd_url("etcd://a:2379/p?max_txn_ops=5120").max_txn_ops == 5120
    assert parse_etcd_url("etcd://a:2379/p").max_txn_ops == 128


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("etcd:///prefix", "at least one member"),
        ("etcd://a:port/p", "host:port"),
        ("etcd://a:2379/p?ca=/ca.pem", "need etcds://"),
        ("etcds://a:2379/p?cert=/c.pem", "go together"),
        ("etcd://a:2379/p?colour=blue", "unknown etcd store URL parameters"),
        ("etcd://a:2379/with space", "without spaces"),
        ("etcd://a:2379/p?max_txn_ops=64", "max_txn_ops is at least 128"),
    ],
)
def test_a_malformed_etcd_url_is_refused_with_the_reason(url: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_etcd_url(url)


def test_the_server_opens_an_etcd_store_for_etcd_and_etcds_urls_and_logs_them_without_the_password() -> None:
    assert isinstance(open_store("etcd://127.0.0.1:1/p", 8), EtcdStore)
    assert isinstance(open_store("etcds://127.0.0.1:1/p", 8), EtcdStore)
    assert "hunter2" not in redact_url("etcd://root:hunter2@a:2379,b:2379/p")

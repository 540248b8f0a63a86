"""What only the etcd store does as replicas see it (several stores on one cluster stand for replicas,
no gRPC): Txn limits, compaction, leases, prefixes, TLS and auth, its URL. What every shared store
does alike is the replica contract (``tests/contract/test_replica_contract.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest

from sessiontodo_common.addresses import redact_url
from sessiontodo_etcd.etcdserverpb import rpc_pb2 as pb
from sessiontodo_etcd.etcdserverpb import rpc_pb2_grpc as pb_grpc
from sessiontodo_server.domain.budget import MemoryBudget
from sessiontodo_server.domain.store import StoreStartupError
from sessiontodo_server.domain.values import EVERY_SESSION, Change, ChangeKind, RemovalReason, SessionInfo
from sessiontodo_server.stores.by_url import open_store
from sessiontodo_server.stores.etcd import EtcdStore, parse_etcd_url, tree
from sessiontodo_server.stores.etcd import store as etcd_store
from tests.support import eventually
from tests.support.certificates import CertificateAuthority
from tests.support.etcd_cluster import EtcdCluster
from tests.support.replicas import OpenReplica, create, listen, pause_following, replace, resume_following, summary

Open = OpenReplica[EtcdStore]


def _keys(etcd: EtcdCluster, prefix: bytes) -> list[str]:
    request = pb.RangeRequest(key=prefix, range_end=prefix[:-1] + bytes([prefix[-1] + 1]), keys_only=True)
    response = etcd.call(etcd.members[0], lambda channel: pb_grpc.KVStub(channel).Range(request))
    return [kv.key.decode() for kv in response.kvs]


async def test_a_tree_larger_than_one_txn_is_removed_parents_first_with_every_descendant(
    open_replica: Open, etcd: EtcdCluster
) -> None:
    remover, other = await open_replica(), await open_replica()
    heard = listen(other)
    await create(remover, "root")
    children = [f"child{n:02}" for n in range(tree.SESSIONS_PER_TXN + 10)]
    for child in children:
        await create(remover, child, "root")
    await create(remover, "grandchild", children[-1])
    await create(remover, "bystander")
    removed = await remover.remove_session("root", RemovalReason.REMOVED)
    assert [c.session_id for c in removed] == ["root", *children, "grandchild"]
    assert len({c.cursor for c in removed}) == len(removed)
    assert [c.cursor for c in removed] == sorted(c.cursor for c in removed)
    assert [s.session_id for s in await other.list_sessions("", 100, EVERY_SESSION)] == ["bystander"]
    await eventually(lambda: [c.session_id for c in heard[-len(removed) :]] == [c.session_id for c in removed])
    assert _keys(etcd, b"sessiontodo/c/") == []


async def test_a_removal_of_several_txns_interleaved_with_another_replica_resets_its_own_watchers(
    open_replica: Open, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The book publishes a removal's changes together: one committed between its Txns cannot
    follow them in order on the removing replica, so its watchers and feeds reset instead of
    missing it."""
    remover, writer = await open_replica(), await open_replica()
    heard = listen(remover)
    await create(remover, "root")
    await create(remover, "child", "root")
    await create(remover, "other")
    monkeypatch.setattr(tree, "SESSIONS_PER_TXN", 1)
    interleaved: list[Change] = []

    async def read_between(*args: Any) -> Any:
        if args[-1] == ["child"]:
            interleaved.append(await replace(writer, "other", "in between"))
        return await tree.read_tree(*args)

    monkeypatch.setattr(etcd_store, "read_tree", read_between)
    removed = await remover.remove_session("root", RemovalReason.REMOVED)
    assert [c.session_id for c in removed] == ["root", "child"]
    await eventually(lambda: len(heard) == 2)
    assert (heard[0].kind, heard[0].session_id) == (ChangeKind.RESET, "")
    assert heard[0].cursor >= removed[-1].cursor
    assert summary(heard[1:]) == summary(interleaved)


async def test_an_expired_session_is_removed_once_whichever_replicas_reap_it(open_replica: Open) -> None:
    reapers = [await open_replica(), await open_replica()]
    watcher = await open_replica()
    heard = listen(watcher)
    await reapers[0].create_session("idle", SessionInfo("", {}, 100.0, 100.0, 10.0), 10, "")
    await eventually(lambda: len(heard) == 1)
    await eventually(lambda: all(r.held_bytes()[0] > 0 for r in reapers))  # every replica follows the deadline
    due = [await r.expired(200.0) for r in reapers]
    assert due == [["idle"], ["idle"]]
    removed = [change for reaper in reapers for change in await reaper.remove_session("idle", RemovalReason.EXPIRED)]
    assert [c.reason for c in removed] == [RemovalReason.EXPIRED]
    await eventually(lambda: len(heard) == 2)
    assert (heard[1].kind, heard[1].reason) == (ChangeKind.SESSION_REMOVED, RemovalReason.EXPIRED)


async def test_history_compacted_away_resets_the_feed_the_history_and_a_replica_that_missed_it(
    open_replica: Open, etcd: EtcdCluster
) -> None:
    writer, slow = await open_replica(), await open_replica()
    heard = listen(slow)
    await create(writer, "s")
    first = await replace(writer, "s", "one")
    await eventually(lambda: len(heard) == 2)
    await pause_following(slow)  # a replica that stops following for a while
    last = await replace(writer, "s", "two")
    await replace(writer, "s", "three")
    etcd.compact()
    assert await writer.feed_after(first.cursor) is None
    assert await writer.changes_after("s", last.revision - 1) is None
    resume_following(slow)
    await eventually(lambda: len(heard) == 3)
    assert (heard[2].kind, heard[2].session_id) == (ChangeKind.RESET, "")
    state = await slow.get("s")
    assert state is not None
    assert [t.content for t in state.todos] == ["three"]


async def test_stores_with_different_prefixes_share_one_cluster_without_seeing_each_other(
    open_replica: Open, etcd: EtcdCluster
) -> None:
    blue = await open_replica(etcd.url("blue"))
    green = await open_replica(etcd.url("green"))
    await create(blue, "s")
    await replace(blue, "s", "blue only")
    assert await green.get("s") is None
    assert await green.list_sessions("", 10, EVERY_SESSION) == []
    assert "blue/s/s" in _keys(etcd, b"blue/")
    assert "green/s/s" not in _keys(etcd, b"green/")


async def test_the_cache_is_counted_against_the_budget_and_kept_within_the_lists_share(etcd: EtcdCluster) -> None:
    store = EtcdStore(etcd.url(), budget=MemoryBudget(total=64 << 10))  # a lists share of 32 KiB
    await store.open()
    try:
        for n in range(20):
            await create(store, f"s{n}")
            await replace(store, f"s{n}", "x" * 4000)
        lists, history = store.held_bytes()
        assert 4000 < lists <= 32 << 10
        assert history == 0
        for n in range(20):  # evicted or not, every session reads and writes the same
            assert (await replace(store, f"s{n}", "y")).revision == 2
    finally:
        await store.close()


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
            await create(store, "s")
            assert (await replace(store, "s", "over TLS")).revision == 1
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
        await create(store, "s")
        assert (await replace(store, "s", "authenticated")).revision == 1
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

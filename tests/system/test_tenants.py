"""Tenants are separate namespaces: two tenants (acme and globex) use identical session ids and
nothing crosses — reads, writes, watches, the feed, listings, batch reads, removal, errors, limits.
The watch contract and the feed are run through both tenants at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo.v1 import todo_service_pb2_grpc as pb_grpc
from sessiontodo_client import (
    ChangeKind,
    ChannelSecurity,
    FeedEvent,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Todo,
    TodoClient,
    WatchEvent,
)
from sessiontodo_server.app import RunningServer, start_server
from sessiontodo_server.domain.values import GLOBAL_SESSION_ID
from tests.support import make_settings
from tests.support.certificates import auth_toml

WAIT = 10.0
TENANTS = ("acme", "globex")


def token(tenant: str, role: str) -> str:
    return f"{tenant}-{role}-token-0123456789"


@pytest.fixture
def auth_file(tmp_path: Path) -> Path:
    path = tmp_path / "auth.toml"
    entries = [(token(tenant, role), tenant, role) for tenant in TENANTS for role in ("writer", "admin")]
    path.write_text(auth_toml(*entries))
    return path


@dataclass
class Tenants:
    """A server with tokens for two tenants, and a writer client of each."""

    server: RunningServer
    acme: TodoClient
    globex: TodoClient

    def admin(self, tenant: str) -> TodoClient:
        return connect(self.server, token(tenant, "admin"))


@pytest.fixture
async def tenants(start: Callable[..., Any], auth_file: Path) -> AsyncIterator[Callable[..., Any]]:
    """Start a server with the auth file (and setting overrides) and connect a writer of each tenant."""
    async with AsyncExitStack() as stack:

        async def _start(**overrides: Any) -> Tenants:
            server: RunningServer = await start(auth_file=auth_file, **overrides)
            acme, globex = [
                await stack.enter_async_context(connect(server, token(tenant, "writer"))) for tenant in TENANTS
            ]
            return Tenants(server, acme, globex)

        yield _start


def connect(server: RunningServer, bearer: str) -> TodoClient:
    return TodoClient.connect(server.address, security=ChannelSecurity(token=bearer))


def contents(todos: list[Todo]) -> list[str]:
    return [todo.content for todo in todos]


async def next_event(events: AsyncIterator[Any]) -> Any:
    return await asyncio.wait_for(anext(events), WAIT)


async def test_the_same_session_id_in_two_tenants_is_two_sessions(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    for client, name in ((t.acme, "acme"), (t.globex, "globex")):
        await client.create_session("ses_1", labels={"owner": name})
        await client.replace_todos("ses_1", [Todo(content=f"{name}'s plan")])
    await t.acme.add_todo("ses_1", Todo(content="acme's second step"))

    assert contents((await t.acme.get_todos("ses_1")).todos) == ["acme's plan", "acme's second step"]
    assert contents((await t.globex.get_todos("ses_1")).todos) == ["globex's plan"]
    assert ((await t.acme.get_session("ses_1")).revision, (await t.globex.get_session("ses_1")).revision) == (2, 1)
    assert (await t.globex.get_session("ses_1")).labels == {"owner": "globex"}


async def test_another_tenants_session_does_not_exist_for_any_call(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    await t.acme.create_session("only_acme")
    await t.acme.create_session("child", parent_id="only_acme")
    await t.acme.replace_todos("only_acme", [Todo(id="t1", content="secret")])
    globex = t.globex

    for call in (
        globex.get_todos("only_acme"),
        globex.get_session("only_acme"),
        globex.replace_todos("only_acme", []),
        globex.add_todo("only_acme", Todo(content="intrusion")),
        globex.update_todo("only_acme", "t1", content="changed"),
        globex.remove_todo("only_acme", "t1"),
        globex.update_session("only_acme", labels={"x": "y"}),
        globex.create_session("ses_2", parent_id="only_acme"),
        anext(globex.watch("only_acme")),
    ):
        with pytest.raises(NotFound) as caught:
            await call
        assert "acme/" not in str(caught.value)
        assert "only_acme" in str(caught.value)
    assert await globex.remove_session("only_acme") == []
    assert await globex.batch_get_todos(["only_acme", "child"]) == ([], ["only_acme", "child"])
    assert await globex.list_sessions() == []
    assert await globex.list_sessions(parent_id="only_acme") == []
    assert contents((await t.acme.get_todos("only_acme")).todos) == ["secret"]


async def test_ids_come_back_in_the_callers_own_terms(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    await t.acme.create_session("parent")
    session, _ = await t.acme.create_session("child", parent_id="parent")

    assert (session.session_id, session.parent_id) == ("child", "parent")
    assert [s.session_id for s in await t.acme.list_sessions(parent_id="parent")] == ["child"]
    assert await t.acme.remove_session("parent") == ["parent", "child"]
    found, missing = await t.acme.batch_get_todos([GLOBAL_SESSION_ID, "parent"])
    assert ([entry.session.session_id for entry in found], missing) == ([GLOBAL_SESSION_ID], ["parent"])


async def test_an_id_naming_another_tenant_is_refused(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    await t.acme.create_session("ses_1")

    for call in (t.globex.get_todos("acme/ses_1"), t.globex.create_session("acme/ses_2")):
        with pytest.raises(InvalidArgument) as caught:
            await call
        assert caught.value.violations == [("session_id", "may not contain '/'")]


async def test_each_tenant_has_its_own_global_list_which_cannot_be_removed(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    await t.acme.replace_todos(GLOBAL_SESSION_ID, [Todo(content="acme-wide")])

    assert contents((await t.acme.get_todos(GLOBAL_SESSION_ID)).todos) == ["acme-wide"]
    assert (await t.globex.get_todos(GLOBAL_SESSION_ID)).todos == []
    with pytest.raises(InvalidArgument):
        await t.acme.remove_session(GLOBAL_SESSION_ID)
    assert GLOBAL_SESSION_ID not in [s.session_id for s in await t.acme.list_sessions()]


async def test_listing_paging_and_remove_all_stay_within_the_tenant(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    for index in range(5):
        await t.acme.create_session(f"ses_{index}")
    await t.globex.create_session("ses_0")

    assert [s.session_id for s in await t.acme.list_sessions()] == [f"ses_{i}" for i in range(5)]
    assert [s.session_id for s in await t.globex.list_sessions()] == ["ses_0"]
    async with grpc.aio.insecure_channel(t.server.address) as channel:  # pages by hand: the client follows them
        stub = pb_grpc.TodoServiceStub(channel)

        def as_writer(tenant: str) -> tuple[tuple[str, str]]:
            return (("authorization", f"Bearer {token(tenant, 'writer')}"),)

        first = await stub.ListSessions(pb.ListSessionsRequest(page_size=2), metadata=as_writer("acme"))
        second = await stub.ListSessions(
            pb.ListSessionsRequest(page_size=2, page_token=first.next_page_token), metadata=as_writer("acme")
        )
        assert [s.session_id for s in [*first.sessions, *second.sessions]] == ["ses_0", "ses_1", "ses_2", "ses_3"]
        with pytest.raises(grpc.aio.AioRpcError) as foreign:
            await stub.ListSessions(
                pb.ListSessionsRequest(page_size=2, page_token=first.next_page_token), metadata=as_writer("globex")
            )
        assert foreign.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    async with t.admin("globex") as globex_admin:
        assert await globex_admin.remove_all_sessions() == 1
    assert len(await t.acme.list_sessions()) == 5
    assert await t.globex.list_sessions() == []


async def test_the_watch_contract_holds_for_both_tenants_on_the_same_id_and_nothing_crosses(
    tenants: Callable[..., Any],
) -> None:
    t: Tenants = await tenants()
    for client in (t.acme, t.globex):
        await client.create_session("ses_1")
    streams = {name: client.watch("ses_1") for name, client in (("acme", t.acme), ("globex", t.globex))}
    for events in streams.values():
        assert (await next_event(events)).kind is ChangeKind.SNAPSHOT

    for step in range(3):  # interleaved writes to the two sessions called ses_1
        await t.acme.replace_todos("ses_1", [Todo(content=f"acme {step}")])
        await t.globex.replace_todos("ses_1", [Todo(content=f"globex {step}")])
    await t.acme.add_todo("ses_1", Todo(content="acme extra"))

    seen: dict[str, list[WatchEvent]] = {name: [] for name in streams}
    for name, expected in (("acme", 4), ("globex", 3)):
        for _ in range(expected):
            seen[name].append(await next_event(streams[name]))
    assert [e.revision for e in seen["acme"]] == [1, 2, 3, 4]
    assert [e.revision for e in seen["globex"]] == [1, 2, 3]
    for name, received in seen.items():
        assert all(e.session_id == "ses_1" for e in received)
        assert all(todo.startswith(name) for e in received for todo in contents(e.todos)), received

    resumed = t.globex.watch("ses_1", after_revision=1)  # resume: only globex's later changes
    assert [contents((await next_event(resumed)).todos) for _ in range(2)] == [["globex 1"], ["globex 2"]]
    await resumed.aclose()

    await t.acme.remove_session("ses_1")
    assert (await next_event(streams["acme"])).kind is ChangeKind.SESSION_REMOVED
    await t.globex.replace_todos("ses_1", [Todo(content="globex still here")])
    assert contents((await next_event(streams["globex"])).todos) == ["globex still here"]
    for events in streams.values():
        await events.aclose()


async def test_the_feed_of_each_tenant_carries_only_its_own_sessions(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants()
    for client, name in ((t.acme, "acme"), (t.globex, "globex")):
        await client.create_session("ses_1")
        await client.replace_todos("ses_1", [Todo(content=f"{name} before")])
    await t.acme.create_session("acme_only")

    feeds = {
        name: client.watch_changes(include_snapshot=True, include_progress=True)
        for name, client in (("acme", t.acme), ("globex", t.globex))
    }
    snapshots: dict[str, list[FeedEvent]] = {}
    for name, feed in feeds.items():
        snapshots[name] = []
        while (event := await next_event(feed)).kind is not ChangeKind.PROGRESS:
            snapshots[name].append(event)
    assert sorted(e.session_id for e in snapshots["acme"]) == ["acme_only", "ses_1"]
    assert [(e.session_id, contents(e.todos)) for e in snapshots["globex"]] == [("ses_1", ["globex before"])]

    await t.acme.replace_todos("ses_1", [Todo(content="acme after")])
    await t.acme.remove_session("acme_only")
    await t.globex.replace_todos("ses_1", [Todo(content="globex after")])

    async def changes(feed: AsyncIterator[FeedEvent], count: int) -> list[FeedEvent]:
        found: list[FeedEvent] = []
        while len(found) < count:
            if (event := await next_event(feed)).kind is not ChangeKind.PROGRESS:
                found.append(event)
        return found

    acme_changes = await changes(feeds["acme"], 2)
    globex_changes = await changes(feeds["globex"], 1)
    assert [(e.session_id, e.kind) for e in acme_changes] == [
        ("ses_1", ChangeKind.TODOS_REPLACED),
        ("acme_only", ChangeKind.SESSION_REMOVED),
    ]
    assert [(e.session_id, contents(e.todos)) for e in globex_changes] == [("ses_1", ["globex after"])]

    resumed = t.globex.watch_changes(globex_changes[0].cursor)
    await t.acme.replace_todos("ses_1", [Todo(content="acme again")])
    await t.globex.replace_todos("ses_1", [Todo(content="globex again")])
    assert contents((await next_event(resumed)).todos) == ["globex again"]
    filtered = t.globex.watch_changes(include_snapshot=True, session_ids=["acme_only"], include_progress=True)
    assert (await next_event(filtered)).kind is ChangeKind.PROGRESS  # an empty snapshot: nothing of acme's
    for feed in (*feeds.values(), resumed, filtered):
        await feed.aclose()


async def test_session_and_watcher_limits_apply_per_tenant(tenants: Callable[..., Any]) -> None:
    t: Tenants = await tenants(max_sessions_per_tenant=2, max_watchers_per_tenant=1)
    await t.acme.create_session("ses_1")
    await t.acme.create_session("ses_2")

    with pytest.raises(ResourceExhausted):
        await t.acme.create_session("ses_3")
    assert (await t.acme.create_session("ses_2"))[1] is False  # get-or-create of an existing one still works
    await t.globex.create_session("ses_3")
    await t.acme.remove_session("ses_2")
    await t.acme.create_session("ses_3")

    watching = t.acme.watch("ses_1")
    assert (await next_event(watching)).kind is ChangeKind.SNAPSHOT
    with pytest.raises(ResourceExhausted):
        await anext(t.acme.watch("ses_3"))
    globex_watch = t.globex.watch("ses_3")
    assert (await next_event(globex_watch)).kind is ChangeKind.SNAPSHOT
    for events in (watching, globex_watch):
        await events.aclose()


async def test_a_tenant_over_its_memory_share_is_refused_growth_while_others_write_on(
    tenants: Callable[..., Any],
) -> None:
    t: Tenants = await tenants(memory_per_tenant=64 << 10)
    big = [Todo(content="x" * 4000) for _ in range(10)]  # about 42 KB each
    for client in (t.acme, t.globex):
        await client.create_session("ses_1")
        await client.create_session("ses_2")
    await t.acme.replace_todos("ses_1", big)

    with pytest.raises(ResourceExhausted, match="memory per tenant"):
        await t.acme.replace_todos("ses_2", big)
    await t.globex.replace_todos("ses_1", big)  # another tenant's share is its own
    await t.acme.replace_todos("ses_1", big[:2])  # shrinking always goes through, and frees the share
    await t.acme.replace_todos("ses_2", big)
    await t.acme.remove_session("ses_2")
    await t.acme.replace_todos("ses_1", big)


async def test_a_readers_first_read_of_its_global_list_reads_it_empty_and_writes_nothing(
    start: Callable[..., Any], tmp_path: Path
) -> None:
    (tmp_path / "auth.toml").write_text(auth_toml(("acme-reader", "acme", "reader"), ("acme-writer", "acme", "writer")))
    server: RunningServer = await start(auth_file=tmp_path / "auth.toml")
    async with connect(server, "acme-reader") as reader, connect(server, "acme-writer") as writer:
        read = await reader.get_todos(GLOBAL_SESSION_ID)
        watch = reader.watch(GLOBAL_SESSION_ID)
        watched = await next_event(watch)
        await watch.aclose()
        stored_after_reads = await server.store.get(f"acme/{GLOBAL_SESSION_ID}")
        await writer.replace_todos(GLOBAL_SESSION_ID, [Todo(content="shared")])
        written = await reader.get_todos(GLOBAL_SESSION_ID)

    assert (read.todos, read.revision) == ([], 0)
    assert (watched.kind, watched.todos) == (ChangeKind.SNAPSHOT, [])
    assert stored_after_reads is None
    assert contents(written.todos) == ["shared"]


@asynccontextmanager
async def serving(**overrides: Any) -> AsyncIterator[RunningServer]:
    """A server for one part of a test, stopped at its end (also when it fails)."""
    server = await start_server(make_settings(**overrides))
    try:
        yield server
    finally:
        await server.stop()


async def test_a_store_served_with_and_without_an_auth_file_never_shows_a_named_tenant_to_the_default_one(
    auth_file: Path, tmp_path: Path
) -> None:
    """One sqlite file, served first with ``--auth-file`` (acme writes) and then without it: the
    default tenant lists, follows and removes only its own sessions, and acme's are kept."""
    store = f"sqlite:///{tmp_path / 'shared.db'}"
    async with serving(store=store, auth_file=auth_file) as server, connect(server, token("acme", "writer")) as acme:
        await acme.create_session("ses_acme")
        await acme.replace_todos("ses_acme", [Todo(content="acme's plan")])

    async with serving(store=store) as server, TodoClient.connect(server.address) as default:
        await default.create_session("ses_default")
        listed = [session.session_id for session in await default.list_sessions()]
        feed = default.watch_changes(include_snapshot=True, include_progress=True)
        followed = []
        while (event := await next_event(feed)).kind is not ChangeKind.PROGRESS:
            followed.append(event.session_id)
        await feed.aclose()
        removed = await default.remove_all_sessions()

    async with serving(store=store, auth_file=auth_file) as server, connect(server, token("acme", "writer")) as acme:
        kept = contents((await acme.get_todos("ses_acme")).todos)
    assert listed == ["ses_default"]
    assert sorted(followed) == ["ses_default", GLOBAL_SESSION_ID]  # the default tenant's own global list
    assert removed == 1
    assert kept == ["acme's plan"]

"""The mirror's BatchWriter against a fake BatchWrite: atomic batches over an in-memory set of lists.

The fake applies a batch all or nothing and refuses what a server would (a write to a session it
does not have, a write it was told to refuse), naming the write as the server does
(``writeIndex``). The real server and the real OpenCode drive the mirror in
tests/peers/opencode/test_opencode_importer_batches.py and tests/peers/opencode_real/.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
import pytest

from sessiontodo_client import (
    Aborted,
    CreateSessionWrite,
    NotFound,
    PermissionDenied,
    RemoveSessionWrite,
    ReplaceTodosWrite,
    ServiceError,
    Todo,
    Unavailable,
    Unimplemented,
    Write,
    WriteResult,
)
from sessiontodo_opencode.batches import BatchWriter


@dataclass(frozen=True)
class Unit:
    name: str
    writes: tuple[Write, ...]


def copy(session_id: str, *contents: str) -> Unit:
    """A session created with its list, as the mirror's resync writes it."""
    todos = [Todo(content=content) for content in contents]
    return Unit(
        session_id, (CreateSessionWrite(session_id=session_id), ReplaceTodosWrite(session_id=session_id, todos=todos))
    )


def removal(session_id: str) -> Unit:
    return Unit(session_id, (RemoveSessionWrite(session_id=session_id),))


def refused(error: type[ServiceError], index: int | None) -> ServiceError:
    code = {Aborted: grpc.StatusCode.ABORTED, NotFound: grpc.StatusCode.NOT_FOUND}.get(error, grpc.StatusCode.UNKNOWN)
    metadata = {} if index is None else {"writeIndex": str(index)}
    return error(code, f"writes[{index}]: refused", metadata=metadata)


class FakeBatchWrite:
    """``TodoClient.batch_write`` over in-memory lists: each batch atomic; ``refuse`` names sessions whose
    replace is refused (ABORTED, as a stale expected revision would be); ``failures`` are raised first, in turn."""

    def __init__(self, *, refuse: Sequence[str] = (), failures: Sequence[ServiceError] = ()) -> None:
        self.lists: dict[str, list[str]] = {}
        self.refuse = set(refuse)
        self.failures = list(failures)
        self.batches: list[list[Write]] = []
        """Every batch applied."""
        self.applied = 0

    async def __call__(self, writes: Sequence[Write], *, origin: str) -> list[WriteResult]:
        if self.failures:
            raise self.failures.pop(0)
        lists = {session_id: list(todos) for session_id, todos in self.lists.items()}
        results: list[WriteResult] = []
        for index, write in enumerate(writes):
            if isinstance(write, CreateSessionWrite):
                created = write.session_id not in lists
                lists.setdefault(write.session_id, [])
                results.append(WriteResult(revision=0, changed=created))
            elif isinstance(write, RemoveSessionWrite):
                if lists.pop(write.session_id, None) is None:
                    raise refused(NotFound, index)
                results.append(WriteResult(revision=1, changed=True, removed_session_ids=[write.session_id]))
            else:
                assert isinstance(write, ReplaceTodosWrite)
                if write.session_id in self.refuse:
                    raise refused(Aborted, index)
                if write.session_id not in lists:
                    raise refused(NotFound, index)
                lists[write.session_id] = [todo.content for todo in write.todos]
                results.append(WriteResult(revision=1, changed=True))
        self.lists = lists
        self.batches.append(list(writes))
        return results


class Mirror:
    """What the mirror does with a unit's results, and its unary fallback (here: remembered)."""

    def __init__(self) -> None:
        self.written: list[tuple[str, list[WriteResult]]] = []
        self.unary: list[str] = []

    async def note(self, unit: Unit, results: Sequence[WriteResult]) -> None:
        self.written.append((unit.name, list(results)))

    async def fallback(self, unit: Unit) -> None:
        self.unary.append(unit.name)


def writer(fake: FakeBatchWrite, mirror: Mirror, **limits: int) -> BatchWriter[Unit]:
    return BatchWriter(fake, origin="opencode", written=mirror.note, fallback=mirror.fallback, **limits)


async def write_all(batches: BatchWriter[Unit], units: Sequence[Unit]) -> None:
    for unit in units:
        await batches.add(unit)
    await batches.flush()


async def test_units_are_packed_into_as_few_batches_as_the_write_limit_allows() -> None:
    fake, mirror = FakeBatchWrite(), Mirror()

    await write_all(writer(fake, mirror, max_writes=5), [copy(f"s{n}", "a") for n in range(5)])

    assert [len(batch) for batch in fake.batches] == [4, 4, 2]


async def test_a_sessions_create_and_its_list_always_travel_in_the_same_batch() -> None:
    fake, mirror = FakeBatchWrite(), Mirror()

    await write_all(writer(fake, mirror, max_writes=3), [copy(f"s{n}", "a") for n in range(3)])

    assert [[write.session_id for write in batch] for batch in fake.batches] == [
        ["s0", "s0"],
        ["s1", "s1"],
        ["s2", "s2"],
    ]


async def test_the_byte_limit_starts_a_new_batch() -> None:
    fake, mirror = FakeBatchWrite(), Mirror()
    big = "x" * 4000

    await write_all(writer(fake, mirror, max_bytes=10_000), [copy(f"s{n}", big) for n in range(3)])

    assert [len(batch) for batch in fake.batches] == [4, 2]


async def test_each_unit_is_told_its_own_results_in_order() -> None:
    fake, mirror = FakeBatchWrite(), Mirror()
    fake.lists = {"old": ["x"], "s2": []}

    await write_all(writer(fake, mirror), [removal("old"), copy("s1", "a"), copy("s2", "b")])

    assert [(name, [result.changed for result in results]) for name, results in mirror.written] == [
        ("old", [True]),
        ("s1", [True, True]),
        ("s2", [False, True]),
    ]


async def test_a_refused_write_sends_its_session_alone_to_the_fallback_and_the_rest_in_batches() -> None:
    fake, mirror = FakeBatchWrite(refuse=["s2"]), Mirror()
    batches = writer(fake, mirror)

    await write_all(batches, [copy(f"s{n}", f"list {n}") for n in range(5)])

    assert mirror.unary == ["s2"]
    assert fake.lists == {"s0": ["list 0"], "s1": ["list 1"], "s3": ["list 3"], "s4": ["list 4"]}
    assert [name for name, _ in mirror.written] == ["s0", "s1", "s3", "s4"]
    assert batches.batching


async def test_every_write_of_a_chunk_with_refusals_is_applied_once() -> None:
    fake, mirror = FakeBatchWrite(refuse=["s0", "s3", "s4", "s7"]), Mirror()

    await write_all(writer(fake, mirror, max_writes=8), [copy(f"s{n}", f"list {n}") for n in range(8)])

    applied = [write.session_id for batch in fake.batches for write in batch if isinstance(write, ReplaceTodosWrite)]
    assert sorted(applied) == ["s1", "s2", "s5", "s6"]
    assert sorted(mirror.unary) == ["s0", "s3", "s4", "s7"]


async def test_a_session_gone_from_sessiontodo_is_left_to_the_fallback() -> None:
    fake, mirror = FakeBatchWrite(), Mirror()
    fake.lists = {"kept": []}

    await write_all(writer(fake, mirror), [removal("gone"), removal("kept")])

    assert (mirror.unary, fake.lists) == (["gone"], {})


async def test_a_server_without_batches_gets_every_unit_by_unary_calls_from_then_on() -> None:
    missing = Unimplemented(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
    fake, mirror = FakeBatchWrite(failures=[missing]), Mirror()
    batches = writer(fake, mirror, max_writes=2)

    await write_all(batches, [copy("s0"), copy("s1"), copy("s2")])

    assert (mirror.unary, fake.batches, batches.batching) == (["s0", "s1", "s2"], [], False)


async def test_a_batch_refused_as_a_whole_is_written_by_unary_calls_and_the_next_batch_is_sent() -> None:
    fake, mirror = FakeBatchWrite(failures=[refused(PermissionDenied, None)]), Mirror()

    await write_all(writer(fake, mirror, max_writes=2), [copy("s0"), copy("s1")])

    assert (mirror.unary, [name for name, _ in mirror.written]) == (["s0"], ["s1"])


async def test_unavailable_goes_up_to_the_mirror_which_reconnects() -> None:
    fake, mirror = FakeBatchWrite(failures=[Unavailable(grpc.StatusCode.UNAVAILABLE, "down")]), Mirror()

    with pytest.raises(Unavailable):
        await write_all(writer(fake, mirror), [copy("s0")])


def test_a_batch_error_names_its_write() -> None:
    assert refused(Aborted, 17).write_index == 17


def test_an_error_of_no_write_has_no_write_index() -> None:
    assert refused(PermissionDenied, None).write_index is None

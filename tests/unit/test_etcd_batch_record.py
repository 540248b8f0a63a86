"""The etcd store's batch record (``stores/etcd/records.py``): every change of a batch, each list
given back whole from the session's final put and the splices the record keeps."""

from __future__ import annotations

from sessiontodo_server.domain.values import ChangeKind, RemovalReason, SessionInfo, Todo
from sessiontodo_server.stores.etcd.records import (
    IN_BATCH,
    BatchChange,
    Mark,
    Record,
    decode_batch,
    encode_batch,
)

INFO = SessionInfo()


def _version(revision: int, kind: ChangeKind, todos: tuple[Todo, ...], previous: int = IN_BATCH) -> Record:
    return Record("writer.1", revision, kind, "", "batch", previous, INFO, todos)


def _lists(changes: list[BatchChange], finals: dict[str, Record]) -> list[tuple[str, int, tuple[Todo, ...]]]:
    """The changes as the record gives them back: (session, revision, list; () for a removal)."""
    decoded = decode_batch(encode_batch("writer.1", "batch", changes)).decoded(finals)
    return [(sid, v.revision, v.todos if isinstance(v, Record) else ()) for _, (sid, v) in decoded]


def _expected(changes: list[BatchChange]) -> list[tuple[str, int, tuple[Todo, ...]]]:
    return [(sid, v.revision, v.todos if isinstance(v, Record) else ()) for sid, v in changes]


def test_each_version_comes_back_with_its_whole_list_whatever_each_write_did() -> None:
    one, two, three = Todo("1", "one"), Todo("2", "two"), Todo("3", "three")
    last_of_a = _version(4, ChangeKind.TODO_REMOVED, (two,))
    last_of_b = _version(1, ChangeKind.TODOS_REPLACED, (three,))
    changes: list[BatchChange] = [
        ("a", _version(1, ChangeKind.TODO_ADDED, (one,), previous=7)),
        ("b", _version(0, ChangeKind.SESSION_CREATED, (), previous=0)),
        ("a", _version(2, ChangeKind.TODO_ADDED, (two, one))),
        ("a", _version(3, ChangeKind.TODO_UPDATED, (two, Todo("1", "uno")))),
        ("b", last_of_b),
        ("a", last_of_a),
    ]

    assert _lists(changes, {"a": last_of_a, "b": last_of_b}) == _expected(changes)


def test_a_session_removed_and_created_again_in_one_batch_keeps_both_incarnations_lists() -> None:
    final = _version(8, ChangeKind.TODOS_REPLACED, (Todo("1", "new"),))
    changes: list[BatchChange] = [
        ("a", _version(5, ChangeKind.TODOS_REPLACED, (Todo("1", "old"),), previous=9)),
        ("a", Mark("writer.1", 6, RemovalReason.REMOVED, "batch", INFO, 0)),
        ("a", _version(7, ChangeKind.SESSION_CREATED, (), previous=0)),
        ("a", final),
    ]

    assert _lists(changes, {"a": final}) == _expected(changes)


def test_additions_to_one_session_record_none_of_their_todos_the_final_put_holds_them() -> None:
    todos = tuple(Todo(f"t{n}", f"content {n}") for n in range(100))
    versions = [_version(n + 1, ChangeKind.TODO_ADDED, todos[: n + 1]) for n in range(len(todos))]
    changes: list[BatchChange] = [("a", version) for version in versions]

    encoded = encode_batch("writer.1", "batch", changes)

    assert b"content" not in encoded
    assert _lists(changes, {"a": versions[-1]}) == _expected(changes)


def test_one_sessions_versions_are_read_back_without_the_others_lists() -> None:
    mine, theirs = Todo("1", "mine"), Todo("2", "theirs")
    final = _version(2, ChangeKind.TODO_ADDED, (mine, theirs))
    changes: list[BatchChange] = [
        ("a", _version(1, ChangeKind.TODO_ADDED, (mine,), previous=3)),
        ("b", _version(4, ChangeKind.TODO_ADDED, (theirs,), previous=3)),
        ("a", final),
    ]

    decoded = decode_batch(encode_batch("writer.1", "batch", changes)).decoded({"a": final}, only="a")

    assert [(later, sid, v.revision) for later, (sid, v) in decoded] == [(2, "a", 1), (0, "a", 2)]

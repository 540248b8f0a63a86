"""What a change did, in the words the board's "recent changes" show (pure: no server)."""

from __future__ import annotations

import pytest

from sessiontodo_client import ChangeKind, FeedEvent, RemovalReason, Session, Todo, TodoPriority, TodoStatus
from sessiontodo_web.changes import describe, quoted

BEFORE = [Todo(id="a", content="Write docs"), Todo(id="b", content="Ship it", priority=TodoPriority.LOW)]


def event(kind: ChangeKind, todos: list[Todo], todo_id: str = "", **session: object) -> FeedEvent:
    return FeedEvent(
        session_id="ses",
        kind=kind,
        revision=2,
        todo_id=todo_id,
        todos=todos,
        session=Session(session_id="ses", **session),  # type: ignore[arg-type]
    )


def test_an_added_todo_is_named() -> None:
    added = event(ChangeKind.TODO_ADDED, [*BEFORE, Todo(id="c", content="New one")], "c")

    assert describe(added, BEFORE, {}) == 'added "New one"'


def test_a_removed_todo_is_named() -> None:
    assert describe(event(ChangeKind.TODO_REMOVED, BEFORE[1:], "a"), BEFORE, {}) == 'removed "Write docs"'


def test_a_status_change_says_from_what_to_what() -> None:
    done = [BEFORE[0].model_copy(update={"status": TodoStatus.IN_PROGRESS}), BEFORE[1]]

    assert describe(event(ChangeKind.TODO_UPDATED, done, "a"), BEFORE, {}) == (
        'status of "Write docs": pending → in progress'
    )


def test_every_part_of_an_update_is_listed() -> None:
    changed = [BEFORE[0], Todo(id="b", content="Ship it now", priority=TodoPriority.HIGH, metadata={"k": "v"})]

    assert describe(event(ChangeKind.TODO_UPDATED, changed, "b"), BEFORE, {}) == (
        '"Ship it" renamed to "Ship it now"; priority of "Ship it now": low → high; metadata of "Ship it now" changed'
    )


def test_a_replacement_with_the_same_todos_in_another_order_is_a_reorder() -> None:
    assert describe(event(ChangeKind.TODOS_REPLACED, BEFORE[::-1]), BEFORE, {}) == "list reordered"


def test_a_replacement_counts_what_it_added_removed_and_changed() -> None:
    after = [BEFORE[0].model_copy(update={"content": "Write the docs"}), Todo(id="c", content="c")]

    assert describe(event(ChangeKind.TODOS_REPLACED, after), BEFORE, {}) == (
        "list replaced (2 todos: 1 added, 1 removed, 1 changed)"
    )


def test_label_changes_name_each_label() -> None:
    updated = event(ChangeKind.SESSION_UPDATED, BEFORE, labels={"title": "New"})

    assert describe(updated, BEFORE, {"title": "Old", "directory": "/src"}) == 'title set to "New"; directory removed'


@pytest.mark.parametrize(
    ("reason", "words"), [(RemovalReason.REMOVED, "session removed"), (RemovalReason.EXPIRED, "session expired")]
)
def test_a_removal_says_whether_the_session_expired(reason: RemovalReason, words: str) -> None:
    removed = FeedEvent(session_id="ses", kind=ChangeKind.SESSION_REMOVED, revision=3, removal_reason=reason)

    assert describe(removed, BEFORE, {}) == words


def test_long_or_multi_line_text_is_cut_to_one_short_line() -> None:
    assert quoted("a\n" + "b" * 100) == '"a ' + "b" * 57 + '…"'

"""Plans from agents without task graphs keep the graph fields of the todos they continue."""

from __future__ import annotations

from sessiontodo_client import Todo, TodoStatus
from sessiontodo_client.plans import match_todos, with_graph

STORED = [
    Todo(id="a", content="Write the parser", owner="w1", description="LL(1)", active_form="Writing the parser"),
    Todo(id="b", content="Write the tests", blocked_by=["a"]),
    Todo(id="c", content="Write the tests"),
]


def test_a_written_id_matches_the_stored_todo_with_that_id() -> None:
    assert match_todos([("b", "Renamed")], STORED) == [STORED[1]]


def test_a_todo_without_id_matches_the_first_unmatched_todo_of_the_same_content() -> None:
    assert match_todos([("", "Write the tests"), ("", "Write the tests")], STORED) == [STORED[1], STORED[2]]


def test_a_todo_matched_by_id_is_not_matched_again_by_content() -> None:
    assert match_todos([("", "Write the tests"), ("b", "Write the tests")], STORED) == [STORED[2], STORED[1]]


def test_an_unknown_id_or_new_content_matches_nothing() -> None:
    assert match_todos([("zzz", "Write the parser"), ("", "Ship it")], STORED) == [None, None]


def test_a_todo_written_without_graph_fields_keeps_those_of_its_match() -> None:
    written = [Todo(content="Write the parser", status=TodoStatus.COMPLETED), Todo(content="Write the tests")]
    kept = with_graph(written, match_todos([("", t.content) for t in written], STORED))
    assert [(t.id, t.status, t.owner, t.description, t.active_form, t.blocked_by) for t in kept] == [
        ("a", TodoStatus.COMPLETED, "w1", "LL(1)", "Writing the parser", []),
        ("b", TodoStatus.PENDING, "", "", "", ["a"]),
    ]


def test_blockers_no_longer_in_the_list_are_dropped() -> None:
    written = [Todo(content="Write the tests")]
    kept = with_graph(written, match_todos([("", "Write the tests")], STORED))
    assert kept[0].blocked_by == []


def test_graph_fields_the_plan_gives_win() -> None:
    written = [Todo(content="Write the parser", owner="w2")]
    kept = with_graph(written, match_todos([("", "Write the parser")], STORED))
    assert kept[0].owner == "w2"

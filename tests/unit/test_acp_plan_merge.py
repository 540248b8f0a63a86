"""An agent's plan applied onto the current list: the agent's own changes, never an undo of others' writes."""

from __future__ import annotations

from sessiontodo_acp.plan_merge import merge_plan
from sessiontodo_client import Todo, TodoPriority, TodoStatus

DONE = TodoStatus.COMPLETED


def todo(todo_id: str, content: str, status: TodoStatus = TodoStatus.PENDING, **metadata: str) -> Todo:
    return Todo(id=todo_id, content=content, status=status, metadata=metadata)


def entry(content: str, status: TodoStatus = TodoStatus.PENDING) -> Todo:
    """A plan entry as read from the agent: no id."""
    return Todo(content=content, status=status)


def shown(todos: list[Todo]) -> list[tuple[str, str, TodoStatus | int]]:
    return [(t.id, t.content, t.status) for t in todos]


BASE = [todo("a", "A"), todo("b", "B")]


def test_when_nobody_else_wrote_the_result_is_the_plan_with_its_ids() -> None:
    merged = merge_plan(BASE, [entry("A", DONE), entry("B"), entry("C")], BASE)
    assert shown(merged.todos) == [("a", "A", DONE), ("b", "B", TodoStatus.PENDING), ("", "C", TodoStatus.PENDING)]
    assert merged.positions == [0, 1, 2]


def test_a_todo_another_client_added_stays_where_it_was() -> None:
    current = [todo("a", "A"), todo("x", "X"), todo("b", "B")]
    merged = merge_plan(BASE, [entry("A", DONE), entry("B")], current)
    assert shown(merged.todos) == [("a", "A", DONE), ("x", "X", TodoStatus.PENDING), ("b", "B", TodoStatus.PENDING)]


def test_a_field_another_client_changed_is_kept_when_the_agent_left_it_alone() -> None:
    current = [todo("a", "A", DONE), todo("b", "B reworded")]
    merged = merge_plan(BASE, [entry("A"), entry("B", TodoStatus.IN_PROGRESS)], current)
    assert shown(merged.todos) == [("a", "A", DONE), ("b", "B reworded", TodoStatus.IN_PROGRESS)]


def test_the_field_the_agent_changed_wins_over_the_older_value() -> None:
    current = [todo("a", "A", TodoStatus.IN_PROGRESS), todo("b", "B")]
    merged = merge_plan(BASE, [entry("A", DONE), entry("B")], current)
    assert shown(merged.todos)[0] == ("a", "A", DONE)


def test_a_todo_removed_elsewhere_stays_removed_and_has_no_position() -> None:
    merged = merge_plan(BASE, [entry("A"), entry("B", DONE)], [todo("a", "A")])
    assert shown(merged.todos) == [("a", "A", TodoStatus.PENDING)]
    assert merged.positions == [0, None]


def test_a_todo_the_agent_removed_is_removed_and_others_additions_stay() -> None:
    current = [todo("a", "A"), todo("b", "B"), todo("x", "X")]
    merged = merge_plan(BASE, [entry("B")], current)
    assert [t.id for t in merged.todos] == ["b", "x"]


def test_the_agents_new_todo_goes_after_its_predecessor_in_the_plan() -> None:
    current = [todo("x", "X"), todo("a", "A"), todo("b", "B")]
    merged = merge_plan(BASE, [entry("A"), entry("new"), entry("B")], current)
    assert [t.content for t in merged.todos] == ["X", "A", "new", "B"]
    assert merged.positions == [1, 2, 3]


def test_a_reordered_plan_keeps_the_agents_order_and_others_todos_near_their_neighbours() -> None:
    current = [todo("a", "A"), todo("x", "X"), todo("b", "B")]
    merged = merge_plan(BASE, [entry("B"), entry("A")], current)
    assert [t.id for t in merged.todos] == ["b", "a", "x"]


def test_an_entry_with_the_content_of_a_todo_another_client_added_is_that_todo() -> None:
    current = [*BASE, todo("x", "X")]
    merged = merge_plan(BASE, [entry("A"), entry("B"), entry("X", DONE)], current)
    assert shown(merged.todos) == [*shown(BASE), ("x", "X", DONE)]


def test_fields_acp_does_not_carry_and_others_metadata_survive_the_agents_change() -> None:
    current = [
        Todo(id="a", content="A", priority=TodoPriority.HIGH, metadata={"owner": "ci", "acp/_meta": "{}"}),
        todo("b", "B"),
    ]
    plan = [Todo(content="A", status=DONE, metadata={"acp/_meta": '{"k":1}'}), entry("B")]
    merged = merge_plan(BASE, plan, current)
    assert merged.todos[0].priority is TodoPriority.HIGH, "the agent sent the base's priority: the current one stays"
    assert merged.todos[0].metadata == {"owner": "ci", "acp/_meta": '{"k":1}'}


def test_the_stored_plan_takes_the_ids_sessiontodo_gave_the_new_todos() -> None:
    merged = merge_plan(BASE, [entry("A"), entry("new"), entry("B", DONE)], [todo("a", "A")])
    stored = [todo("a", "A"), todo("n-1", "new")]
    assert [t.id for t in merged.stored_plan(stored)] == ["a", "n-1", "b"]


def test_the_task_graph_fields_of_a_matched_todo_are_kept_and_a_blocker_the_agent_removed_is_dropped() -> None:
    current = [
        todo("a", "A"),
        Todo(id="b", content="B", description="story", active_form="Doing B", owner="ci", blocked_by=["a", "c"]),
        todo("c", "C"),
    ]
    base = [todo("a", "A"), todo("b", "B"), todo("c", "C")]
    merged = merge_plan(base, [entry("A", DONE), entry("B")], current)
    kept = merged.todos[1]
    assert (kept.description, kept.active_form, kept.owner, kept.blocked_by) == ("story", "Doing B", "ci", ["a"])

"""Pure conversions between todos and ACP v1 plan entries."""

from __future__ import annotations

import json
from typing import Any

from acp.schema import AgentPlanUpdate, SessionNotification

from sessiontodo_acp import (
    keep_known_ids,
    plan_entry_from_todo,
    plan_notification,
    plan_update_from_todos,
    read_plan_entries,
    read_plan_update,
    same_plan,
)
from sessiontodo_client import Todo, TodoPriority, TodoStatus


def entry_json(todo: Todo) -> dict[str, Any]:
    return plan_entry_from_todo(todo).model_dump(mode="json", by_alias=True, exclude_none=True)


def test_a_todo_becomes_an_entry_with_its_id_in_meta() -> None:
    todo = Todo(id="t-42", content="Write tests", status=TodoStatus.IN_PROGRESS, priority=TodoPriority.HIGH)
    assert entry_json(todo) == {
        "content": "Write tests",
        "status": "in_progress",
        "priority": "high",
        "_meta": {"sessiontodo/todoId": "t-42"},
    }


def test_a_cancelled_todo_is_sent_as_a_visibly_cancelled_completed_entry() -> None:
    todo = Todo(id="t-1", content="Old idea", status=TodoStatus.CANCELLED, priority=TodoPriority.LOW)
    assert entry_json(todo) == {
        "content": "[cancelled] Old idea",
        "status": "completed",
        "priority": "low",
        "_meta": {"sessiontodo/todoId": "t-1", "sessiontodo/todoStatus": "cancelled"},
    }


def test_no_sdk_drops_a_cancelled_entry_because_every_value_is_in_acps_sets() -> None:
    todos = [Todo(id="t-1", content="Old idea", status=TodoStatus.CANCELLED)]
    wire = plan_notification("s", todos)["params"]
    parsed = SessionNotification.model_validate(wire)
    assert isinstance(parsed.update, AgentPlanUpdate)
    assert [entry.content for entry in parsed.update.entries] == ["[cancelled] Old idea"]


def test_a_status_and_priority_a_newer_sessiontodo_added_are_shown_as_pending_and_medium() -> None:
    todo = Todo(id="t-1", content="From the future", status=7, priority=9)
    assert entry_json(todo) == {
        "content": "From the future",
        "status": "pending",
        "priority": "medium",
        "_meta": {"sessiontodo/todoId": "t-1"},
    }


def test_every_status_and_priority_survives_a_round_trip() -> None:
    todos = [
        Todo(id=f"t-{status}-{priority}", content=f"{status} {priority}", status=status, priority=priority)
        for status in TodoStatus
        for priority in TodoPriority
    ]
    assert read_plan_update(plan_update_from_todos(todos)).todos == todos


def test_the_cancelled_prefix_alone_restores_cancelled_when_meta_was_stripped() -> None:
    reading = read_plan_entries([{"content": "[cancelled] Old idea", "status": "completed", "priority": "medium"}])
    assert reading.todos == [Todo(content="Old idea", status=TodoStatus.CANCELLED)]
    assert reading.problems == []


def test_the_cancelled_prefix_on_an_unfinished_entry_is_just_text() -> None:
    reading = read_plan_entries([{"content": "[cancelled] flights", "status": "pending", "priority": "medium"}])
    assert reading.todos == [Todo(content="[cancelled] flights", status=TodoStatus.PENDING)]


def test_a_cancelled_status_from_a_v2_agent_is_kept() -> None:
    reading = read_plan_entries([{"content": "x", "status": "canceled", "priority": "low"}])
    assert reading.todos == [Todo(content="x", status=TodoStatus.CANCELLED, priority=TodoPriority.LOW)]


def test_status_and_priority_spellings_are_matched_loosely() -> None:
    reading = read_plan_entries(
        [
            {"content": "a", "status": "inProgress", "priority": "HIGH"},
            {"content": "b", "status": "IN-PROGRESS", "priority": " Low "},
            {"content": "c", "status": "in progress", "priority": "medium"},
        ]
    )
    assert [(t.status, t.priority) for t in reading.todos] == [
        (TodoStatus.IN_PROGRESS, TodoPriority.HIGH),
        (TodoStatus.IN_PROGRESS, TodoPriority.LOW),
        (TodoStatus.IN_PROGRESS, TodoPriority.MEDIUM),
    ]
    assert reading.problems == []


def test_an_unknown_status_is_stored_as_pending_and_reported() -> None:
    reading = read_plan_entries([{"content": "x", "status": "blocked", "priority": "high"}])
    assert reading.todos == [Todo(content="x", status=TodoStatus.PENDING, priority=TodoPriority.HIGH)]
    assert reading.problems == [
        "entries[0]: status 'blocked' is not one of pending, in_progress, completed; stored as pending"
    ]


def test_an_unknown_or_missing_priority_is_stored_as_medium_and_reported() -> None:
    reading = read_plan_entries([{"content": "x", "status": "pending", "priority": "urgent"}, {"content": "y"}])
    assert [t.priority for t in reading.todos] == [TodoPriority.MEDIUM, TodoPriority.MEDIUM]
    assert len(reading.problems) == 3  # urgent, and y's missing status and priority


def test_entries_without_text_content_are_left_out_and_reported() -> None:
    reading = read_plan_entries(
        [
            {"content": "  ", "status": "pending", "priority": "low"},
            {"status": "pending", "priority": "low"},
            {"content": 7, "status": "pending", "priority": "low"},
            "not an object",
            {"content": "[cancelled] ", "status": "completed", "priority": "low"},
            {"content": "kept", "status": "pending", "priority": "low"},
        ]
    )
    assert [t.content for t in reading.todos] == ["kept"]
    assert len(reading.problems) == 5


def test_entries_that_are_not_a_list_read_as_an_empty_plan() -> None:
    reading = read_plan_entries({"content": "x"})
    assert reading.todos == []
    assert reading.problems == ["entries is dict, not a list; read as empty"]


def test_a_repeated_todo_id_is_kept_only_on_its_first_entry() -> None:
    entries = [
        {"content": "a", "status": "pending", "priority": "low", "_meta": {"sessiontodo/todoId": "same"}},
        {"content": "b", "status": "pending", "priority": "low", "_meta": {"sessiontodo/todoId": "same"}},
    ]
    assert [t.id for t in read_plan_entries(entries).todos] == ["same", ""]


def test_a_non_string_todo_id_is_ignored() -> None:
    entries = [{"content": "a", "status": "pending", "priority": "low", "_meta": {"sessiontodo/todoId": 5}}]
    assert read_plan_entries(entries).todos[0].id == ""


def test_entries_without_ids_keep_the_ids_of_todos_with_the_same_content() -> None:
    current = [Todo(id="t-a", content="a"), Todo(id="t-b", content="b")]
    incoming = [Todo(content="b", status=TodoStatus.COMPLETED), Todo(content="a")]
    assert [t.id for t in keep_known_ids(incoming, current)] == ["t-b", "t-a"]


def test_a_reworded_entry_keeps_the_id_of_the_todo_at_its_position() -> None:
    current = [Todo(id="t-a", content="a"), Todo(id="t-b", content="b")]
    incoming = [Todo(content="a, reworded"), Todo(content="b")]
    assert [t.id for t in keep_known_ids(incoming, current)] == ["t-a", "t-b"]


def test_a_new_entry_gets_no_id_when_its_position_is_taken() -> None:
    current = [Todo(id="t-a", content="a")]
    incoming = [Todo(content="new"), Todo(content="a")]
    assert [t.id for t in keep_known_ids(incoming, current)] == ["", "t-a"]


def test_an_id_given_by_the_agent_is_never_given_to_another_entry() -> None:
    current = [Todo(id="t-a", content="a")]
    incoming = [Todo(content="a"), Todo(id="t-a", content="moved")]
    assert [t.id for t in keep_known_ids(incoming, current)] == ["", "t-a"]


def test_same_plan_ignores_ids_but_not_status() -> None:
    assert same_plan([Todo(id="x", content="a")], [Todo(content="a")])
    assert not same_plan([Todo(content="a")], [Todo(content="a", status=TodoStatus.COMPLETED)])


def test_a_plan_notification_is_a_json_rpc_session_update_without_nulls() -> None:
    message = plan_notification("s-1", [Todo(id="t", content="a")])
    assert message == {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s-1",
            "update": {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": "a", "status": "pending", "priority": "medium", "_meta": {"sessiontodo/todoId": "t"}}
                ],
            },
        },
    }


def test_an_agents_entry_and_plan_meta_round_trip_through_todo_metadata() -> None:
    entries = [
        {
            "content": "Estimate",
            "status": "pending",
            "priority": "high",
            "_meta": {"example.com/estimate": {"hours": 3}, "todoId": "agent-own", "sessiontodo/todoId": "t-1"},
        }
    ]
    plan_meta = {"example.com/planner": "v2", "traceparent": "00-abc-def-01"}

    (todo,) = read_plan_entries(entries, plan_meta).todos

    assert todo.id == "t-1", "only the namespaced key is read as the id"
    assert json.loads(todo.metadata["acp/_meta"]) == {"example.com/estimate": {"hours": 3}, "todoId": "agent-own"}
    assert json.loads(todo.metadata["acp/plan._meta"]) == plan_meta
    update = plan_update_from_todos([todo]).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert update["_meta"] == plan_meta
    assert update["entries"][0]["_meta"] == {
        "example.com/estimate": {"hours": 3},
        "todoId": "agent-own",
        "sessiontodo/todoId": "t-1",
    }


def test_an_agents_own_todo_id_key_is_never_taken_as_sessiontodos_id() -> None:
    entries = [{"content": "a", "status": "pending", "priority": "low", "_meta": {"todoId": "agent-42"}}]
    (todo,) = read_plan_entries(entries).todos
    assert todo.id == ""
    assert json.loads(todo.metadata["acp/_meta"]) == {"todoId": "agent-42"}


def test_metadata_other_backends_stored_on_a_todo_survives_the_agents_next_plan() -> None:
    current = [Todo(id="t-a", content="a", metadata={"opencode/extra": "x", "acp/_meta": "{}"})]
    (kept,) = keep_known_ids([Todo(content="a", metadata={"acp/_meta": '{"k":1}'})], current)
    assert kept.metadata == {"opencode/extra": "x", "acp/_meta": '{"k":1}'}


def test_stored_meta_that_is_not_a_json_object_is_left_out_of_the_entry() -> None:
    todo = Todo(id="t", content="c", metadata={"acp/_meta": "not json", "acp/plan._meta": "[1]"})
    update = plan_update_from_todos([todo]).model_dump(mode="json", by_alias=True, exclude_none=True)
    assert update["entries"][0]["_meta"] == {"sessiontodo/todoId": "t"}
    assert "_meta" not in update

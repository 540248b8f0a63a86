"""Pure conversions of ACP's next plan protocol (``plan_update`` / ``plan_removed``, several plans per session)."""

from __future__ import annotations

from typing import Any

import pytest
from acp.schema import AgentPlanContentUpdate, AgentPlanRemovedUpdate

from sessiontodo_acp.plan_operations import (
    MAIN_PLAN_ID,
    PLAN_TYPE_KEY,
    EditorPlans,
    plan_removed,
    plan_session_id,
    plan_update,
    read_plan_content,
    session_update,
)
from sessiontodo_client import Todo, TodoPriority, TodoStatus
from sessiontodo_server.domain.todos import SESSION_ID_PATTERN

V1_PLAIN = EditorPlans()
V1_PLAN_UPDATES = EditorPlans(plan_updates=True)
V2 = EditorPlans(plan_updates=True, cancelled=True, plain_plans=False)


def test_an_editor_without_the_plan_capability_takes_plain_plans_only() -> None:
    assert EditorPlans.negotiated({"fs": {}}, 1) == V1_PLAIN


def test_an_editor_that_advertises_the_plan_capability_takes_plan_updates_with_the_cancelled_marker() -> None:
    assert EditorPlans.negotiated({"plan": {}}, 1) == V1_PLAN_UPDATES


def test_a_v2_editor_takes_plan_updates_only_and_cancelled_as_itself() -> None:
    assert EditorPlans.negotiated({}, 2) == V2


def test_a_null_plan_capability_advertises_nothing() -> None:
    assert EditorPlans.negotiated({"plan": None}, 1) == V1_PLAIN


def test_the_main_plan_is_the_acp_sessions_own_list() -> None:
    assert plan_session_id("ses_1", MAIN_PLAN_ID) == "ses_1"


@pytest.mark.parametrize("plan_id", ["p1", "design doc / v2", "é" * 300])
def test_another_plan_is_a_child_session_whose_id_sessiontodo_accepts(plan_id: str) -> None:
    child = plan_session_id("ses_1", plan_id)
    assert (child.startswith("ses_1:plan:"), bool(SESSION_ID_PATTERN.fullmatch(child))) == (True, True)


def test_two_plan_ids_get_two_sessions() -> None:
    assert plan_session_id("ses_1", "a") != plan_session_id("ses_1", "b")


def test_an_items_plan_is_read_as_its_entries() -> None:
    content = read_plan_content(
        {"type": "items", "planId": "p1", "entries": [{"content": "x", "status": "cancelled", "priority": "low"}]}
    )
    assert (content.plan_id, [(t.content, t.status) for t in content.reading.todos]) == (
        "p1",
        [("x", TodoStatus.CANCELLED)],
    )


@pytest.mark.parametrize(("kind", "field"), [("markdown", "content"), ("file", "uri")])
def test_a_markdown_or_file_plan_is_one_todo_that_knows_its_type(kind: str, field: str) -> None:
    content = read_plan_content({"type": kind, "planId": "p1", field: "## Steps"})
    assert content.reading.todos == [Todo(content="## Steps", metadata={PLAN_TYPE_KEY: kind})]


@pytest.mark.parametrize(
    ("plan", "refused"),
    [
        ({"type": "items", "entries": []}, "plan_update without a planId"),
        ({"type": "markdown", "planId": "p1"}, "a markdown plan without its content"),
        ({"type": "_diagram", "planId": "p1"}, "plan type '_diagram' is not one of items, markdown, file"),
        ("not a plan", "plan_update without a planId"),
    ],
    ids=["no-plan-id", "markdown-without-content", "unknown-type", "not-an-object"],
)
def test_a_plan_that_cannot_be_stored_says_why(plan: Any, refused: str) -> None:
    assert read_plan_content(plan).refused == refused


CANCELLED = Todo(id="t1", content="Old idea", status=TodoStatus.CANCELLED, priority=TodoPriority.LOW)


def test_a_v2_editor_is_shown_cancelled_as_itself() -> None:
    entry = plan_update("p1", [CANCELLED], V2)["plan"]["entries"][0]
    assert entry == {
        "content": "Old idea",
        "status": "cancelled",
        "priority": "low",
        "_meta": {"sessiontodo/todoId": "t1"},
    }


def test_a_v1_editor_taking_plan_updates_is_shown_cancelled_with_todays_marker() -> None:
    entry = plan_update("p1", [CANCELLED], V1_PLAN_UPDATES)["plan"]["entries"][0]
    assert (entry["content"], entry["status"]) == ("[cancelled] Old idea", "completed")


def test_a_v1_plan_update_is_valid_for_the_python_sdks_unstable_schema() -> None:
    update = plan_update("p1", [CANCELLED, Todo(id="t2", content="Next")], V1_PLAN_UPDATES)
    parsed = AgentPlanContentUpdate.model_validate(update)
    assert [entry.content for entry in parsed.plan.entries] == ["[cancelled] Old idea", "Next"]


@pytest.mark.parametrize(("kind", "field"), [("markdown", "content"), ("file", "uri")])
def test_a_markdown_or_file_plan_goes_back_in_its_own_form(kind: str, field: str) -> None:
    stored = [Todo(id="t1", content="file:///plan.md", metadata={PLAN_TYPE_KEY: kind})]
    assert plan_update("p1", stored, V2) == {
        "sessionUpdate": "plan_update",
        "plan": {"type": kind, "planId": "p1", field: "file:///plan.md"},
    }


def test_a_plan_removal_is_valid_for_the_python_sdks_unstable_schema() -> None:
    assert AgentPlanRemovedUpdate.model_validate(plan_removed("p1")).plan_id == "p1"


def test_a_session_update_notification_wraps_the_update() -> None:
    assert session_update("ses_1", plan_removed("p1")) == {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "ses_1", "update": {"sessionUpdate": "plan_removed", "planId": "p1"}},
    }

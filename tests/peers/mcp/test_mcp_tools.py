"""The MCP face of a list without I/O: argument checks and the reasons of tool errors."""

from __future__ import annotations

import grpc
import pytest

from sessiontodo_client import Aborted, InvalidArgument, ServiceError
from sessiontodo_mcp.tools import TODO_UPDATE, TODO_WRITE, ToolFailure, check_arguments, failure_text, resource_uri


def test_a_fitting_list_passes_the_check() -> None:
    check_arguments(TODO_WRITE, {"todos": [{"id": "a", "content": "x", "status": "pending", "priority": "low"}]})


def test_a_bad_value_is_named_by_its_path_in_the_arguments() -> None:
    with pytest.raises(ToolFailure, match=r"^invalid: todos\[1\]\.priority: 'urgent' is not one of"):
        check_arguments(
            TODO_WRITE,
            {
                "todos": [
                    {"content": "x", "status": "pending"},
                    {"content": "y", "status": "pending", "priority": "urgent"},
                ]
            },
        )


def test_a_missing_argument_is_invalid() -> None:
    with pytest.raises(ToolFailure, match=r"^invalid: 'id' is a required property$"):
        check_arguments(TODO_UPDATE, {"status": "completed"})


def test_a_negative_expected_revision_is_invalid() -> None:
    with pytest.raises(ToolFailure, match=r"^invalid: expected_revision: -1 is less than the minimum of 0$"):
        check_arguments(TODO_UPDATE, {"id": "a", "status": "completed", "expected_revision": -1})


def test_sessiontodos_field_violations_are_the_reason_of_an_invalid_error() -> None:
    error = InvalidArgument(
        grpc.StatusCode.INVALID_ARGUMENT, "bad", violations=[("todos[0].content", "must not be empty")]
    )
    assert failure_text(error) == "invalid: todos[0].content: must not be empty"


def test_a_revision_mismatch_is_a_conflict_that_says_how_to_recover() -> None:
    error = Aborted(grpc.StatusCode.ABORTED, "session 's' is at revision 4, not 3")
    assert failure_text(error) == (
        "conflict: session 's' is at revision 4, not 3; read the list again (todo_read) and retry with its revision"
    )


def test_an_unexpected_code_is_named_in_words() -> None:
    assert failure_text(ServiceError(grpc.StatusCode.INTERNAL, "boom")) == "internal: boom"


def test_a_session_id_is_percent_encoded_in_its_resource_uri() -> None:
    assert resource_uri("tenant:a/b c") == "sessiontodo://sessions/tenant%3Aa%2Fb%20c/todos"

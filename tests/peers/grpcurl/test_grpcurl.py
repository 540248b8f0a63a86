"""The real grpcurl binary against a real server process: what a user without a client library sees.

Every command here is in the cookbook (docs/grpcurl.md). grpcurl prints one pretty-printed JSON
object per message, each closed by a ``}`` alone on its line; errors go to stderr with the status
code's name and the google.rpc details, and the exit code is 64 + the status code.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from types import TracebackType
from typing import Any

import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from tests.support import GRPCURL, ROOT, ServerProcess

pytestmark = pytest.mark.process

SERVICE = "sessiontodo.v1.TodoService"
HEALTH_CHECK = "grpc.health.v1.Health/Check"
# grpcurl exits with 64 + the gRPC status code when the call fails.
EXIT_INVALID_ARGUMENT, EXIT_NOT_FOUND, EXIT_ABORTED = 64 + 3, 64 + 5, 64 + 10
CALL_TIMEOUT = 30.0
MESSAGE_TIMEOUT = 10.0


@pytest.fixture
def address() -> Iterator[str]:
    """A server process as ``make run ARGS="--store memory://"`` starts it, on a free port."""
    with ServerProcess("--store", "memory://") as server:
        yield server.address
        server.stop()


def grpcurl(*args: str, request: dict[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """Run grpcurl with plaintext; a request is sent as JSON on stdin (``-d @``)."""
    data = ["-d", "@"] if request is not None else []
    return subprocess.run(
        [str(GRPCURL), "-plaintext", *data, *args],
        input=json.dumps(request) if request is not None else None,
        capture_output=True,
        text=True,
        timeout=CALL_TIMEOUT,
        cwd=ROOT,
    )


def call(address: str, method: str, request: dict[str, Any] | None = None) -> dict[str, Any]:
    """A successful unary call's response, parsed."""
    result = grpcurl(address, f"{SERVICE}/{method}", request=request or {})
    assert result.returncode == 0, result.stderr
    response: dict[str, Any] = json.loads(result.stdout)
    return response


def fail(address: str, method: str, request: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """A call that must fail: its result, for the exit code and the printed error."""
    result = grpcurl(address, f"{SERVICE}/{method}", request=request)
    assert result.returncode != 0, result.stdout
    return result


def error_details(stderr: str) -> list[dict[str, Any]]:
    """The google.rpc details grpcurl prints as numbered JSON lines under ``Details:``."""
    return [json.loads(line.split("\t", 1)[1]) for line in stderr.splitlines() if "\t{" in line]


class WatchStream:
    """``grpcurl ... WatchTodos`` (or another streaming rpc) left running; messages are read one
    by one with a bound."""

    def __init__(self, address: str, request: dict[str, Any], method: str = "WatchTodos") -> None:
        self._process = subprocess.Popen(
            [str(GRPCURL), "-plaintext", "-d", "@", address, f"{SERVICE}/{method}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps(request))
        self._process.stdin.close()
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_lines, daemon=True)
        self._reader.start()

    def _read_lines(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def next_message(self, timeout: float = MESSAGE_TIMEOUT) -> dict[str, Any]:
        """The next streamed message; fails if none is complete within ``timeout`` seconds."""
        lines: list[str] = []
        while True:
            try:
                line = self._lines.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no message within {timeout}s; partial output: {''.join(lines)!r}") from None
            if line is None:
                raise AssertionError(f"grpcurl ended: {''.join(lines)}{self._stderr()}")
            lines.append(line)
            if line.rstrip("\n") == "}":
                message: dict[str, Any] = json.loads("".join(lines))
                return message

    def _stderr(self) -> str:
        self._process.wait(CALL_TIMEOUT)
        assert self._process.stderr is not None
        return self._process.stderr.read()

    def __enter__(self) -> WatchStream:
        return self

    def __exit__(self, *exc_info: type[BaseException] | BaseException | TracebackType | None) -> None:
        self._process.kill()
        self._process.wait(CALL_TIMEOUT)
        self._reader.join(CALL_TIMEOUT)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()


def contents(todos: list[dict[str, Any]]) -> list[str]:
    return [todo["content"] for todo in todos]


# Discovery through reflection


def test_list_shows_the_todo_service_with_health_and_reflection(address: str) -> None:
    result = grpcurl(address, "list")

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        SERVICE,
    ]


def test_listing_the_service_shows_every_rpc_of_the_proto(address: str) -> None:
    result = grpcurl(address, "list", SERVICE)

    assert result.returncode == 0, result.stderr
    rpcs = pb.DESCRIPTOR.services_by_name["TodoService"].methods
    assert sorted(result.stdout.split()) == sorted(f"{SERVICE}.{rpc.name}" for rpc in rpcs)


def test_describe_shows_the_service_with_watch_todos_as_a_server_stream(address: str) -> None:
    result = grpcurl(address, "describe", SERVICE)

    assert result.returncode == 0, result.stderr
    assert f"{SERVICE} is a service:" in result.stdout
    assert (
        "rpc WatchTodos ( .sessiontodo.v1.WatchTodosRequest ) returns ( stream .sessiontodo.v1.WatchTodosResponse );"
        in result.stdout
    )


def test_describe_a_message_shows_its_fields_and_optional_presence(address: str) -> None:
    result = grpcurl(address, "describe", "sessiontodo.v1.AddTodoRequest")

    assert result.returncode == 0, result.stderr
    assert "optional uint64 expected_revision = 4;" in result.stdout
    assert "string request_id = 5;" in result.stdout


def test_describe_a_method_through_reflection(address: str) -> None:
    result = grpcurl(address, "describe", f"{SERVICE}.AddTodo")

    assert result.returncode == 0, result.stderr
    assert f"{SERVICE}.AddTodo is a method:" in result.stdout
    assert (
        "rpc AddTodo ( .sessiontodo.v1.AddTodoRequest ) returns ( .sessiontodo.v1.AddTodoResponse );" in result.stdout
    )


def test_describe_from_the_proto_file_shows_the_documented_contract() -> None:
    result = grpcurl(
        "-import-path",
        "protos",
        "-proto",
        "sessiontodo/v1/todo_service.proto",
        "describe",
        f"{SERVICE}.WatchTodos",
    )

    assert result.returncode == 0, result.stderr
    assert f"{SERVICE}.WatchTodos is a method:" in result.stdout
    assert "// Streams one session's list: a snapshot, then every change, in order." in result.stdout


# One JSON call of every unary rpc


def test_create_session_creates_the_named_session(address: str) -> None:
    response = call(address, "CreateSession", {"session_id": "demo", "labels": {"title": "Demo"}, "idle_ttl": "3600s"})

    session = response["session"]
    assert response["created"] is True
    assert session["created_at"] == session["updated_at"]
    assert session["created_at"].endswith("Z")
    assert {key: session[key] for key in ("session_id", "labels", "idle_ttl")} == {
        "session_id": "demo",
        "labels": {"title": "Demo"},
        "idle_ttl": "3600s",
    }


def test_update_session_sets_and_removes_labels_and_get_session_reads_them(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo", "labels": {"title": "Demo", "draft": "yes"}})

    updated = call(
        address, "UpdateSession", {"session_id": "demo", "labels": {"title": "Final"}, "remove_label_keys": ["draft"]}
    )

    assert updated["changed"] is True
    assert updated["session"]["revision"] == "1"
    assert call(address, "GetSession", {"session_id": "demo"})["session"]["labels"] == {"title": "Final"}


def test_batch_get_todos_reads_several_lists_and_names_the_missing(address: str) -> None:
    for session_id in ("a", "b"):
        call(address, "CreateSession", {"session_id": session_id})
        call(address, "AddTodo", {"session_id": session_id, "todo": {"content": f"{session_id} task"}})

    response = call(address, "BatchGetTodos", {"session_ids": ["b", "ghost", "a"]})

    assert [(s["session"]["session_id"], s["todos"][0]["content"]) for s in response["sessions"]] == [
        ("b", "b task"),
        ("a", "a task"),
    ]
    assert response["missing_session_ids"] == ["ghost"]


def test_todo_metadata_round_trips_untouched(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    metadata = {"example.com/estimate": "3", "acp._meta": '{"nested": [1, 2]}'}

    call(address, "ReplaceTodos", {"session_id": "demo", "todos": [{"id": "t", "content": "x", "metadata": metadata}]})

    assert call(address, "GetTodos", {"session_id": "demo"})["todos"][0]["metadata"] == metadata


def test_replace_todos_stores_the_list_with_generated_ids_and_enum_names(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})

    response = call(
        address,
        "ReplaceTodos",
        {
            "session_id": "demo",
            "todos": [
                {"content": "write tests", "status": "TODO_STATUS_IN_PROGRESS", "priority": "TODO_PRIORITY_HIGH"},
                {"id": "docs", "content": "write docs"},
            ],
        },
    )

    first, second = response["todos"]
    assert first["id"]
    assert first["status"] == "TODO_STATUS_IN_PROGRESS"
    assert first["priority"] == "TODO_PRIORITY_HIGH"
    assert second == {
        "id": "docs",
        "content": "write docs",
        "status": "TODO_STATUS_PENDING",
        "priority": "TODO_PRIORITY_MEDIUM",
    }
    assert response["revision"] == "1"  # uint64 is a string in proto JSON


def test_add_todo_inserts_at_the_given_index(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "second"}})

    response = call(address, "AddTodo", {"session_id": "demo", "todo": {"id": "t1", "content": "first"}, "index": 0})

    assert response["todo"]["id"] == "t1"
    assert response.get("index", 0) == 0
    assert response["revision"] == "2"


def test_update_todo_changes_only_the_fields_it_sets(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"id": "t1", "content": "ship it"}})

    response = call(address, "UpdateTodo", {"session_id": "demo", "todo_id": "t1", "status": "TODO_STATUS_COMPLETED"})

    assert response["todo"] == {
        "id": "t1",
        "content": "ship it",
        "status": "TODO_STATUS_COMPLETED",
        "priority": "TODO_PRIORITY_MEDIUM",
    }
    assert response["changed"] is True


def test_get_todos_reads_the_list_in_order_with_its_revision(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "ReplaceTodos", {"session_id": "demo", "todos": [{"content": "a"}, {"content": "b"}]})

    response = call(address, "GetTodos", {"session_id": "demo"})

    assert contents(response["todos"]) == ["a", "b"]
    assert response["revision"] == "1"


def test_list_sessions_pages_through_sessions_in_id_order(address: str) -> None:
    for session_id in ("c", "a", "b"):
        call(address, "CreateSession", {"session_id": session_id})

    first = call(address, "ListSessions", {"page_size": 2})
    second = call(address, "ListSessions", {"page_size": 2, "page_token": first["next_page_token"]})

    assert [s["session_id"] for s in first["sessions"]] == ["a", "b"]
    assert [s["session_id"] for s in second["sessions"]] == ["c"]
    assert "next_page_token" not in second


def test_remove_todo_removes_one_todo(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "ReplaceTodos", {"session_id": "demo", "todos": [{"id": "a", "content": "a"}, {"content": "b"}]})

    response = call(address, "RemoveTodo", {"session_id": "demo", "todo_id": "a"})

    assert response == {"revision": "2"}
    assert contents(call(address, "GetTodos", {"session_id": "demo"})["todos"]) == ["b"]


def test_remove_session_removes_the_session_and_its_children(address: str) -> None:
    call(address, "CreateSession", {"session_id": "parent"})
    call(address, "CreateSession", {"session_id": "child", "parent_id": "parent"})

    response = call(address, "RemoveSession", {"session_id": "parent"})

    assert response["existed"] is True
    assert sorted(response["removed_session_ids"]) == ["child", "parent"]


def test_remove_all_sessions_reports_how_many_it_removed(address: str) -> None:
    call(address, "CreateSession", {"session_id": "a"})
    call(address, "CreateSession", {"session_id": "b"})

    response = call(address, "RemoveAllSessions")

    assert response == {"removed_count": 2}


# The watch stream


def test_watch_todos_streams_a_snapshot_and_then_each_change(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "before"}})

    with WatchStream(address, {"session_id": "demo"}) as stream:
        snapshot = stream.next_message()
        added = call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "after"}})
        change = stream.next_message()

    assert snapshot["kind"] == "CHANGE_KIND_SNAPSHOT"
    assert snapshot["revision"] == "1"
    assert contents(snapshot["todos"]) == ["before"]
    assert change["kind"] == "CHANGE_KIND_TODO_ADDED"
    assert change["revision"] == "2"
    assert change["todo_id"] == added["todo"]["id"]
    assert contents(change["todos"]) == ["before", "after"]
    assert change["session_id"] == "demo"


def test_watch_todos_after_a_revision_streams_only_later_changes(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "seen"}})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "missed"}})

    with WatchStream(address, {"session_id": "demo", "after_revision": "1"}) as stream:
        missed = stream.next_message()

    assert missed["kind"] == "CHANGE_KIND_TODO_ADDED"
    assert missed["revision"] == "2"
    assert contents(missed["todos"]) == ["seen", "missed"]


def test_watch_todos_ends_with_session_removed_when_the_session_goes(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})

    with WatchStream(address, {"session_id": "demo"}) as stream:
        stream.next_message()
        call(address, "RemoveSession", {"session_id": "demo"})
        final = stream.next_message()

    assert final["kind"] == "CHANGE_KIND_SESSION_REMOVED"


# Health


def test_health_check_of_the_whole_server_is_serving(address: str) -> None:
    result = grpcurl(address, HEALTH_CHECK)

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"status": "SERVING"}


def test_health_check_of_the_todo_service_is_serving(address: str) -> None:
    result = grpcurl(address, HEALTH_CHECK, request={"service": SERVICE})

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"status": "SERVING"}


# Errors, printed readably


def test_invalid_input_prints_invalid_argument_with_the_violated_field(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})

    result = fail(address, "ReplaceTodos", {"session_id": "demo", "todos": [{"content": ""}]})

    assert result.returncode == EXIT_INVALID_ARGUMENT
    assert "Code: InvalidArgument" in result.stderr
    bad_request, error_info = error_details(result.stderr)
    assert bad_request["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert [v["field"] for v in bad_request["field_violations"]] == ["todos[0].content"]
    assert error_info["reason"] == "INVALID_ARGUMENT"


def test_an_unknown_session_prints_not_found_with_the_session_id(address: str) -> None:
    result = fail(address, "GetTodos", {"session_id": "nobody"})

    assert result.returncode == EXIT_NOT_FOUND
    assert "Code: NotFound" in result.stderr
    [error_info] = error_details(result.stderr)
    assert error_info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert error_info["domain"] == "sessiontodo.v1"
    assert error_info["reason"] == "SESSION_NOT_FOUND"
    assert error_info["metadata"] == {"sessionId": "nobody"}


def test_an_empty_session_id_prints_invalid_argument(address: str) -> None:
    result = fail(address, "GetTodos", {})

    assert result.returncode == EXIT_INVALID_ARGUMENT
    bad_request, _ = error_details(result.stderr)
    assert bad_request["field_violations"] == [{"field": "session_id", "description": "is required"}]


def test_a_stale_expected_revision_prints_aborted_with_both_revisions(address: str) -> None:
    call(address, "CreateSession", {"session_id": "demo"})
    call(address, "AddTodo", {"session_id": "demo", "todo": {"content": "a"}})

    result = fail(address, "AddTodo", {"session_id": "demo", "todo": {"content": "b"}, "expected_revision": "0"})

    assert result.returncode == EXIT_ABORTED
    assert "Code: Aborted" in result.stderr
    [error_info] = error_details(result.stderr)
    assert error_info["reason"] == "REVISION_MISMATCH"
    assert error_info["metadata"] == {"sessionId": "demo", "expectedRevision": "0", "actualRevision": "1"}


def test_watch_changes_streams_a_snapshot_then_every_session_with_cursors(address: str) -> None:
    call(address, "CreateSession", {"session_id": "before"})

    with WatchStream(address, {"include_snapshot": True}, method="WatchChanges") as feed:
        snapshot = [feed.next_message(), feed.next_message()]
        bookmark = feed.next_message()
        call(address, "CreateSession", {"session_id": "after", "origin": "grpcurl"})
        created = feed.next_message()

    assert sorted(m["session_id"] for m in snapshot) == ["before", "sessiontodo:global"]
    assert {m["kind"] for m in snapshot} == {"CHANGE_KIND_SNAPSHOT"}
    assert bookmark["kind"] == "CHANGE_KIND_PROGRESS"
    assert bookmark["cursor"]
    assert (created["kind"], created["session_id"], created["origin"]) == (
        "CHANGE_KIND_SESSION_CREATED",
        "after",
        "grpcurl",
    )
    with WatchStream(address, {"after_cursor": bookmark["cursor"]}, method="WatchChanges") as resumed:
        assert resumed.next_message()["cursor"] == created["cursor"]

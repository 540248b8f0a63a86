"""sessiontodoctl's calls through ``grpc_testing.channel``: the test plays the server, so it sees the exact
requests the CLI sends and decides each response and error, then checks what the CLI rendered."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc
import grpc_testing
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2
from grpc_status import rpc_status
from rich.console import Console
from typer.testing import CliRunner, Result

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client.resume import ACCEPTED_HEADER
from sessiontodo_ctl.cli import State, app

SERVICE = pb.DESCRIPTOR.services_by_name["TodoService"]
HEALTH = health_pb2.DESCRIPTOR.services_by_name["Health"]
PENDING, MEDIUM = pb.TODO_STATUS_PENDING, pb.TODO_PRIORITY_MEDIUM  # the server always sets both


def method(name: str) -> Any:
    return SERVICE.methods_by_name[name]


class FakeServer:
    """A ``grpc_testing`` channel, and the CLI run against it on a worker thread."""

    def __init__(self) -> None:
        self.channel = grpc_testing.channel([SERVICE, HEALTH], grpc_testing.strict_real_time())
        self._executor = ThreadPoolExecutor(1)

    def run(self, *args: str, console: Console | None = None) -> Future[Result]:
        state = State(channel=self.channel) if console is None else State(channel=self.channel, console=console)
        runner = CliRunner()
        return self._executor.submit(lambda: runner.invoke(app, list(args), obj=state))

    def answer(self, name: str, response: Any) -> tuple[Any, Any]:
        """Take the CLI's next call of ``name``, answer OK; returns (metadata, request)."""
        metadata, request, rpc = self.channel.take_unary_unary(method(name))
        rpc.terminate(response, (), grpc.StatusCode.OK, "")
        return metadata, request

    def fail(self, name: str, status: status_pb2.Status) -> Any:
        """Take the CLI's next call of ``name`` and fail it with ``status`` and its details."""
        _, request, rpc = self.channel.take_unary_unary(method(name))
        error = rpc_status.to_status(status)
        rpc.terminate(None, error.trailing_metadata, error.code, error.details)
        return request

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.close()


def finished(run: Future[Result]) -> Result:
    result = run.result(timeout=30)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def test_get_sends_the_session_id_and_renders_the_list_with_its_revision(server: FakeServer) -> None:
    run = server.run("get", "ses_1")
    _, request = server.answer(
        "GetTodos",
        pb.GetTodosResponse(
            revision=7,
            todos=[
                pb.Todo(id="parse", content="Write the parser", status=pb.TODO_STATUS_COMPLETED, priority=MEDIUM),
                pb.Todo(id="tests", content="Write tests", status=pb.TODO_STATUS_IN_PROGRESS, priority=MEDIUM),
            ],
        ),
    )
    assert request == pb.GetTodosRequest(session_id="ses_1")
    result = finished(run)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [  # not a terminal: plain columns, each todo's position first
        "ses_1",
        "#       ID     PRIORITY  CONTENT",
        "0  [x]  parse  medium    Write the parser",
        "1  [>]  tests  medium    Write tests",
        "revision 7, 1/2 completed",
    ]


def test_json_output_is_one_parseable_object(server: FakeServer) -> None:
    run = server.run("--output", "json", "get", "ses_1")
    server.answer(
        "GetTodos",
        pb.GetTodosResponse(revision=2, todos=[pb.Todo(id="a", content="A", status=PENDING, priority=MEDIUM)]),
    )
    result = finished(run)
    assert json.loads(result.stdout) == {
        "revision": 2,
        "todos": [
            {
                "id": "a",
                "content": "A",
                "status": "pending",
                "priority": "medium",
                "metadata": {},
                "description": "",
                "active_form": "",
                "owner": "",
                "blocked_by": [],
                "blocks": [],
                "lease_expires_at": None,
                "lease_duration": None,
            }
        ],
    }


def test_a_status_and_priority_a_newer_server_added_show_as_unknown_and_as_numbers_in_json(server: FakeServer) -> None:
    newer = pb.Todo(id="a", content="A", status=7, priority=9)  # type: ignore[arg-type]
    table, as_json = server.run("get", "s"), server.run("-o", "json", "get", "s")
    for _ in range(2):
        server.answer("GetTodos", pb.GetTodosResponse(revision=2, todos=[newer]))
    assert "0  [?]  a   9" in finished(table).stdout
    (todo,) = json.loads(finished(as_json).stdout)["todos"]
    assert (todo["status"], todo["priority"]) == (7, 9)


def test_a_not_found_error_is_rendered_on_stderr_with_exit_status_1(server: FakeServer) -> None:
    run = server.run("get", "missing")
    info = error_details_pb2.ErrorInfo(reason="SESSION_NOT_FOUND", domain="sessiontodo.v1")
    status = status_pb2.Status(code=code_pb2.NOT_FOUND, message="session not found: 'missing'")
    status.details.add().Pack(info)
    server.fail("GetTodos", status)
    result = finished(run)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Error: NOT_FOUND: session not found: 'missing'" in result.stderr


def test_field_violations_are_listed_one_per_line_and_in_json(server: FakeServer, tmp_path: Any) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps([{"content": ""}, {"id": "x", "content": "a"}, {"id": "x", "content": "b"}]))
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message="todos[0].content: must not be empty; …")
    violations = [("todos[0].content", "must not be empty"), ("todos[2].id", "duplicate id 'x'")]
    status.details.add().Pack(
        error_details_pb2.BadRequest(
            field_violations=[
                error_details_pb2.BadRequest.FieldViolation(field=field, description=text) for field, text in violations
            ]
        )
    )

    run = server.run("replace", "s", "-f", str(plan))
    request = server.fail("ReplaceTodos", status)
    assert [todo.content for todo in request.todos] == ["", "a", "b"]
    assert [todo.id for todo in request.todos] == ["", "x", "x"]
    result = finished(run)
    assert result.exit_code == 1
    assert "  todos[0].content: must not be empty" in result.stderr
    assert "  todos[2].id: duplicate id 'x'" in result.stderr

    run = server.run("-o", "json", "replace", "s", "-f", str(plan))
    server.fail("ReplaceTodos", status)
    result = finished(run)
    error = json.loads(result.stderr)
    assert error["code"] == "INVALID_ARGUMENT"
    assert error["violations"][1] == {"field": "todos[2].id", "description": "duplicate id 'x'"}


def test_replace_reads_the_output_of_get_and_sends_the_expected_revision(server: FakeServer, tmp_path: Any) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"revision": 3, "todos": [{"id": "a", "content": "A", "status": "in_progress", "priority": "high"}]})
    )
    run = server.run("replace", "s", "-f", str(plan), "--expected-revision", "3")
    _, request = server.answer("ReplaceTodos", pb.ReplaceTodosResponse(revision=4, todos=[]))
    assert request == pb.ReplaceTodosRequest(
        session_id="s",
        todos=[pb.Todo(id="a", content="A", status=pb.TODO_STATUS_IN_PROGRESS, priority=pb.TODO_PRIORITY_HIGH)],
        expected_revision=3,
        origin="sessiontodoctl",
    )
    assert finished(run).exit_code == 0


def test_a_plan_that_is_not_a_list_of_todos_is_refused_before_any_call(server: FakeServer, tmp_path: Any) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('[{"content": 3}]')
    result = finished(server.run("replace", "s", "-f", str(plan)))
    assert result.exit_code == 2
    assert "not a list of todos" in result.stderr


def test_add_sends_priority_status_index_and_a_request_id(server: FakeServer) -> None:
    run = server.run("add", "s", "Ship it", "--priority", "high", "--status", "in_progress", "--index", "0")
    _, request = server.answer(
        "AddTodo",
        pb.AddTodoResponse(
            todo=pb.Todo(id="t1", content="Ship it", status=PENDING, priority=MEDIUM), index=0, revision=5
        ),
    )
    assert request.todo == pb.Todo(content="Ship it", status=pb.TODO_STATUS_IN_PROGRESS, priority=pb.TODO_PRIORITY_HIGH)
    assert request.index == 0
    assert request.HasField("index")
    assert len(request.request_id) == 32
    assert "added t1 at 0, revision 5" in finished(run).stdout


def test_done_marks_the_todo_completed(server: FakeServer) -> None:
    run = server.run("done", "s", "t1")
    server.answer("GetTodos", pb.GetTodosResponse(revision=5, todos=[pb.Todo(id="t1", content="x")]))
    _, request = server.answer(
        "UpdateTodo",
        pb.UpdateTodoResponse(
            todo=pb.Todo(id="t1", content="x", status=pb.TODO_STATUS_COMPLETED, priority=MEDIUM),
            revision=6,
            changed=True,
        ),
    )
    assert request == pb.UpdateTodoRequest(
        session_id="s", todo_id="t1", status=pb.TODO_STATUS_COMPLETED, origin="sessiontodoctl"
    )
    assert "completed t1, revision 6" in finished(run).stdout


def test_create_sends_the_parent_and_labels_and_says_whether_it_was_created(server: FakeServer) -> None:
    run = server.run("create", "child", "--parent", "root", "--label", "project=web", "-l", "title=Fix it")
    _, request = server.answer(
        "CreateSession",
        pb.CreateSessionResponse(session=pb.Session(session_id="child", parent_id="root"), created=False),
    )
    assert request == pb.CreateSessionRequest(
        session_id="child", parent_id="root", labels={"project": "web", "title": "Fix it"}, origin="sessiontodoctl"
    )
    assert finished(run).stdout.strip() == "exists child"


def test_create_without_an_id_generates_one(server: FakeServer) -> None:
    run = server.run("create")
    _, request = server.answer(
        "CreateSession", pb.CreateSessionResponse(session=pb.Session(session_id="x"), created=True)
    )
    assert request.session_id.startswith("ses_")
    assert len(request.session_id) > 20
    finished(run)


def test_a_label_that_is_not_key_value_is_refused_before_any_call(server: FakeServer) -> None:
    result = finished(server.run("ls", "--label", "project"))
    assert result.exit_code == 2
    assert "'project' is not key=value" in result.stderr


def test_rm_of_a_missing_session_exits_1(server: FakeServer) -> None:
    run = server.run("rm", "gone")
    server.answer("RemoveSession", pb.RemoveSessionResponse(existed=False))
    result = finished(run)
    assert (result.exit_code, result.stdout.strip()) == (1, "no session gone")


def test_ls_sends_its_filters_and_shows_labels(server: FakeServer) -> None:
    run = server.run("ls", "--parent", "root", "--label", "project=web")
    _, request = server.answer(
        "ListSessions",
        pb.ListSessionsResponse(
            sessions=[pb.Session(session_id="child", parent_id="root", revision=3, labels={"project": "web", "a": "b"})]
        ),
    )
    assert (request.parent_id, dict(request.labels)) == ("root", {"project": "web"})
    assert "a=b,project=web" in finished(run).stdout


def test_ls_follows_every_page(server: FakeServer) -> None:
    run = server.run("-o", "json", "ls")
    _, first = server.answer(
        "ListSessions", pb.ListSessionsResponse(sessions=[pb.Session(session_id="a")], next_page_token="a")
    )
    _, second = server.answer("ListSessions", pb.ListSessionsResponse(sessions=[pb.Session(session_id="b")]))
    assert (first.page_token, second.page_token) == ("", "a")
    assert [session["session_id"] for session in json.loads(finished(run).stdout)] == ["a", "b"]


def test_health_reports_each_service_and_fails_when_one_is_not_serving(server: FakeServer) -> None:
    run = server.run("health")
    for expected_service, status in (("", "SERVING"), ("sessiontodo.v1.TodoService", "NOT_SERVING")):
        _, request, rpc = server.channel.take_unary_unary(HEALTH.methods_by_name["Check"])
        assert request.service == expected_service
        rpc.terminate(
            health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.ServingStatus.Value(status)),
            (),
            grpc.StatusCode.OK,
            "",
        )
    result = finished(run)
    assert result.exit_code == 1
    assert "NOT_SERVING" in result.stdout


def take_stream(server: FakeServer, name: str) -> tuple[Any, Any, Any]:
    """Take the CLI's next call of the stream ``name`` and answer its headers, as a server does when
    it accepts the stream; returns (metadata, request, rpc)."""
    metadata, request, rpc = server.channel.take_unary_stream(method(name))
    rpc.send_initial_metadata((ACCEPTED_HEADER,))
    return metadata, request, rpc


def _watch_message(kind: pb.ChangeKind.ValueType, revision: int, *contents: str) -> pb.WatchTodosResponse:
    return pb.WatchTodosResponse(
        session_id="s",
        kind=kind,
        revision=revision,
        todos=[
            pb.Todo(id=f"t{n}", content=content, status=PENDING, priority=MEDIUM) for n, content in enumerate(contents)
        ],
    )


def _lines_when(output: io.StringIO, count: int) -> list[str]:
    """The lines printed, once there are ``count`` of them."""
    deadline = time.monotonic() + 30
    while len(lines := output.getvalue().splitlines()) < count:
        assert time.monotonic() < deadline, lines
        time.sleep(0.01)
    return lines


def test_watch_prints_each_change_as_a_json_line_and_resumes_after_unavailable(server: FakeServer) -> None:
    output = io.StringIO()
    run = server.run("-o", "json", "watch", "s", console=Console(file=output))
    _, request, rpc = take_stream(server, "WatchTodos")
    assert request == pb.WatchTodosRequest(session_id="s")
    rpc.send_response(_watch_message(pb.CHANGE_KIND_SNAPSHOT, 4, "a"))
    rpc.send_response(_watch_message(pb.CHANGE_KIND_PROGRESS, 4))
    rpc.send_response(_watch_message(pb.CHANGE_KIND_TODO_ADDED, 5, "a", "b"))
    _lines_when(output, 2)  # grpc_testing drops messages not yet read when a call fails: let the CLI read them
    rpc.terminate((), grpc.StatusCode.UNAVAILABLE, "server restarting")

    _, resumed, rpc = take_stream(server, "WatchTodos")
    assert resumed.HasField("after_revision")
    assert resumed.after_revision == 5
    rpc.send_response(_watch_message(pb.CHANGE_KIND_SESSION_REMOVED, 6))
    rpc.terminate((), grpc.StatusCode.OK, "")

    result = finished(run)
    lines = [json.loads(line) for line in output.getvalue().splitlines()]
    assert [(line["kind"], line["revision"]) for line in lines] == [
        ("snapshot", 4),
        ("todo_added", 5),
        ("session_removed", 6),
    ]
    assert [todo["content"] for todo in lines[1]["todos"]] == ["a", "b"]
    assert result.exit_code == 0


def test_watch_and_feed_skip_change_kinds_a_newer_server_adds(server: FakeServer) -> None:
    output = io.StringIO()
    run = server.run("-o", "json", "watch", "s", console=Console(file=output))
    _, _, rpc = take_stream(server, "WatchTodos")
    rpc.send_response(_watch_message(99, 1))  # type: ignore[arg-type]
    rpc.send_response(_watch_message(pb.CHANGE_KIND_SESSION_REMOVED, 2))
    rpc.terminate((), grpc.StatusCode.OK, "")
    assert finished(run).exit_code == 0
    assert [json.loads(line)["kind"] for line in output.getvalue().splitlines()] == ["session_removed"]

    output = io.StringIO()
    run = server.run("-o", "json", "feed", console=Console(file=output))
    _, _, rpc = take_stream(server, "WatchChanges")
    rpc.send_response(_feed_message(99, "a", 1, "e.1"))  # type: ignore[arg-type]
    rpc.send_response(_feed_message(pb.CHANGE_KIND_TODOS_REPLACED, "a", 2, ""))  # no cursor of its own
    _lines_when(output, 1)  # read, so that the failure below drops nothing
    rpc.terminate((), grpc.StatusCode.UNAVAILABLE, "restarting")
    _, resumed, rpc = take_stream(server, "WatchChanges")
    assert resumed.after_cursor == "e.1"  # the skipped message's cursor is kept
    rpc.terminate((), grpc.StatusCode.OK, "")
    assert finished(run).exit_code == 0
    assert [json.loads(line)["kind"] for line in output.getvalue().splitlines()] == ["todos_replaced"]


def test_watch_of_a_missing_session_is_an_error(server: FakeServer) -> None:
    run = server.run("watch", "missing")
    _, _, rpc = take_stream(server, "WatchTodos")
    rpc.terminate((), grpc.StatusCode.NOT_FOUND, "session not found: 'missing'")
    result = finished(run)
    assert result.exit_code == 1
    assert "NOT_FOUND" in result.stderr


def _feed_message(kind: pb.ChangeKind.ValueType, session_id: str, revision: int, cursor: str, **fields: Any) -> Any:
    return pb.WatchChangesResponse(kind=kind, session_id=session_id, revision=revision, cursor=cursor, **fields)


def test_feed_sends_its_filters_prints_one_line_per_change_and_resumes_by_cursor(server: FakeServer) -> None:
    output = io.StringIO()
    run = server.run(
        "feed",
        "--session",
        "a",
        "--session",
        "b",
        "--label",
        "project=web",
        "--snapshot",
        console=Console(file=output, width=120),
    )
    _, request, rpc = take_stream(server, "WatchChanges")
    assert request.include_snapshot
    assert request.after_cursor == ""
    assert (list(request.filter.session_ids), dict(request.filter.labels)) == (["a", "b"], {"project": "web"})
    todo = pb.Todo(id="t1", content="x", status=pb.TODO_STATUS_COMPLETED, priority=MEDIUM)
    rpc.send_response(_feed_message(pb.CHANGE_KIND_SNAPSHOT, "a", 2, "", todos=[todo]))
    rpc.send_response(_feed_message(pb.CHANGE_KIND_PROGRESS, "", 0, "e.7"))
    rpc.send_response(
        _feed_message(pb.CHANGE_KIND_TODO_ADDED, "b", 1, "e.8", todo_id="t1", todos=[todo], origin="opencode")
    )
    _lines_when(output, 2)
    rpc.terminate((), grpc.StatusCode.UNAVAILABLE, "restarting")

    _, resumed, rpc = take_stream(server, "WatchChanges")
    assert (resumed.after_cursor, resumed.include_snapshot) == ("e.8", False)
    rpc.send_response(
        _feed_message(pb.CHANGE_KIND_SESSION_REMOVED, "a", 3, "e.9", removal_reason=pb.REMOVAL_REASON_EXPIRED)
    )
    _lines_when(output, 3)
    rpc.terminate((), grpc.StatusCode.OK, "")  # (a real feed never ends; the CLI then stops too)

    assert finished(run).exit_code == 0
    lines = output.getvalue().splitlines()
    assert lines[0].split() == ["snapshot", "a", "revision", "2", "1/1", "completed"]
    assert lines[1].split() == ["todo_added", "b", "revision", "1", "todo", "t1", "1/1", "completed", "by", "opencode"]
    assert lines[2].split() == ["session_removed", "a", "revision", "3", "(expired)"]


def test_feed_in_json_prints_each_change_with_its_cursor(server: FakeServer) -> None:
    output = io.StringIO()
    run = server.run("-o", "json", "feed", "--after", "e.3", console=Console(file=output))
    _, request, rpc = take_stream(server, "WatchChanges")
    assert (request.after_cursor, request.include_snapshot) == ("e.3", False)
    rpc.send_response(_feed_message(pb.CHANGE_KIND_TODOS_REPLACED, "a", 4, "e.4"))
    _lines_when(output, 1)
    rpc.terminate((), grpc.StatusCode.OK, "")
    finished(run)
    [line] = [json.loads(line) for line in output.getvalue().splitlines()]
    assert (line["session_id"], line["kind"], line["cursor"]) == ("a", "todos_replaced", "e.4")

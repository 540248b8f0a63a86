"""The watch streams' resume protocol (``sessiontodo_client.resume``), driven by hand: no server, no I/O.

The async client and sessiontodoctl drive these same state machines, so what holds here holds for both.
"""

from __future__ import annotations

import grpc
import pytest

from sessiontodo.v1 import todo_service_pb2 as pb
from sessiontodo_client import ChangeKind, Connection, ConnectionState, RetryPolicy
from sessiontodo_client.resume import ACCEPTED_HEADER, FeedResume, TodosResume
from sessiontodo_client.retry import TRANSIENT_CODES

NO_WAIT = RetryPolicy(initial=0.001, maximum=0.001)


def _todos_message(kind: pb.ChangeKind.ValueType, revision: int) -> pb.WatchTodosResponse:
    return pb.WatchTodosResponse(session_id="s", kind=kind, revision=revision)


def _feed_message(kind: pb.ChangeKind.ValueType, cursor: str, session_id: str = "a") -> pb.WatchChangesResponse:
    return pb.WatchChangesResponse(session_id=session_id, kind=kind, revision=1, cursor=cursor)


def test_a_new_todos_call_resumes_after_the_last_revision_delivered() -> None:
    resume = TodosResume("s", retry=NO_WAIT)
    resume.received(_todos_message(pb.CHANGE_KIND_SNAPSHOT, 4))
    resume.received(_todos_message(pb.CHANGE_KIND_TODO_ADDED, 5))
    resume.failed(grpc.StatusCode.UNAVAILABLE)
    assert resume.request() == pb.WatchTodosRequest(session_id="s", after_revision=5)


def test_progress_is_delivered_only_when_asked_for() -> None:
    quiet = TodosResume("s", retry=NO_WAIT)
    chatty = TodosResume("s", include_progress=True, retry=NO_WAIT)
    progress = _todos_message(pb.CHANGE_KIND_PROGRESS, 4)
    assert (quiet.received(progress), getattr(chatty.received(progress), "kind", None)) == (None, ChangeKind.PROGRESS)


def test_the_todos_watch_finishes_with_the_removal_of_its_session() -> None:
    resume = TodosResume("s", retry=NO_WAIT)
    resume.received(_todos_message(pb.CHANGE_KIND_SESSION_REMOVED, 6))
    assert resume.finished


def test_a_change_kind_a_newer_server_adds_is_skipped_but_its_cursor_kept() -> None:
    resume = FeedResume(retry=NO_WAIT)
    skipped = resume.received(_feed_message(99, "e.7"))  # type: ignore[arg-type]
    resume.failed(grpc.StatusCode.UNAVAILABLE)
    assert (skipped, resume.request().after_cursor) == (None, "e.7")


def test_a_snapshot_cut_short_is_asked_for_again_after_a_reset() -> None:
    resume = FeedResume(include_snapshot=True, retry=NO_WAIT)
    assert resume.opened() == ()
    resume.received(_feed_message(pb.CHANGE_KIND_SNAPSHOT, ""))
    resume.failed(grpc.StatusCode.UNAVAILABLE)
    request = resume.request()
    assert (request.after_cursor, request.include_snapshot) == ("", True)
    [restart] = resume.opened()
    assert (restart.session_id, restart.kind) == ("", ChangeKind.RESET)


def test_a_feed_cut_between_a_reset_and_its_first_snapshot_asks_for_a_whole_snapshot_again() -> None:
    resume = FeedResume("e.3", retry=NO_WAIT)
    resume.received(_feed_message(pb.CHANGE_KIND_TODO_ADDED, "e.4"))
    resume.received(_feed_message(pb.CHANGE_KIND_RESET, "", session_id=""))  # what came since e.4 is lost
    resume.failed(grpc.StatusCode.UNAVAILABLE)
    request = resume.request()
    assert (request.after_cursor, request.include_snapshot) == ("", True)
    [restart] = resume.opened()
    assert (restart.session_id, restart.kind) == ("", ChangeKind.RESET)


def test_a_finished_snapshot_resumes_by_its_bookmark_cursor() -> None:
    resume = FeedResume(include_snapshot=True, retry=NO_WAIT)
    resume.received(_feed_message(pb.CHANGE_KIND_SNAPSHOT, ""))
    resume.received(_feed_message(pb.CHANGE_KIND_PROGRESS, "e.3", session_id=""))
    resume.failed(grpc.StatusCode.UNAVAILABLE)
    assert (resume.request().after_cursor, resume.request().include_snapshot, resume.opened()) == ("e.3", False, ())


@pytest.mark.parametrize("code", [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK])
def test_only_transient_codes_reconnect(code: grpc.StatusCode) -> None:
    delay = FeedResume(retry=NO_WAIT).failed(code)
    assert (delay is not None) == (code in TRANSIENT_CODES)


def test_reconnect_delays_stay_under_the_policys_doubling_cap() -> None:
    policy = RetryPolicy(initial=0.5, maximum=4.0)
    resume = TodosResume("s", retry=policy)
    delays = [resume.failed(grpc.StatusCode.UNAVAILABLE) for _ in range(6)]
    assert all(0 <= (delay or 0) <= policy.cap(attempt) for attempt, delay in enumerate(delays))


def test_every_connection_change_is_told_with_where_the_stream_resumes() -> None:
    heard: list[Connection] = []
    resume = FeedResume("e.1", retry=NO_WAIT, on_connection=heard.append)
    resume.opened()
    resume.answered((ACCEPTED_HEADER,))
    resume.received(_feed_message(pb.CHANGE_KIND_TODO_ADDED, "e.2"))
    resume.failed(grpc.StatusCode.UNAVAILABLE, "connection refused")
    resume.opened()
    resume.answered(())  # a failed call's empty headers: not connected
    resume.failed(grpc.StatusCode.UNAVAILABLE, "connection refused")
    resume.opened()
    resume.answered((ACCEPTED_HEADER,))
    assert [(c.state, c.after, c.error) for c in heard] == [
        (ConnectionState.CONNECTING, "cursor e.1", ""),
        (ConnectionState.CONNECTED, "cursor e.1", ""),
        (ConnectionState.RECONNECTING, "cursor e.2", "connection refused"),
        (ConnectionState.RECONNECTING, "cursor e.2", "connection refused"),
        (ConnectionState.RESUMED, "cursor e.2", ""),
    ]


def test_a_server_without_the_accepted_header_counts_as_connected_at_its_first_message() -> None:
    heard: list[Connection] = []
    resume = TodosResume("s", retry=NO_WAIT, on_connection=heard.append)
    resume.opened()
    resume.answered(())
    resume.received(_todos_message(pb.CHANGE_KIND_SNAPSHOT, 1))
    assert [c.state for c in heard] == [ConnectionState.CONNECTING, ConnectionState.CONNECTED]

"""The proxy's per-session job queues: order, every plan run, bounded waiting, bounded retries, nothing stuck, and a
plan that ran out of retries while sessiontodo was down is still sent once it is back."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import grpc

from sessiontodo_acp import _session_jobs
from sessiontodo_acp._session_jobs import SessionJobs
from sessiontodo_client import RetryPolicy, ServiceError
from tests.support import eventually

FAST = RetryPolicy(attempts=5, initial=0.001, maximum=0.005, deadline=5.0)


def failing(code: grpc.StatusCode, calls: list[str], name: str) -> Callable[[], Awaitable[None]]:
    async def job() -> None:
        calls.append(name)
        raise ServiceError(code, "failed")

    return job


def succeeding(calls: list[str], name: str, gate: asyncio.Event | None = None) -> Callable[[], Awaitable[None]]:
    async def job() -> None:
        if gate is not None:
            await gate.wait()
        calls.append(name)

    return job


async def test_jobs_of_a_session_run_in_order_and_every_waiting_plan_runs() -> None:
    jobs, calls, gate = SessionJobs(FAST), list[str](), asyncio.Event()
    jobs.submit("s", succeeding(calls, "open", gate), "open")
    for n in range(5):
        jobs.submit("s", succeeding(calls, f"plan {n}"), f"plan {n}", replaceable=True)
    jobs.submit("s", succeeding(calls, "close"), "close")
    gate.set()
    assert await jobs.wait_all_idle(5)
    assert calls == ["open", *(f"plan {n}" for n in range(5)), "close"]
    await jobs.aclose()


async def test_past_the_bound_of_waiting_plans_the_newest_replaces_the_last_waiting_one(monkeypatch) -> None:
    monkeypatch.setattr(_session_jobs, "MAX_WAITING_PLANS", 3)
    jobs, calls, gate = SessionJobs(FAST), list[str](), asyncio.Event()
    jobs.submit("s", succeeding(calls, "open", gate), "open")
    for n in range(5):
        jobs.submit("s", succeeding(calls, f"plan {n}"), f"plan {n}", replaceable=True)
    gate.set()
    assert await jobs.wait_all_idle(5)
    assert calls == ["open", "plan 0", "plan 1", "plan 4"]
    await jobs.aclose()


async def test_unknown_internal_and_deadline_exceeded_are_not_retried_and_are_reported() -> None:
    jobs, calls, failures = SessionJobs(FAST), list[str](), list[Exception]()
    for code in (grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL, grpc.StatusCode.DEADLINE_EXCEEDED):
        jobs.submit("s", failing(code, calls, code.name), code.name, on_failure=failures.append)
    assert await jobs.wait_all_idle(5)
    assert calls == ["UNKNOWN", "INTERNAL", "DEADLINE_EXCEEDED"]
    assert [getattr(error, "code", None) for error in failures] == [
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    ]
    await jobs.aclose()


async def test_unavailable_is_retried_a_bounded_number_of_times_then_the_queue_moves_on() -> None:
    jobs, calls, failures = SessionJobs(FAST), list[str](), list[Exception]()
    jobs.submit("s", failing(grpc.StatusCode.UNAVAILABLE, calls, "plan"), "plan", on_failure=failures.append)
    jobs.submit("s", succeeding(calls, "close"), "close")
    assert await jobs.wait_all_idle(5)
    assert calls == ["plan"] * FAST.attempts + ["close"]
    assert len(failures) == 1
    await jobs.aclose()


async def test_a_failing_plan_gives_way_at_once_to_a_removal_queued_behind_it() -> None:
    patient = RetryPolicy(attempts=1000, initial=0.001, maximum=0.01, deadline=None)
    jobs, calls, failures, started = SessionJobs(patient), list[str](), list[Exception](), asyncio.Event()

    async def plan() -> None:
        calls.append("plan")
        started.set()
        raise ServiceError(grpc.StatusCode.UNAVAILABLE, "down")

    jobs.submit("s", plan, "plan", replaceable=True)
    await started.wait()
    jobs.submit("s", succeeding(calls, "later plan"), "later plan", replaceable=True, on_failure=failures.append)
    n = len(calls)
    jobs.submit("s", succeeding(calls, "delete"), "delete", supersedes=True)
    assert await jobs.wait_all_idle(5)
    assert calls[-1:] == ["delete"]
    assert "later plan" not in calls
    assert calls[n:].count("plan") <= 1, "the failing plan stopped retrying once it was moot"
    assert failures == []
    await jobs.aclose()


def unavailable_until(up: asyncio.Event, stored: list[str], name: str) -> Callable[[], Awaitable[None]]:
    """A write that fails with UNAVAILABLE until ``up`` is set, then records ``name`` as stored."""

    async def job() -> None:
        if not up.is_set():
            raise ServiceError(grpc.StatusCode.UNAVAILABLE, "down")
        stored.append(name)

    return job


async def test_a_plan_that_ran_out_of_retries_while_sessiontodo_was_down_is_stored_once_it_is_back() -> None:
    jobs, up, stored, failures = SessionJobs(FAST), asyncio.Event(), list[str](), list[Exception]()
    jobs.submit("s", unavailable_until(up, stored, "plan"), "plan", replaceable=True, on_failure=failures.append)
    jobs.submit("s", succeeding(stored, "release"), "release")
    await eventually(lambda: len(failures) == 1)  # reported (the mirror pauses) after FAST.attempts tries

    assert not await jobs.wait_all_idle(0.05), "the plan is kept, and the release waits behind it"
    up.set()
    assert await jobs.wait_all_idle(5)
    assert stored == ["plan", "release"]
    assert len(failures) == 1
    await jobs.aclose()


async def test_a_kept_plan_gives_way_to_a_newer_plan_and_a_removal_drops_it() -> None:
    jobs, up, stored, failures = SessionJobs(FAST), asyncio.Event(), list[str](), list[Exception]()
    for session_id in ("replaced", "removed"):
        jobs.submit(
            session_id,
            unavailable_until(up, stored, f"old plan of {session_id}"),
            "old plan",
            replaceable=True,
            on_failure=failures.append,
        )
    await eventually(lambda: len(failures) == 2)
    jobs.submit("replaced", unavailable_until(up, stored, "new plan of replaced"), "new plan", replaceable=True)
    jobs.submit("removed", succeeding(stored, "removal of removed"), "removal", supersedes=True)
    await eventually(lambda: (jobs.pending("replaced"), jobs.pending("removed")) == (1, 0))  # the old plans gave way

    up.set()
    assert await jobs.wait_all_idle(5)
    assert sorted(stored) == ["new plan of replaced", "removal of removed"], "no old plan was sent"
    await jobs.aclose()


async def test_sessions_do_not_wait_for_each_other() -> None:
    jobs, calls, gate = SessionJobs(FAST), list[str](), asyncio.Event()
    jobs.submit("slow", succeeding(calls, "slow", gate), "slow")
    jobs.submit("fast", succeeding(calls, "fast"), "fast")
    await jobs.wait_idle("fast")
    assert calls == ["fast"]
    gate.set()
    assert await jobs.wait_all_idle(5)
    await jobs.aclose()

"""The one retry policy: what is transient, full-jitter delays, attempts and the overall deadline."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from sessiontodo_client import RetryPolicy, ServiceError, Unavailable, is_transient


def failure(code: grpc.StatusCode) -> ServiceError:
    return ServiceError(code, "failed")


@pytest.mark.parametrize(
    ("code", "transient"),
    [
        (grpc.StatusCode.UNAVAILABLE, True),
        (grpc.StatusCode.UNKNOWN, False),
        (grpc.StatusCode.INTERNAL, False),
        (grpc.StatusCode.DEADLINE_EXCEEDED, False),
        (grpc.StatusCode.INVALID_ARGUMENT, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, False),
        (grpc.StatusCode.ABORTED, False),
    ],
)
def test_only_unavailable_is_transient(code: grpc.StatusCode, transient: bool) -> None:
    assert is_transient(failure(code)) is transient


def test_a_refused_connection_is_transient_and_other_errors_are_not() -> None:
    assert is_transient(ConnectionRefusedError())
    assert not is_transient(ValueError())
    assert not is_transient(TimeoutError())


def test_delays_are_full_jitter_under_a_doubling_cap() -> None:
    policy = RetryPolicy(initial=0.1, maximum=1.0)
    assert [policy.cap(n) for n in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    delays = [policy.delay(3) for _ in range(200)]
    assert all(0 <= delay <= 0.8 for delay in delays)
    assert len(set(delays)) > 100, "delays are spread, not one fixed value"


def test_a_policy_that_makes_no_sense_is_refused() -> None:
    for arguments in ({"attempts": 0}, {"initial": 0}, {"initial": 2.0, "maximum": 1.0}, {"deadline": -1}):
        with pytest.raises(ValueError, match="invalid retry"):
            RetryPolicy(**arguments)


async def test_a_transient_failure_is_retried_until_it_succeeds() -> None:
    outcomes: list[Exception | str] = [Unavailable(grpc.StatusCode.UNAVAILABLE, "down")] * 3
    outcomes.append("done")
    calls = 0
    retried: list[float] = []

    async def call() -> str:
        nonlocal calls
        outcome = outcomes[calls]
        calls += 1
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    policy = RetryPolicy(attempts=5, initial=0.001, maximum=0.01)
    result = await policy.run(call, on_retry=lambda error, delay: retried.append(delay))
    assert (result, calls, len(retried)) == ("done", 4, 3)


async def test_a_permanent_failure_is_raised_at_once() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise failure(grpc.StatusCode.UNKNOWN)

    with pytest.raises(ServiceError):
        await RetryPolicy(attempts=10, initial=0.001, maximum=0.01).run(call)
    assert calls == 1


async def test_attempts_bound_the_tries() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise failure(grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(ServiceError):
        await RetryPolicy(attempts=4, initial=0.001, maximum=0.01, deadline=None).run(call)
    assert calls == 4


async def test_no_try_starts_after_the_deadline() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        raise failure(grpc.StatusCode.UNAVAILABLE)

    with pytest.raises(ServiceError):
        await RetryPolicy(attempts=1000, initial=0.001, maximum=0.002, deadline=0.3).run(call)
    assert 1 < calls < 1000


async def test_a_custom_predicate_decides_what_is_retried() -> None:
    calls = 0

    async def call() -> None:
        nonlocal calls
        calls += 1
        raise KeyError("x")

    with pytest.raises(KeyError):
        await RetryPolicy(attempts=3, initial=0.001, maximum=0.01).run(call, retry_if=lambda e: True)
    assert calls == 3

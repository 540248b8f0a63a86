"""Sign-in secrets, signed cookies, CSRF tokens and the back-off on failed sign-ins (pure: an
injected clock, no server)."""

from __future__ import annotations

import base64

from sessiontodo_web.auth import (
    FREE_FAILURES,
    GLOBAL_FAILURE_BURST,
    GLOBAL_FAILURES_PER_SECOND,
    MAX_CLIENT_WAIT,
    SignInThrottle,
    Viewers,
)

NOW = 1_800_000_000.0


def viewers(*, password: str | None = None, now: list[float] | None = None, https: bool = False) -> Viewers:
    clock = now or [NOW]
    return Viewers(
        token="the token", username="ops", password=password, lifetime=3600, https=https, clock=lambda: clock[0]
    )


def test_a_cookie_it_issued_proves_a_sign_in() -> None:
    board = viewers()

    assert board.read(board.issue()) is not None


def test_a_cookie_expires_after_the_lifetime() -> None:
    now = [NOW]
    board = viewers(now=now)
    cookie = board.issue()
    now[0] += 3601

    assert board.read(cookie) is None


def test_a_cookie_signed_with_other_secrets_is_refused() -> None:
    other = Viewers(token="another", username="ops", password=None, lifetime=3600, https=False)

    assert viewers().read(other.issue()) is None


def test_changing_the_password_signs_everybody_out() -> None:
    cookie = viewers(password="old").issue()

    assert viewers(password="new").read(cookie) is None


def test_a_sign_ins_own_csrf_token_is_accepted() -> None:
    board = viewers()
    sign_in = board.read(board.issue())
    assert sign_in is not None

    assert board.accepts_csrf(sign_in, board.csrf_token(sign_in))


def test_another_sign_ins_csrf_token_is_refused() -> None:
    board = viewers()
    first, second = board.read(board.issue()), board.read(board.issue())
    assert first is not None
    assert second is not None

    assert not board.accepts_csrf(second, board.csrf_token(first))


def basic(credentials: bytes) -> str:
    return "Basic " + base64.b64encode(credentials).decode()


def test_basic_auth_with_the_user_name_and_password_is_accepted() -> None:
    assert viewers(password="pw").accepts_basic(basic(b"ops:pw"))


def test_basic_auth_with_another_user_name_is_refused() -> None:
    assert not viewers(password="pw").accepts_basic(basic(b"root:pw"))


def test_basic_auth_that_is_not_base64_is_refused() -> None:
    assert not viewers(password="pw").accepts_basic("Basic not-base64!")


def test_over_https_the_cookie_is_secure_and_host_prefixed() -> None:
    cookie = viewers(https=True).set_cookie("value")

    assert cookie.startswith("__Host-sessiontodo-web=value; Path=/;")
    assert cookie.endswith("; HttpOnly; SameSite=Strict; Secure")


def throttle(now: list[float]) -> SignInThrottle:
    return SignInThrottle(clock=lambda: now[0])


def test_a_client_may_fail_a_few_sign_ins_in_a_row_without_waiting() -> None:
    limiter = throttle([NOW])
    for _ in range(FREE_FAILURES):
        assert limiter.wait("10.0.0.1") == 0
        limiter.failed("10.0.0.1")

    assert limiter.wait("10.0.0.1") == 0


def test_each_further_failure_doubles_the_clients_wait_up_to_the_maximum() -> None:
    now = [NOW]
    limiter = throttle(now)
    for _ in range(FREE_FAILURES):
        limiter.failed("10.0.0.1")
    waits = []
    for _ in range(9):
        limiter.failed("10.0.0.1")
        waits.append(limiter.wait("10.0.0.1"))
        now[0] += waits[-1]

    assert waits == [1, 2, 4, 8, 16, 32, MAX_CLIENT_WAIT, MAX_CLIENT_WAIT, MAX_CLIENT_WAIT]


def test_one_clients_failures_do_not_make_another_client_wait() -> None:
    limiter = throttle([NOW])
    for _ in range(FREE_FAILURES + 3):
        limiter.failed("10.0.0.1")

    assert limiter.wait("10.0.0.1") > 0
    assert limiter.wait("10.0.0.2") == 0


def test_a_successful_sign_in_clears_the_clients_failures() -> None:
    limiter = throttle([NOW])
    for _ in range(FREE_FAILURES + 1):
        limiter.failed("10.0.0.1")
    limiter.succeeded("10.0.0.1")
    limiter.failed("10.0.0.1")

    assert limiter.wait("10.0.0.1") == 0


def test_failures_from_many_clients_make_every_client_wait_past_the_global_burst() -> None:
    now = [NOW]
    limiter = throttle(now)
    for client in range(GLOBAL_FAILURE_BURST):
        assert limiter.wait(f"10.0.{client}.1") == 0
        limiter.failed(f"10.0.{client}.1")

    assert limiter.wait("192.0.2.1") == 1 / GLOBAL_FAILURES_PER_SECOND
    now[0] += 1 / GLOBAL_FAILURES_PER_SECOND
    assert limiter.wait("192.0.2.1") == 0

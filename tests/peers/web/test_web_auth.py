"""Sign-in secrets, signed cookies and CSRF tokens (pure: an injected clock, no server)."""

from __future__ import annotations

import base64

from sessiontodo_web.auth import Viewers

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

"""Tenants: separate namespaces of session ids, chosen per call by the caller's bearer token.

The authentication interceptor enters the caller's tenant for the duration of its call; the
transport reads it. Without ``--auth-file`` every call is in the default tenant ``""``.
"""

from __future__ import annotations

from contextvars import ContextVar

TENANT_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
"""Tenant names: never the separator ``/``, which session ids cannot contain either."""

DEFAULT_TENANT = ""

_tenant: ContextVar[str] = ContextVar("sessiontodo_tenant", default=DEFAULT_TENANT)


def enter(tenant: str) -> None:
    """Make ``tenant`` the current call's tenant (each call runs in its own task and context)."""
    _tenant.set(tenant)


def current() -> str:
    return _tenant.get()

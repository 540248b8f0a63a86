"""Tenants: separate namespaces of session ids, chosen per call by the caller's bearer token.

A tenant's session ``ses_1`` is stored as ``acme/ses_1``: the separator ``/`` is one that session
ids may not contain, so qualified ids never collide with another tenant's or with the default
tenant's, whose ids stay unqualified (nothing changes for a server without ``--auth-file``).
The transport qualifies every id a caller sends and strips the prefix from every id it returns;
the stores never know. The authentication interceptor enters the caller's tenant for its call.
"""

from __future__ import annotations

from contextvars import ContextVar

from sessiontodo_server.domain.errors import InvalidArgument

TENANT_PATTERN = r"^[A-Za-z0-9._-]{1,64}$"
"""Tenant names: never the separator."""

SEPARATOR = "/"
DEFAULT_TENANT = ""

_tenant: ContextVar[str] = ContextVar("sessiontodo_tenant", default=DEFAULT_TENANT)


def enter(tenant: str) -> None:
    """Make ``tenant`` the current call's tenant (each call runs in its own task and context)."""
    _tenant.set(tenant)


def current() -> str:
    return _tenant.get()


def qualify(tenant: str, session_id: str, field: str = "session_id") -> str:
    """The stored id of a caller's ``session_id``; an id holding the separator is refused here, so
    that no caller can name another tenant's session. Empty stays empty (for the domain to report)."""
    if SEPARATOR in session_id:
        raise InvalidArgument([(field, f"may not contain {SEPARATOR!r}")])
    return f"{tenant}{SEPARATOR}{session_id}" if tenant and session_id else session_id


def tenant_of(session_id: str) -> str:
    tenant, _, _ = session_id.rpartition(SEPARATOR)
    return tenant


def local(session_id: str) -> str:
    """The id as its own tenant knows it."""
    return session_id.rpartition(SEPARATOR)[2]

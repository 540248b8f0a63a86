"""``GET /session``'s query, as upstream reads it: ``roots``, ``start``, ``search``, ``limit``, ``scope``, ``path``.

Pure: parsed once from the query string, then applied to the listed sessions (most recently
updated first). Values upstream refuses are refused with the same ``kind: "Query"``; values it
silently ignores or fails on (``limit=abc``, ``limit=1.5``, ``start=abc``) are refused too, with a
message saying why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sessiontodo_opencode.models import Session


@dataclass(frozen=True)
class QueryProblem:
    message: str


def _integer(params: Mapping[str, str], name: str) -> int | QueryProblem | None:
    text = params.get(name)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return QueryProblem(f"{name}: expected an integer, got {text!r}")


@dataclass(frozen=True)
class SessionQuery:
    roots: bool = False
    """Only sessions without a parent."""
    start: int | None = None
    """Only sessions updated at or after this time (milliseconds since the epoch)."""
    search: str = ""
    """Only sessions whose title contains this, case-insensitively."""
    limit: int | None = None
    """At most this many (a negative number: no limit, as upstream)."""
    whole_project: bool = False
    """``scope=project``: the sessions of the directory's project, not only the directory's."""
    path: str = ""
    """Only sessions at this path inside the directory (the sidecar's sessions are all at ``""``)."""

    @classmethod
    def read(cls, params: Mapping[str, str]) -> SessionQuery | QueryProblem:
        roots = params.get("roots", "false")
        if roots not in ("true", "false"):
            return QueryProblem(f'roots: expected "true" or "false", got {roots!r}')
        scope = params.get("scope")
        if scope not in (None, "project"):
            return QueryProblem(f'scope: expected "project", got {scope!r}')
        start, limit = _integer(params, "start"), _integer(params, "limit")
        if isinstance(start, QueryProblem):
            return start
        if isinstance(limit, QueryProblem):
            return limit
        return cls(
            roots=roots == "true",
            start=start,
            search=params.get("search", ""),
            limit=limit,
            whole_project=scope == "project",
            path=params.get("path", ""),
        )

    def select(self, sessions: Sequence[Session]) -> list[Session]:
        search = self.search.casefold()
        chosen = [
            session
            for session in sessions
            if not (self.roots and session.parent_id)
            and (self.start is None or session.time.updated >= self.start)
            and search in session.title.casefold()
            and session.path == self.path
        ]
        return chosen if self.limit is None or self.limit < 0 else chosen[: self.limit]

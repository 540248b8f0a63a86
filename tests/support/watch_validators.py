"""etcd-style checks of what watchers saw (after etcd's tests/robustness/validate/watch.go).

Writers record every acknowledged write as ``revision -> list``; watchers record every event
they were given, across reconnects and resumes. ``validate`` then checks, per watcher:

- isolated: only its own session's events, and only todos written to that session;
- ordered and unique: revisions strictly increase, nothing is delivered twice;
- gap-free or RESET: each change is the previous revision + 1, unless it is a RESET;
- atomic: an event at an acknowledged revision carries exactly the list that write produced;
- reliable: every acknowledged revision after the first event is delivered or covered by a RESET
  that jumped past it, and the watcher ends at the session's final revision.

Resumability is what makes these hold across reconnects, kills and restarts.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sessiontodo_client import ChangeKind, Todo, WatchEvent

TodoList = tuple[tuple[str, str], ...]


def as_list(todos: Sequence[Todo]) -> TodoList:
    return tuple((todo.id, todo.content) for todo in todos)


@dataclass
class SessionLog:
    """One session's acknowledged writes and what each of its watchers saw."""

    session_id: str
    acknowledged: dict[int, TodoList] = field(default_factory=dict)
    watchers: dict[str, list[WatchEvent]] = field(default_factory=dict)

    def watcher(self, name: str) -> list[WatchEvent]:
        return self.watchers.setdefault(name, [])


def validate(log: SessionLog, final_revision: int) -> list[str]:
    """Every broken guarantee, as readable lines (empty: all held)."""
    problems: list[str] = []
    for name, events in log.watchers.items():
        where = f"{log.session_id}/{name}"
        changes = [event for event in events if event.kind is not ChangeKind.PROGRESS]
        if not changes:
            problems.append(f"{where}: saw nothing")
            continue
        problems += _isolated(where, log.session_id, changes)
        problems += _ordered_unique_gap_free(where, changes)
        problems += _atomic(where, changes, log.acknowledged)
        problems += _reliable(where, changes, log.acknowledged, final_revision)
    return problems


def _isolated(where: str, session_id: str, events: Sequence[WatchEvent]) -> list[str]:
    problems = [f"{where}: event of session {e.session_id!r}" for e in events if e.session_id != session_id]
    foreign = {t.content for e in events for t in e.todos if not t.content.startswith(f"{session_id}/")}
    if foreign:
        problems.append(f"{where}: todos of other sessions: {sorted(foreign)[:3]}")
    return problems


def _ordered_unique_gap_free(where: str, events: Sequence[WatchEvent]) -> list[str]:
    problems = []
    for previous, event in itertools.pairwise(events):
        if event.revision <= previous.revision:
            problems.append(f"{where}: revision {event.revision} ({event.kind}) after {previous.revision}")
        elif event.revision != previous.revision + 1 and event.kind is not ChangeKind.RESET:
            problems.append(f"{where}: silent gap {previous.revision} -> {event.revision} ({event.kind})")
        if event.kind is ChangeKind.SNAPSHOT:
            problems.append(f"{where}: a SNAPSHOT after the first event (revision {event.revision})")
    return problems


def _atomic(where: str, events: Sequence[WatchEvent], acknowledged: Mapping[int, TodoList]) -> list[str]:
    return [
        f"{where}: revision {e.revision} carries a list that no write produced"
        for e in events
        if e.revision in acknowledged and as_list(e.todos) != acknowledged[e.revision]
    ]


def _reliable(
    where: str, events: Sequence[WatchEvent], acknowledged: Mapping[int, TodoList], final_revision: int
) -> list[str]:
    problems = []
    if events[-1].revision != final_revision:
        problems.append(f"{where}: ended at revision {events[-1].revision}, not the final {final_revision}")
    delivered = {e.revision for e in events}
    resets = [
        (previous.revision, e.revision) for previous, e in itertools.pairwise(events) if e.kind is ChangeKind.RESET
    ]
    lost = [
        revision
        for revision in acknowledged
        if revision > events[0].revision
        and revision not in delivered
        and not any(before < revision <= after for before, after in resets)
    ]
    if lost:
        problems.append(f"{where}: acknowledged revisions never delivered nor reset past: {sorted(lost)[:5]}")
    return problems

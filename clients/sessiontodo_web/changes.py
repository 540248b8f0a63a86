"""What one change of the feed did, in words, from the list (and labels) before and after it.

The feed carries the whole list after each change; the board keeps the list before it, so
"status of "Write docs": pending → completed" costs a comparison, not another call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sessiontodo_client import ChangeKind, FeedEvent, RemovalReason, Todo

QUOTED_LENGTH = 60
"""Longer todo contents and label values are cut to this many characters in a summary."""


def quoted(text: str) -> str:
    """``"text"``, cut with an ellipsis when long, on one line."""
    flat = " ".join(text.split())
    return f'"{flat[: QUOTED_LENGTH - 1]}…"' if len(flat) > QUOTED_LENGTH else f'"{flat}"'


def describe(event: FeedEvent, before: Sequence[Todo], labels_before: Mapping[str, str]) -> str:
    """The change ``event`` made to a session whose list was ``before`` and labels ``labels_before``."""
    if event.kind is ChangeKind.SESSION_CREATED:
        return "session created"
    if event.kind is ChangeKind.SESSION_REMOVED:
        return "session expired" if event.removal_reason is RemovalReason.EXPIRED else "session removed"
    if event.kind is ChangeKind.SESSION_UPDATED:
        labels_after = event.session.labels if event.session else {}
        return _labels_changed(labels_before, labels_after) or "session settings changed"
    old = {todo.id: todo for todo in before}
    new = {todo.id: todo for todo in event.todos}
    if event.kind is ChangeKind.TODO_ADDED and event.todo_id in new:
        return f"added {quoted(new[event.todo_id].content)}"
    if event.kind is ChangeKind.TODO_REMOVED and event.todo_id in old:
        return f"removed {quoted(old[event.todo_id].content)}"
    if event.kind is ChangeKind.TODO_UPDATED and event.todo_id in old and event.todo_id in new:
        return _todo_changed(old[event.todo_id], new[event.todo_id])
    return _list_replaced(before, event.todos)


def _todo_changed(old: Todo, new: Todo) -> str:
    parts = []
    if new.content != old.content:
        parts.append(f"{quoted(old.content)} renamed to {quoted(new.content)}")
    subject = quoted(new.content)
    if new.status != old.status:
        parts.append(f"status of {subject}: {_name(old.status)} → {_name(new.status)}")
    if new.priority != old.priority:
        parts.append(f"priority of {subject}: {_name(old.priority)} → {_name(new.priority)}")
    if new.owner != old.owner:
        parts.append(_owner_changed(subject, old.owner, new.owner))
    linked, unlinked = len(set(new.blocked_by) - set(old.blocked_by)), len(set(old.blocked_by) - set(new.blocked_by))
    if linked:
        parts.append(f"{subject} waits for {linked} more todo" + ("" if linked == 1 else "s"))
    if unlinked:
        parts.append(f"{subject} waits for {unlinked} todo" + ("" if unlinked == 1 else "s") + " no longer")
    if new.metadata != old.metadata:
        parts.append(f"metadata of {subject} changed")
    return "; ".join(parts) or f"{subject} updated"


def _owner_changed(subject: str, old: str, new: str) -> str:
    if not old:
        return f"{subject} claimed by {new}"
    if not new:
        return f"{subject} released by {old}"
    return f"owner of {subject}: {old} → {new}"


def _list_replaced(before: Sequence[Todo], after: Sequence[Todo]) -> str:
    old = {todo.id: todo for todo in before}
    new = {todo.id: todo for todo in after}
    if old == new and [todo.id for todo in before] != [todo.id for todo in after]:
        return "list reordered"
    added = len(new.keys() - old.keys())
    removed = len(old.keys() - new.keys())
    changed = sum(old[id_] != new[id_] for id_ in old.keys() & new.keys())
    counts = [
        f"{count} {what}" for count, what in ((added, "added"), (removed, "removed"), (changed, "changed")) if count
    ]
    todos = f"{len(after)} todo" + ("" if len(after) == 1 else "s")
    return f"list replaced ({todos}" + (f": {', '.join(counts)})" if counts else ")")


def _labels_changed(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    parts = [f"{key} set to {quoted(value)}" for key, value in sorted(after.items()) if before.get(key) != value]
    parts += [f"{key} removed" for key in sorted(before.keys() - after.keys())]
    return "; ".join(parts)


def _name(value: object) -> str:
    """A status or priority as words (``in progress``); a number this board has no name for as itself."""
    return str(value).replace("_", " ")

"""How results look: rich tables for people, JSON for scripts (``--output json``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from sessiontodo_client import FeedEvent, ServiceError, Session, Todo, TodoPriority, TodoStatus, WatchEvent

# Plain ASCII marks: they survive every terminal, pager and log file.
_MARKS = {
    TodoStatus.PENDING: ("[ ]", ""),
    TodoStatus.IN_PROGRESS: ("[>]", "bold yellow"),
    TodoStatus.COMPLETED: ("[x]", "green"),
    TodoStatus.CANCELLED: ("[-]", "dim strike"),
}
_UNKNOWN_MARK = ("[?]", "magenta")
"""A status a newer server added: shown as such, its number in ``-o json``."""


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"


def as_json(value: Any) -> str:
    """One line of JSON for a model, a list of models or plain data."""
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    elif isinstance(value, list):
        value = [item.model_dump(mode="json") if isinstance(item, BaseModel) else item for item in value]
    return json.dumps(value, ensure_ascii=False)


def todos_table(todos: Sequence[Todo], title: str | None = None, caption: str | None = None) -> Table:
    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    table.add_column("", no_wrap=True)
    table.add_column("ID", style="cyan", no_wrap=True)
    table.add_column("PRIORITY", no_wrap=True)
    table.add_column("CONTENT")
    for todo in todos:
        mark, style = _MARKS[todo.status] if isinstance(todo.status, TodoStatus) else _UNKNOWN_MARK
        priority = todo.priority.value if isinstance(todo.priority, TodoPriority) else str(todo.priority)
        table.add_row(Text(mark, style), todo.id, priority, Text(todo.content, style))
    return table


def labels_text(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def sessions_table(sessions: Sequence[Session]) -> Table:
    table = Table()
    table.add_column("SESSION", style="bold")
    table.add_column("PARENT")
    table.add_column("REVISION", justify="right", no_wrap=True)
    table.add_column("TODOS", justify="right", no_wrap=True)
    table.add_column("LABELS")
    for session in sessions:
        row = (session.parent_id, str(session.revision), str(session.todo_count), labels_text(session.labels))
        table.add_row(session.session_id, *row)
    return table


def feed_line(event: FeedEvent) -> Text:
    """One change of the feed on one line: kind, session, revision, todo, origin, progress of the list."""
    if not event.session_id:  # a RESET of the whole feed: a fresh snapshot follows
        return Text("reset: the feed could not resume; a fresh snapshot follows", "bold yellow")
    parts: list[str | tuple[str, str]] = [
        (f"{event.kind.value:<16}", "bold"),
        (event.session_id, "cyan"),
        f"  revision {event.revision}",
    ]
    if event.todo_id:
        parts.append(f"  todo {event.todo_id}")
    if event.kind.value == "session_removed":
        parts.append(f"  ({event.removal_reason.value if event.removal_reason else 'removed'})")
    else:
        parts.append(f"  {summary(event.todos)}")
    if event.origin:
        parts.append((f"  by {event.origin}", "dim"))
    return Text.assemble(*parts)


def summary(todos: Sequence[Todo]) -> str:
    done = sum(todo.status is TodoStatus.COMPLETED for todo in todos)
    return f"{done}/{len(todos)} completed"


def watch_view(event: WatchEvent) -> Group:
    """The live view of one session: a header with its revision and the last change, then the list."""
    header = Text.assemble(
        ("session ", "dim"),
        (event.session_id, "bold"),
        ("  revision ", "dim"),
        (str(event.revision), "bold"),
        ("  last change ", "dim"),
        event.kind.value,
        (f" {event.todo_id}" if event.todo_id else "", "cyan"),
        (f"  by {event.origin}" if event.origin else "", "dim"),
    )
    if event.kind.value == "session_removed":
        return Group(header, Text("the session was removed", "bold red"))
    return Group(header, todos_table(event.todos, caption=summary(event.todos)))


def error(console: Console, output: Output, failure: ServiceError) -> None:
    """A failed call on stderr: its gRPC code, message, reason and every field violation."""
    if output is Output.JSON:
        data = {
            "code": failure.code.name,
            "message": failure.message,
            "reason": failure.reason,
            "violations": [{"field": field, "description": text} for field, text in failure.violations],
        }
        console.out(json.dumps(data, ensure_ascii=False), highlight=False)
        return
    console.print(Text.assemble(("Error: ", "bold red"), f"{failure.code.name}: {failure.message}"))
    for field, text in failure.violations:
        console.print(Text(f"  {field}: {text}"))

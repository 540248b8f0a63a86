"""How results look: tables for people, JSON or YAML for scripts (``-o json|yaml``).

On a terminal, tables have borders and colours and fit the window; anywhere else (a pipe, a file)
they are plain columns, never wrapped or cut, so ``ls | grep`` and ``feed > log`` keep whole ids
and whole lines.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import yaml
from pydantic import BaseModel
from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from sessiontodo_client import (
    Connection,
    ConnectionState,
    FeedEvent,
    ServiceError,
    Session,
    Todo,
    TodoPriority,
    TodoStatus,
    WatchEvent,
)

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
    YAML = "yaml"


def plain_data(value: Any) -> Any:
    """A model, a list of models or plain data, as JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [plain_data(item) for item in value]
    return value


def as_json(value: Any) -> str:
    """One line of JSON for a model, a list of models or plain data."""
    return json.dumps(plain_data(value), ensure_ascii=False)


def as_yaml(value: Any) -> str:
    """A YAML document (block style, keys in their order) for a model, a list of models or plain data."""
    return yaml.safe_dump(plain_data(value), sort_keys=False, allow_unicode=True).rstrip("\n")


def table(*columns: str, plain: bool, title: str | None = None, caption: str | None = None) -> Table:
    """A table with borders for a terminal, or ``plain`` columns separated by two spaces."""
    made = Table(
        title=title,
        caption=caption,
        title_justify="left",
        caption_justify="left",
        box=None if plain else box.HEAVY_HEAD,
        pad_edge=not plain,
        padding=(0, 2, 0, 0) if plain else (0, 1),
    )
    for column in columns:
        made.add_column(column, justify="right" if column in ("#", "REVISION", "TODOS") else "left")
    return made


def todos_table(
    todos: Sequence[Todo],
    *,
    plain: bool,
    title: str | None = None,
    caption: str | None = None,
    whole: Sequence[Todo] | None = None,
) -> Table:
    """A list with each todo's position (what ``done``, ``start``… accept, as well as an id prefix). When a
    todo has an owner or blockers, OWNER and BLOCKED BY columns show them (the blockers not finished yet,
    by position). ``whole``: the list ``todos`` were selected from (positions and blockers are its)."""
    whole = todos if whole is None else whole
    positions = {todo.id: position for position, todo in enumerate(whole)}
    graph = any(todo.owner or todo.blocked_by for todo in whole)
    columns = ("#", "", "ID", "PRIORITY", *(("OWNER", "BLOCKED BY") if graph else ()), "CONTENT")
    shown = table(*columns, plain=plain, title=title, caption=caption)
    for todo in todos:
        mark, style = _MARKS[todo.status] if isinstance(todo.status, TodoStatus) else _UNKNOWN_MARK
        priority = todo.priority.value if isinstance(todo.priority, TodoPriority) else str(todo.priority)
        extra = (todo.owner, waiting_for(todo, whole, positions)) if graph else ()
        position = str(positions.get(todo.id, ""))
        shown.add_row(position, Text(mark, style), Text(todo.id, "cyan"), priority, *extra, Text(todo.content, style))
    return shown


def waiting_for(todo: Todo, todos: Sequence[Todo], positions: Mapping[str, int]) -> str:
    """The blockers of ``todo`` not finished yet (completed and cancelled ones hold nothing back), by position."""
    finished = {other.id for other in todos if other.status in (TodoStatus.COMPLETED, TodoStatus.CANCELLED)}
    waiting = [blocker for blocker in todo.blocked_by if blocker not in finished]
    return ",".join(f"#{positions[blocker]}" if blocker in positions else blocker for blocker in waiting)


def labels_text(labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


GLOBAL_LIST_NOTE = "sessiontodo:global, the shared list, is no session: sessiontodoctl get sessiontodo:global"
"""Why the board and the feed show a list ``ls`` does not (RFC-0034's global list has a reserved id); said on a
terminal only, so that a script reading the columns gets nothing else."""


def sessions_table(sessions: Sequence[Session], *, plain: bool) -> Table:
    caption = None if plain else GLOBAL_LIST_NOTE
    shown = table("SESSION", "PARENT", "REVISION", "TODOS", "LABELS", plain=plain, caption=caption)
    for session in sessions:
        row = (session.parent_id, str(session.revision), str(session.todo_count), labels_text(session.labels))
        shown.add_row(Text(session.session_id, "bold"), *row)
    return shown


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


def watch_view(event: WatchEvent, *, plain: bool, connection: str = "") -> Group:
    """The live view of one session: a header with its revision, the last change and the connection,
    then the list."""
    header = Text.assemble(
        ("session ", "dim"),
        (event.session_id, "bold"),
        ("  revision ", "dim"),
        (str(event.revision), "bold"),
        ("  last change ", "dim"),
        event.kind.value,
        (f" {event.todo_id}" if event.todo_id else "", "cyan"),
        (f"  by {event.origin}" if event.origin else "", "dim"),
        (f"  [{connection}]" if connection else "", "yellow"),
    )
    if event.kind.value == "session_removed":
        return Group(header, Text("the session was removed", "bold red"))
    return Group(header, todos_table(event.todos, plain=plain, caption=summary(event.todos)))


def connection_line(connection: Connection, address: str) -> str:
    """A change of a watch's connection, for people: what happens, where, and where the stream resumes."""
    after = f" at {connection.after}" if connection.after else ""
    if connection.state is ConnectionState.CONNECTING:
        return f"connecting to {address}…"
    if connection.state is ConnectionState.CONNECTED:
        return f"connected to {address}{after}"
    if connection.state is ConnectionState.RESUMED:
        return f"resumed{after}" if after else "resumed with a fresh snapshot"
    reason = f" ({connection.error})" if connection.error else ""
    return f"reconnecting to {address} in {connection.retry_in or 0:.1f}s{reason}"


def error(console: Console, output: Output, failure: ServiceError, hint: str = "") -> None:
    """A failed call on stderr, once: its gRPC code and message, or each field violation on its own line;
    ``hint`` says what to do about it."""
    if output is not Output.TABLE:
        data = {
            "code": failure.code.name,
            "message": failure.message,
            "reason": failure.reason,
            "violations": [{"field": field, "description": text} for field, text in failure.violations],
        }
        console.out(as_json(data) if output is Output.JSON else as_yaml(data), highlight=False)
        return
    if failure.violations:
        console.print(Text.assemble(("Error: ", "bold red"), f"{failure.code.name}:"), soft_wrap=True)
        for field, text in failure.violations:
            console.print(Text(f"  {field}: {text}"), soft_wrap=True)
    else:
        console.print(Text.assemble(("Error: ", "bold red"), f"{failure.code.name}: {failure.message}"), soft_wrap=True)
    if hint:
        console.print(Text(hint, "dim"), soft_wrap=True)

"""The commands of ``sessiontodoctl``, an etcdctl-style CLI for sessiontodo.

Address, TLS, client certificate and token come from flags or ``SESSIONTODO_*`` environment
variables, by the typed client's rules (``ChannelSecurity``: a token in plaintext only to a
loopback address); unusable ones are one line on stderr and exit status 2. Every command prints a
table for people or, with ``--output json``, JSON for scripts. A failed call prints its gRPC
code, message and field violations on stderr and exits with status 1.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import grpc
import typer
from pydantic import SecretStr, TypeAdapter, ValidationError
from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from sessiontodo_client import ChannelSecurity, ServiceError, Todo, TodoPriority, TodoStatus
from sessiontodo_ctl import render
from sessiontodo_ctl.calls import TodoCalls, open_channel
from sessiontodo_ctl.render import Output

app = typer.Typer(
    name="sessiontodoctl",
    help="Look at and change sessiontodo's per-session todo lists.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class State:
    """What every command needs; tests pass one with ``channel`` set (a ``grpc_testing`` channel)."""

    channel: grpc.Channel | None = None
    calls: TodoCalls = field(init=False)
    output: Output = Output.TABLE
    console: Console = field(default_factory=Console)
    errors: Console = field(default_factory=lambda: Console(stderr=True))

    def show(self, table: Any, data: Any) -> None:
        """``table`` (a rich renderable) for people, ``data`` as one JSON line for scripts."""
        if self.output is Output.JSON:
            self.console.out(render.as_json(data), highlight=False)
        else:
            self.console.print(table)


def _state(ctx: typer.Context) -> State:
    state = ctx.obj
    assert isinstance(state, State)
    return state


def _reports_errors(command: F) -> F:
    """A failed call is rendered, and the command exits with status 1."""

    @functools.wraps(command)
    def wrapper(ctx: typer.Context, *args: Any, **kwargs: Any) -> Any:
        try:
            return command(ctx, *args, **kwargs)
        except ServiceError as failure:
            state = _state(ctx)
            render.error(state.errors, state.output, failure)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


@app.callback()
def options(
    ctx: typer.Context,
    address: Annotated[
        str, typer.Option("--address", "-a", envvar="SESSIONTODO_ADDRESS", help="host:port of the server.")
    ] = "127.0.0.1:50051",
    tls: Annotated[bool, typer.Option(envvar="SESSIONTODO_TLS", help="Use TLS with the system's roots.")] = False,
    tls_ca: Annotated[
        Path | None,
        typer.Option(envvar="SESSIONTODO_TLS_CA", exists=True, dir_okay=False, help="Use TLS, trusting this CA (PEM)."),
    ] = None,
    client_cert: Annotated[
        Path | None,
        typer.Option(
            envvar="SESSIONTODO_CLIENT_CERT",
            dir_okay=False,
            help="Client certificate (PEM) for mutual TLS; implies TLS.",
        ),
    ] = None,
    client_key: Annotated[
        Path | None, typer.Option(envvar="SESSIONTODO_CLIENT_KEY", dir_okay=False, help="Private key of --client-cert.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SESSIONTODO_TOKEN",
            help="Bearer token sent with every call (over TLS, or in plaintext to a loopback address only).",
        ),
    ] = None,
    token_file: Annotated[
        Path | None, typer.Option(envvar="SESSIONTODO_TOKEN_FILE", dir_okay=False, help="File holding the token.")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each call may take.")] = 10.0,
    output: Annotated[
        Output, typer.Option("--output", "-o", envvar="SESSIONTODO_OUTPUT", help="table, or json for scripts.")
    ] = Output.TABLE,
) -> None:
    state = ctx.obj if isinstance(ctx.obj, State) else State()
    channel = state.channel
    if channel is None:
        try:
            secret = SecretStr(token) if token is not None else None
            security = ChannelSecurity.from_files(tls, tls_ca, client_cert, client_key, secret, token_file)
            channel = open_channel(address, security)
        except (OSError, ValueError) as unusable:  # files that do not load, a token that would travel in clear
            typer.echo(f"sessiontodoctl: {unusable}", err=True)
            raise typer.Exit(2) from None
        ctx.call_on_close(channel.close)
    state.calls = TodoCalls(channel, timeout)
    state.output = output
    ctx.obj = state


@app.command()
@_reports_errors
def health(ctx: typer.Context) -> None:
    """Whether the server and its TodoService are SERVING (exit status 1 if not)."""
    state = _state(ctx)
    statuses = state.calls.health()
    table = Table("SERVICE", "STATUS")
    for service, status in statuses.items():
        table.add_row(service or "(server)", Text(status, "green" if status == "SERVING" else "bold red"))
    state.show(table, {service or "server": status for service, status in statuses.items()})
    if any(status != "SERVING" for status in statuses.values()):
        raise typer.Exit(1)


def _labels(pairs: list[str]) -> dict[str, str]:
    """``key=value`` options as a mapping."""
    labels = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise typer.BadParameter(f"{pair!r} is not key=value", param_hint="--label")
        labels[key] = value
    return labels


LabelOption = Annotated[
    list[str], typer.Option("--label", "-l", help="key=value; repeat for several (all must match).")
]


@app.command("ls")
@_reports_errors
def list_sessions(
    ctx: typer.Context,
    parent: Annotated[str, typer.Option(help="Only the children of this session.")] = "",
    label: LabelOption = [],  # noqa: B006 (typer reads the default, never mutates it)
) -> None:
    """Every session: id, parent, revision, number of todos and labels."""
    state = _state(ctx)
    sessions = state.calls.list_sessions(parent, _labels(label))
    state.show(render.sessions_table(sessions), sessions)


@app.command()
@_reports_errors
def get(ctx: typer.Context, session: Annotated[str, typer.Argument(help="Session id.")]) -> None:
    """A session's todos and revision."""
    state = _state(ctx)
    todos = state.calls.get_todos(session)
    caption = f"revision {todos.revision}, {render.summary(todos.todos)}"
    state.show(render.todos_table(todos.todos, title=session, caption=caption), todos)


@app.command()
@_reports_errors
def create(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id; generated when omitted.")] = "",
    parent: Annotated[str, typer.Option(help="Parent session id (a child has its own list).")] = "",
    label: LabelOption = [],  # noqa: B006
) -> None:
    """Create a session (or find the existing one)."""
    state = _state(ctx)
    created_session, created = state.calls.create_session(session, parent, _labels(label))
    message = f"{'created' if created else 'exists'} {created_session.session_id}"
    state.show(message, {"session": created_session.model_dump(mode="json"), "created": created})


@app.command("rm")
@_reports_errors
def remove(ctx: typer.Context, session: Annotated[str, typer.Argument(help="Session id.")]) -> None:
    """Remove a session and its descendants (exit status 1 if it did not exist)."""
    state = _state(ctx)
    removed = state.calls.remove_session(session)
    state.show("\n".join(f"removed {session_id}" for session_id in removed) or f"no session {session}", removed)
    if not removed:
        raise typer.Exit(1)


_TODO_LIST = TypeAdapter(list[Todo])


def _read_plan(path: Path) -> list[Todo]:
    """A JSON list of todos, or an object with ``todos`` (what ``get -o json`` prints)."""
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    try:
        data = TypeAdapter(Any).validate_json(text)
        return _TODO_LIST.validate_python(data["todos"] if isinstance(data, dict) and "todos" in data else data)
    except ValidationError as invalid:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in problem['loc']) or 'plan'}: {problem['msg']}"
            for problem in invalid.errors()
        )
        raise typer.BadParameter(f"{path} is not a list of todos: {problems}", param_hint="--file") from None


@app.command()
@_reports_errors
def replace(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    file: Annotated[Path, typer.Option("--file", "-f", allow_dash=True, help="JSON list of todos ('-' reads stdin).")],
    expected_revision: Annotated[
        int | None, typer.Option(help="Only if the list is still at this revision (else ABORTED).")
    ] = None,
) -> None:
    """Replace a session's whole list with the todos in a JSON file."""
    state = _state(ctx)
    todos = state.calls.replace_todos(session, _read_plan(file), expected_revision)
    caption = f"revision {todos.revision}, {render.summary(todos.todos)}"
    state.show(render.todos_table(todos.todos, title=session, caption=caption), todos)


@app.command()
@_reports_errors
def add(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    content: Annotated[str, typer.Argument(help="What to do.")],
    priority: Annotated[TodoPriority, typer.Option(help="high, medium or low.")] = TodoPriority.MEDIUM,
    status: Annotated[TodoStatus, typer.Option(help="pending, in_progress, completed or cancelled.")] = (
        TodoStatus.PENDING
    ),
    index: Annotated[int | None, typer.Option(help="Insert at this position (default: append).")] = None,
) -> None:
    """Add one todo."""
    state = _state(ctx)
    added = state.calls.add_todo(session, Todo(content=content, priority=priority, status=status), index)
    state.show(f"added {added.todo.id} at {added.index}, revision {added.revision}", added)


@app.command()
@_reports_errors
def done(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    todo: Annotated[str, typer.Argument(help="Todo id.")],
) -> None:
    """Mark a todo completed."""
    state = _state(ctx)
    updated = state.calls.complete_todo(session, todo)
    message = f"completed {todo}, revision {updated.revision}" if updated.changed else f"{todo} was already completed"
    state.show(message, updated)


@app.command()
@_reports_errors
def watch(ctx: typer.Context, session: Annotated[str, typer.Argument(help="Session id.")]) -> None:
    """A live view of a session's list, updated at every change (JSON: one line per change). Ctrl-C ends it."""
    state = _state(ctx)
    events = state.calls.watch(session)
    try:
        if state.output is Output.JSON:
            for event in events:
                state.console.out(render.as_json(event), highlight=False)
            return
        first = next(events, None)
        if first is None:
            return
        with Live(render.watch_view(first), console=state.console, auto_refresh=False) as live:
            for event in events:
                live.update(render.watch_view(event), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        events.close()


@app.command()
@_reports_errors
def feed(
    ctx: typer.Context,
    session: Annotated[list[str], typer.Option("--session", "-s", help="Only this session; repeat for several.")] = [],  # noqa: B006
    parent: Annotated[str, typer.Option(help="Only the children of this session.")] = "",
    label: LabelOption = [],  # noqa: B006
    snapshot: Annotated[bool, typer.Option(help="Start with every matching session's current list.")] = False,
    after: Annotated[str, typer.Option(help="Resume after this cursor (printed with -o json).")] = "",
) -> None:
    """Tail every change of every session (or those matching the filters), one line each. Ctrl-C ends it."""
    state = _state(ctx)
    events = state.calls.feed(
        after, include_snapshot=snapshot, session_ids=session, parent_id=parent, labels=_labels(label)
    )
    try:
        for event in events:
            if state.output is Output.JSON:
                state.console.out(render.as_json(event), highlight=False)
            else:
                state.console.print(render.feed_line(event))
    except KeyboardInterrupt:
        pass
    finally:
        events.close()


def main() -> None:
    app()

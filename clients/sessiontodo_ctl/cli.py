"""The commands of ``sessiontodoctl``, held to etcdctl's and kubectl's standard.

Address, TLS, client certificate and token come from flags or ``SESSIONTODO_*`` environment
variables, by the typed client's rules (``ChannelSecurity``: a token in plaintext only to a
loopback address). Every read prints a table for people or, with ``-o json|yaml``, data for
scripts; tables are plain columns (never wrapped or cut) when stdout is not a terminal. A todo is
named by its id, a unique prefix of it, or its position in the list (0 first, as ``get`` shows).
A wrong flag or value is one line and exit status 2; a failed call prints its gRPC code and
message once (each field violation on its own line) and exits with status 1.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import grpc
import typer
import typer.core
from pydantic import SecretStr, TypeAdapter, ValidationError
from rich.console import Console
from rich.live import Live
from rich.text import Text

from sessiontodo_client import (
    Connection,
    NotFound,
    ServiceError,
    Todo,
    TodoList,
    TodoPriority,
    TodoStatus,
    WatchEvent,
    __version__,
)
from sessiontodo_client.security import ChannelSecurity
from sessiontodo_client.target import check_host_exists, service_target
from sessiontodo_ctl import render
from sessiontodo_ctl.calls import ServerWait, TodoCalls, open_channel
from sessiontodo_ctl.render import Output

if TYPE_CHECKING:
    from typer._click.core import Command, Context  # typer's own click, which TyperGroup extends

PROG = "sessiontodoctl"
CONNECTION = "Connection"
"""The help panel of the options that say where the server is and how to reach it."""

SYNONYMS = {"delete": "rm", "remove": "rm", "list": "ls", "show": "get", "new": "create", "complete": "done"}
"""Verbs people reach for that are spelled otherwise here: named in the error ("did you mean 'rm'?")."""


class _UnknownVerb(typer.TyperException):
    """A verb spelled as another tool spells it: one line naming ours, exit status 2 (a usage error)."""

    exit_code = 2

    def __init__(self, message: str, ctx: Context) -> None:
        super().__init__(message)
        self.ctx = ctx


class _Verbs(typer.core.TyperGroup):
    """The commands, with a suggestion for a verb from another tool (``delete``: ``rm``)."""

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        if args and args[0] in SYNONYMS and self.get_command(ctx, args[0]) is None:
            raise _UnknownVerb(f"No such command {args[0]!r}. Did you mean {SYNONYMS[args[0]]!r}?", ctx)
        return super().resolve_command(ctx, args)


app = typer.Typer(
    name=PROG,
    cls=_Verbs,
    help="Look at and change sessiontodo's per-session todo lists.\n\n"
    "Example: sessiontodoctl create demo && sessiontodoctl add demo 'Write the parser' && sessiontodoctl get demo",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

F = TypeVar("F", bound=Callable[..., Any])


class Unusable(typer.TyperException):
    """Options that parse but cannot be used (files that do not load, a token that would travel in clear):
    one line and exit status 2, as a usage error."""

    exit_code = 2


@dataclass
class State:
    """What every command needs; tests pass one with ``channel`` set (a ``grpc_testing`` channel)."""

    channel: grpc.Channel | None = None
    calls: TodoCalls = field(init=False)
    address: str = ""
    output: Output = Output.TABLE
    console: Console = field(default_factory=Console)
    errors: Console = field(default_factory=lambda: Console(stderr=True))

    def __post_init__(self) -> None:
        if not self.console.is_terminal:  # a pipe or a file: never wrap or cut a line
            self.console.width = 1 << 20

    @property
    def plain(self) -> bool:
        """Plain columns without borders or colours: stdout is not a terminal."""
        return not self.console.is_terminal

    def show(self, table: Any, data: Any) -> None:
        """``table`` (text or a rich renderable) for people, ``data`` as JSON (one line) or YAML for scripts."""
        if self.output is Output.JSON:
            self.console.out(render.as_json(data), highlight=False)
        elif self.output is Output.YAML:
            self.console.out(render.as_yaml(data), highlight=False)
        elif self.plain:
            with self.console.capture() as captured:
                self.console.print(table, soft_wrap=isinstance(table, str | Text))
            self.console.out("\n".join(line.rstrip() for line in captured.get().splitlines()), highlight=False)
        else:
            self.console.print(table)

    def stream(self, data: Any) -> None:
        """One item of a stream for scripts: a JSON line, or a YAML document."""
        if self.output is Output.JSON:
            self.console.out(render.as_json(data), highlight=False)
        else:
            self.console.out("---\n" + render.as_yaml(data), highlight=False)

    def tell(self, connection: Connection) -> None:
        """A change of a watch's connection, on stderr (stdout stays the data)."""
        self.errors.print(Text(render.connection_line(connection, self.address), "dim"), soft_wrap=True)


def _state(ctx: typer.Context) -> State:
    state = ctx.obj
    assert isinstance(state, State)
    return state


def _reports_errors(*, write: bool = False) -> Callable[[F], F]:
    """A failed call is printed once, and the command exits with status 1; a write to a session that
    does not exist says to create it first."""

    def decorate(command: F) -> F:
        @functools.wraps(command)
        def wrapper(ctx: typer.Context, *args: Any, **kwargs: Any) -> Any:
            try:
                return command(ctx, *args, **kwargs)
            except ServiceError as failure:
                state = _state(ctx)
                hint = ""
                if write and isinstance(failure, NotFound) and failure.reason == "SESSION_NOT_FOUND":
                    session = failure.metadata.get("sessionId") or kwargs.get("session", "ID")
                    hint = f"create the session first: {PROG} create {session}"
                render.error(state.errors, state.output, failure, hint)
                raise typer.Exit(1) from None

        return wrapper  # type: ignore[return-value]

    return decorate


@app.callback()
def options(
    ctx: typer.Context,
    address: Annotated[
        str,
        typer.Option(
            "--sessiontodo-address",
            "--address",
            "-a",
            envvar="SESSIONTODO_ADDRESS",
            metavar="HOST:PORT",
            help="The server (a host alone: port 50051); --address is the older spelling.",
            rich_help_panel=CONNECTION,
        ),
    ] = "127.0.0.1:50051",
    tls: Annotated[
        bool,
        typer.Option(envvar="SESSIONTODO_TLS", help="Use TLS with the system's roots.", rich_help_panel=CONNECTION),
    ] = False,
    tls_ca: Annotated[
        Path | None,
        typer.Option(
            envvar="SESSIONTODO_TLS_CA",
            exists=True,
            dir_okay=False,
            metavar="FILE",
            help="Use TLS, trusting this CA (PEM).",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    client_cert: Annotated[
        Path | None,
        typer.Option(
            envvar="SESSIONTODO_CLIENT_CERT",
            dir_okay=False,
            metavar="FILE",
            help="Client certificate (PEM) for mutual TLS; implies TLS.",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    client_key: Annotated[
        Path | None,
        typer.Option(
            envvar="SESSIONTODO_CLIENT_KEY",
            dir_okay=False,
            metavar="FILE",
            help="Private key of --client-cert.",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SESSIONTODO_TOKEN",
            metavar="TOKEN",
            help="Bearer token sent with every call (over TLS, or in plaintext to a loopback address only).",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            envvar="SESSIONTODO_TOKEN_FILE",
            dir_okay=False,
            metavar="FILE",
            help="File holding the token.",
            rich_help_panel=CONNECTION,
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            envvar="SESSIONTODO_TIMEOUT",
            metavar="SECONDS",
            help="Seconds each call may take.",
            rich_help_panel=CONNECTION,
        ),
    ] = 10.0,
    output: Annotated[
        Output,
        typer.Option("--output", "-o", envvar="SESSIONTODO_OUTPUT", help="table for people, json or yaml for scripts."),
    ] = Output.TABLE,
    log_level: Annotated[
        str,
        typer.Option(envvar="SESSIONTODO_LOG_LEVEL", metavar="LEVEL", help="debug shows tracebacks and gRPC's logs."),
    ] = "warning",
) -> None:
    """Options every command shares."""
    logging.basicConfig(stream=sys.stderr, level=log_level.upper())
    state = ctx.obj if isinstance(ctx.obj, State) else State()
    channel = state.channel
    wait = None
    if channel is None:
        try:
            address = service_target(address)
            secret = SecretStr(token) if token is not None else None
            security = ChannelSecurity.from_files(
                tls=tls,
                ca_file=tls_ca,
                client_cert=client_cert,
                client_key=client_key,
                token=secret,
                token_file=token_file,
            )
            channel = open_channel(address, security)
            ctx.call_on_close(channel.close)
            check_host_exists(address)
        except (OSError, ValueError) as unusable:  # files that do not load, a token in clear, a host that is not
            raise Unusable(str(unusable)) from None
        wait = ServerWait(address, lambda line: state.errors.print(Text(f"{PROG}: {line}", "dim"), soft_wrap=True))
    state.calls = TodoCalls(channel, timeout, wait=wait)
    state.address = address
    state.output = output
    ctx.obj = state


OutputOption = Annotated[
    Output | None,
    typer.Option("--output", "-o", help="table for people, json or yaml for scripts (here or before the command)."),
]


def _with_output(ctx: typer.Context, output: Output | None) -> State:
    """The state of a command, printing as ``-o`` given after the command says, if it was."""
    state = _state(ctx)
    if output is not None:
        state.output = output
    return state


SessionArgument = Annotated[str, typer.Argument(metavar="SESSION", help="Session id.")]
TodoArgument = Annotated[
    str, typer.Argument(metavar="TODO", help="Todo id, a unique prefix of it, or its position (0 first).")
]
LabelOption = Annotated[
    list[str], typer.Option("--label", "-l", metavar="KEY=VALUE", help="Repeat for several (all must match).")
]


@app.command(epilog=f"Example: {PROG} version -o json")
def version(ctx: typer.Context, output: OutputOption = None) -> None:
    """This command's version (the typed client's, which is sessiontodo's)."""
    _with_output(ctx, output).show(f"{PROG} {__version__}", {"sessiontodoctl": __version__})


@app.command(epilog=f"Example: {PROG} health")
@_reports_errors()
def health(ctx: typer.Context, output: OutputOption = None) -> None:
    """Whether the server and its TodoService are SERVING (exit status 1 if not)."""
    state = _with_output(ctx, output)
    statuses = state.calls.health()
    table = render.table("SERVICE", "STATUS", plain=state.plain)
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


@app.command("ls", epilog=f"Example: {PROG} ls --label project=web -o json")
@_reports_errors()
def list_sessions(
    ctx: typer.Context,
    parent: Annotated[str, typer.Option(metavar="SESSION", help="Only the children of this session.")] = "",
    label: LabelOption = [],  # noqa: B006 (typer reads the default, never mutates it)
    output: OutputOption = None,
) -> None:
    """Every session: id, parent, revision, number of todos and labels."""
    state = _with_output(ctx, output)
    sessions = state.calls.list_sessions(parent, _labels(label))
    state.show(render.sessions_table(sessions, plain=state.plain), sessions)


def _list_table(state: State, session: str, todos: TodoList) -> Any:
    caption = f"revision {todos.revision}, {render.summary(todos.todos)}"
    return render.todos_table(todos.todos, plain=state.plain, title=session, caption=caption)


@app.command(epilog=f"Example: {PROG} get demo")
@_reports_errors()
def get(ctx: typer.Context, session: SessionArgument, output: OutputOption = None) -> None:
    """A session's todos (with their positions, owners and unfinished blockers) and revision."""
    state = _with_output(ctx, output)
    todos = state.calls.get_todos(session)
    state.show(_list_table(state, session, todos), todos)


@app.command(epilog=f"Example: {PROG} ready demo")
@_reports_errors()
def ready(ctx: typer.Context, session: SessionArgument, output: OutputOption = None) -> None:
    """The todos free to take: pending, unowned, every blocker completed or cancelled."""
    state = _with_output(ctx, output)
    whole = state.calls.get_todos(session)
    free = state.calls.get_todos(session, ready=True)
    caption = f"revision {free.revision}, {len(free.todos)} ready of {len(whole.todos)}"
    shown = render.todos_table(free.todos, plain=state.plain, title=session, caption=caption, whole=whole.todos)
    state.show(shown, free)


@app.command(epilog=f"Example: {PROG} create demo --label project=web")
@_reports_errors(write=True)
def create(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(metavar="[SESSION]", help="Session id; generated when omitted.")] = "",
    parent: Annotated[str, typer.Option(metavar="SESSION", help="Parent session id (a child has its own list).")] = "",
    label: LabelOption = [],  # noqa: B006
    output: OutputOption = None,
) -> None:
    """Create a session (or find the existing one)."""
    state = _with_output(ctx, output)
    created_session, created = state.calls.create_session(session, parent, _labels(label))
    message = f"{'created' if created else 'exists'} {created_session.session_id}"
    state.show(message, {"session": created_session.model_dump(mode="json"), "created": created})


@app.command("rm", epilog=f"Example: {PROG} rm demo")
@_reports_errors()
def remove(ctx: typer.Context, session: SessionArgument, output: OutputOption = None) -> None:
    """Remove a session and its descendants (exit status 1 if it did not exist)."""
    state = _with_output(ctx, output)
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


@app.command(epilog=f"Example: {PROG} get demo -o json > plan.json && {PROG} replace demo -f plan.json")
@_reports_errors(write=True)
def replace(
    ctx: typer.Context,
    session: SessionArgument,
    file: Annotated[
        Path,
        typer.Option("--file", "-f", allow_dash=True, metavar="FILE", help="JSON list of todos ('-' reads stdin)."),
    ],
    expected_revision: Annotated[
        int | None, typer.Option(metavar="N", help="Only if the list is still at this revision (else ABORTED).")
    ] = None,
    output: OutputOption = None,
) -> None:
    """Replace a session's whole list with the todos in a JSON file."""
    state = _with_output(ctx, output)
    todos = state.calls.replace_todos(session, _read_plan(file), expected_revision)
    state.show(_list_table(state, session, todos), todos)


@app.command(epilog=f"Example: {PROG} add demo 'Write the tests' --blocked-by 0")
@_reports_errors(write=True)
def add(
    ctx: typer.Context,
    session: SessionArgument,
    content: Annotated[str, typer.Argument(metavar="CONTENT", help="What to do.")],
    priority: Annotated[TodoPriority, typer.Option(help="high, medium or low.")] = TodoPriority.MEDIUM,
    status: Annotated[TodoStatus, typer.Option(help="pending, in_progress, completed or cancelled.")] = (
        TodoStatus.PENDING
    ),
    index: Annotated[int | None, typer.Option(metavar="N", help="Insert at this position (default: append).")] = None,
    description: Annotated[str, typer.Option(metavar="TEXT", help="The details of the work.")] = "",
    blocked_by: Annotated[
        list[str],
        typer.Option(metavar="TODO", help="A todo that must be finished first (id, prefix or position); repeat."),
    ] = [],  # noqa: B006
    output: OutputOption = None,
) -> None:
    """Add one todo."""
    state = _with_output(ctx, output)
    blockers = _blockers(state, session, blocked_by)
    todo = Todo(content=content, priority=priority, status=status, description=description, blocked_by=blockers)
    added = state.calls.add_todo(session, todo, index)
    state.show(f"added {added.todo.id} at {added.index}, revision {added.revision}", added)


def _blockers(state: State, session: str, references: Sequence[str]) -> list[str]:
    """The ids that ``references`` (ids, prefixes or positions) name in the session's list."""
    if not references:
        return []
    todos = state.calls.get_todos(session)
    return [find_todo(todos, reference, session).todo.id for reference in references]


@dataclass(frozen=True)
class Found:
    """The todo a reference names, where it is, and the revision it was read at (kept only for a position:
    the write then fails with ABORTED rather than touch another todo if the list moved meanwhile)."""

    todo: Todo
    position: int
    todos: TodoList
    expected_revision: int | None


def find_todo(todos: TodoList, reference: str, session: str) -> Found:
    """The todo ``reference`` names: its exact id, else its position (0 first), else a unique id prefix."""
    for position, todo in enumerate(todos.todos):
        if todo.id == reference:
            return Found(todo, position, todos, None)
    if reference.isdigit() and int(reference) < len(todos.todos):
        position = int(reference)
        return Found(todos.todos[position], position, todos, todos.revision)
    matches = [(position, todo) for position, todo in enumerate(todos.todos) if todo.id.startswith(reference)]
    if len(matches) == 1 and reference:
        position, todo = matches[0]
        return Found(todo, position, todos, None)
    if matches:
        ids = ", ".join(todo.id for _, todo in matches)
        raise typer.BadParameter(
            f"todo {reference!r} is ambiguous in {session}: it begins {ids}; give more of the id", param_hint="TODO"
        )
    count = len(todos.todos)
    positions = {0: "", 1: "position 0, "}.get(count, f"a position 0-{count - 1}, ")
    raise typer.BadParameter(
        f"no todo {reference!r} in {session}: give {positions}an id or a unique id prefix "
        f"({PROG} get {session} shows them)",
        param_hint="TODO",
    )


def _find(state: State, session: str, reference: str) -> Found:
    return find_todo(state.calls.get_todos(session), reference, session)


def _set_status(
    ctx: typer.Context, session: str, reference: str, status: TodoStatus, verb: str, output: Output | None
) -> None:
    state = _with_output(ctx, output)
    found = _find(state, session, reference)
    updated = state.calls.update_todo(session, found.todo.id, status=status, expected_revision=found.expected_revision)
    message = (
        f"{verb} {found.todo.id}, revision {updated.revision}"
        if updated.changed
        else f"{found.todo.id} was already {verb}"
    )
    state.show(message, updated)


@app.command(epilog=f"Example: {PROG} start demo 0")
@_reports_errors(write=True)
def start(ctx: typer.Context, session: SessionArgument, todo: TodoArgument, output: OutputOption = None) -> None:
    """Mark a todo in progress."""
    _set_status(ctx, session, todo, TodoStatus.IN_PROGRESS, "started", output)


@app.command(epilog=f"Example: {PROG} done demo 0")
@_reports_errors(write=True)
def done(ctx: typer.Context, session: SessionArgument, todo: TodoArgument, output: OutputOption = None) -> None:
    """Mark a todo completed."""
    _set_status(ctx, session, todo, TodoStatus.COMPLETED, "completed", output)


@app.command(epilog=f"Example: {PROG} cancel demo 2")
@_reports_errors(write=True)
def cancel(ctx: typer.Context, session: SessionArgument, todo: TodoArgument, output: OutputOption = None) -> None:
    """Mark a todo cancelled (it stays in the list, struck through)."""
    _set_status(ctx, session, todo, TodoStatus.CANCELLED, "cancelled", output)


@app.command(epilog=f"Example: {PROG} edit demo 1 --content 'Write the lexer' --priority high")
@_reports_errors(write=True)
def edit(
    ctx: typer.Context,
    session: SessionArgument,
    todo: TodoArgument,
    content: Annotated[str | None, typer.Option(metavar="TEXT", help="New content.")] = None,
    priority: Annotated[TodoPriority | None, typer.Option(help="high, medium or low.")] = None,
    status: Annotated[TodoStatus | None, typer.Option(help="pending, in_progress, completed or cancelled.")] = None,
    output: OutputOption = None,
) -> None:
    """Change a todo's content, priority or status; what is not given stays."""
    if content is None and priority is None and status is None:
        raise typer.BadParameter("nothing to change: give --content, --priority or --status")
    state = _with_output(ctx, output)
    found = _find(state, session, todo)
    updated = state.calls.update_todo(
        session,
        found.todo.id,
        content=content,
        status=status,
        priority=priority,
        expected_revision=found.expected_revision,
    )
    message = (
        f"edited {found.todo.id}, revision {updated.revision}" if updated.changed else f"{found.todo.id} unchanged"
    )
    state.show(message, updated)


@app.command("rm-todo", epilog=f"Example: {PROG} rm-todo demo 3")
@_reports_errors(write=True)
def remove_todo(ctx: typer.Context, session: SessionArgument, todo: TodoArgument, output: OutputOption = None) -> None:
    """Remove one todo from a session's list."""
    state = _with_output(ctx, output)
    found = _find(state, session, todo)
    revision = state.calls.remove_todo(session, found.todo.id, expected_revision=found.expected_revision)
    state.show(f"removed {found.todo.id}, revision {revision}", {"removed": found.todo.id, "revision": revision})


@app.command(epilog=f"Example: {PROG} move demo 3 0   # the fourth todo becomes the first")
@_reports_errors(write=True)
def move(
    ctx: typer.Context,
    session: SessionArgument,
    todo: TodoArgument,
    position: Annotated[int, typer.Argument(metavar="POSITION", min=0, help="Where it goes (0 first).")],
    output: OutputOption = None,
) -> None:
    """Move a todo to another position in its list (ABORTED if the list changed meanwhile)."""
    state = _with_output(ctx, output)
    found = _find(state, session, todo)
    others = [item for item in found.todos.todos if item.id != found.todo.id]
    if position > len(others):
        raise typer.BadParameter(f"position {position} is past the end of {session}'s list: give 0-{len(others)}")
    reordered = [*others[:position], found.todo, *others[position:]]
    todos = state.calls.replace_todos(session, reordered, found.todos.revision)
    state.show(_list_table(state, session, todos), todos)


OwnerOption = Annotated[
    str, typer.Option("--owner", metavar="NAME", help="Who works on it: an agent, a session or a person.")
]


@app.command(epilog=f"Example: {PROG} claim demo --owner worker-1 --lease 60")
@_reports_errors(write=True)
def claim(
    ctx: typer.Context,
    session: SessionArgument,
    owner: OwnerOption,
    todo: Annotated[
        str | None, typer.Argument(metavar="[TODO]", help="The todo to take; default: the first ready one.")
    ] = None,
    lease: Annotated[
        float | None, typer.Option(metavar="SECONDS", help="The claim lapses unless renewed within this time.")
    ] = None,
    output: OutputOption = None,
) -> None:
    """Take a todo (in progress, yours) atomically: of several claimers, exactly one gets it. Refused, with
    the reason, when it is taken, blocked or not pending; "nothing ready" is an answer (exit status 0)."""
    state = _with_output(ctx, output)
    todo_id = _find(state, session, todo).todo.id if todo is not None else ""
    got = state.calls.claim_todo(session, owner, todo_id, lease=lease)
    if got.todo is None:
        message = f"nothing ready in {session}, revision {got.revision}"
    else:
        lapses = f", lease {got.todo.lease_duration:g}s" if got.todo.lease_duration is not None else ""
        verb = "claimed" if got.changed else "already held"
        message = f"{verb} {got.todo.id} for {owner}{lapses}, revision {got.revision}"
    state.show(message, got)


@app.command(epilog=f"Example: {PROG} renew demo 0 --owner worker-1")
@_reports_errors(write=True)
def renew(
    ctx: typer.Context,
    session: SessionArgument,
    todo: TodoArgument,
    owner: OwnerOption,
    lease: Annotated[
        float | None, typer.Option(metavar="SECONDS", help="The new lease from now (default: the claim's own).")
    ] = None,
    output: OutputOption = None,
) -> None:
    """Push a claim's lease back (refused once the claim is not the owner's, e.g. after it lapsed)."""
    state = _with_output(ctx, output)
    found = _find(state, session, todo)
    renewed = state.calls.renew_claim(session, found.todo.id, owner, lease=lease)
    expires = renewed.todo.lease_expires_at if renewed.todo is not None else None
    until = f" until {expires.isoformat(timespec='seconds')}" if expires is not None else ""
    state.show(f"renewed {found.todo.id}{until}, revision {renewed.revision}", renewed)


@app.command(epilog=f"Example: {PROG} release demo 0 --owner worker-1")
@_reports_errors(write=True)
def release(
    ctx: typer.Context,
    session: SessionArgument,
    todo: TodoArgument,
    owner: OwnerOption,
    output: OutputOption = None,
) -> None:
    """Give a claimed todo back: pending and unowned again, ready for others once unblocked."""
    state = _with_output(ctx, output)
    found = _find(state, session, todo)
    released = state.calls.release_todo(session, found.todo.id, owner)
    state.show(f"released {found.todo.id}, revision {released.revision}", released)


OnOption = Annotated[
    list[str], typer.Option("--on", metavar="TODO", help="The todo it waits for (id, prefix or position); repeat.")
]


@app.command(epilog=f"Example: {PROG} block demo 2 --on 0   # todo 2 waits until todo 0 is finished")
@_reports_errors(write=True)
def block(
    ctx: typer.Context, session: SessionArgument, todo: TodoArgument, on: OnOption, output: OutputOption = None
) -> None:
    """Make a todo wait for others: it is not ready until they are completed (or cancelled)."""
    _link(ctx, session, todo, on, output, add=True)


@app.command(epilog=f"Example: {PROG} unblock demo 2 --on 0")
@_reports_errors(write=True)
def unblock(
    ctx: typer.Context, session: SessionArgument, todo: TodoArgument, on: OnOption, output: OutputOption = None
) -> None:
    """Stop a todo waiting for others."""
    _link(ctx, session, todo, on, output, add=False)


def _link(
    ctx: typer.Context, session: str, reference: str, on: Sequence[str], output: Output | None, *, add: bool
) -> None:
    if not on:
        raise typer.BadParameter("give the todo it waits for: --on TODO", param_hint="--on")
    state = _with_output(ctx, output)
    found = _find(state, session, reference)
    others = [find_todo(found.todos, other, session).todo.id for other in on]
    updated = state.calls.update_todo(
        session,
        found.todo.id,
        add_blocked_by=others if add else (),
        remove_blocked_by=() if add else others,
        expected_revision=found.expected_revision,
    )
    waits = ", ".join(updated.todo.blocked_by) or "nothing"
    message = (
        f"{found.todo.id} waits for {waits}, revision {updated.revision}"
        if updated.changed
        else (f"{found.todo.id} unchanged")
    )
    state.show(message, updated)


def _events_until_interrupted(events: Iterator[Any]) -> Iterator[Any]:
    """The events of a watch, ending quietly at Ctrl-C, the call cancelled either way."""
    try:
        yield from events
    except KeyboardInterrupt:
        pass
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()


@app.command(epilog=f"Example: {PROG} watch demo")
@_reports_errors()
def watch(ctx: typer.Context, session: SessionArgument, output: OutputOption = None) -> None:
    """A live view of a session's list, updated at every change, with the connection's state; JSON or YAML:
    one item per change. Ctrl-C ends it."""
    state = _with_output(ctx, output)
    if state.output is not Output.TABLE or state.plain:
        for event in _events_until_interrupted(state.calls.watch(session, on_connection=state.tell)):
            if state.output is Output.TABLE:
                state.show(render.watch_view(event, plain=True), event)
            else:
                state.stream(event)
        return
    last: list[WatchEvent] = []
    with Live(Text(f"connecting to {state.address}…", "dim"), console=state.console, auto_refresh=False) as live:

        def show(connection: Connection | None = None) -> None:
            status = "" if connection is None else render.connection_line(connection, state.address)
            if last:
                live.update(render.watch_view(last[-1], plain=False, connection=status), refresh=True)
            else:
                live.update(Text(status, "dim"), refresh=True)

        for event in _events_until_interrupted(state.calls.watch(session, on_connection=show)):
            last[:] = [event]
            show()


@app.command(epilog=f"Example: {PROG} feed --snapshot --label project=web")
@_reports_errors()
def feed(
    ctx: typer.Context,
    session: Annotated[
        list[str], typer.Option("--session", "-s", metavar="SESSION", help="Only this session; repeat for several.")
    ] = [],  # noqa: B006
    parent: Annotated[str, typer.Option(metavar="SESSION", help="Only the children of this session.")] = "",
    label: LabelOption = [],  # noqa: B006
    snapshot: Annotated[bool, typer.Option(help="Start with every matching session's current list.")] = False,
    after: Annotated[str, typer.Option(metavar="CURSOR", help="Resume after this cursor (printed with -o json).")] = "",
    output: OutputOption = None,
) -> None:
    """Tail every change of every session (or those matching the filters), one line each; the connection's
    state goes to stderr. Ctrl-C ends it."""
    state = _with_output(ctx, output)
    events = state.calls.feed(
        after,
        include_snapshot=snapshot,
        session_ids=session,
        parent_id=parent,
        labels=_labels(label),
        on_connection=state.tell,
    )
    for event in _events_until_interrupted(events):
        if state.output is Output.TABLE:
            state.console.print(render.feed_line(event), soft_wrap=True)
        else:
            state.stream(event)


def main(args: Sequence[str] | None = None) -> None:
    """Run one command: a usage error is one line and exit 2, anything unexpected one line and exit 1
    (its traceback only with ``--log-level debug``)."""
    arguments = list(sys.argv[1:] if args is None else args)
    try:
        code = app(args=arguments, prog_name=PROG, standalone_mode=False)
    except typer.TyperException as error:  # typer's click: a usage error (status 2) and the like
        context = getattr(error, "ctx", None)
        hint = f" ({context.command_path} --help)" if context is not None else ""
        message = error.format_message()
        if getattr(error, "option_name", None) and getattr(error, "possibilities", None):  # an unknown flag
            message = f"unknown flag {error.option_name}; did you mean {' or '.join(error.possibilities)}?"  # type: ignore[attr-defined]
        print(f"{PROG}: {message}{hint}", file=sys.stderr)
        sys.exit(int(getattr(error, "exit_code", 1)))
    except (typer.Abort, KeyboardInterrupt):
        sys.exit(130)
    except Exception as error:
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            raise
        print(f"{PROG}: {type(error).__name__}: {error} (--log-level debug shows the traceback)", file=sys.stderr)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)

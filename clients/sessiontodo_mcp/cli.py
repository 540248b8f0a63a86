"""The command line of ``sessiontodo-mcp``: one flag per setting, help that names its environment variable.

Flags win over ``SESSIONTODO_MCP_*`` variables, which win over defaults. A bad flag or value is one
line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from pydantic import SecretStr, ValidationError
from pydantic.fields import FieldInfo

from sessiontodo_client import ServiceConnection
from sessiontodo_mcp.settings import Settings

PROG = "sessiontodo-mcp"

DESCRIPTION = """\
An MCP server (stdio or streamable HTTP) whose tools (todo_read, todo_write, todo_update) and resource
(sessiontodo://sessions/{id}/todos) are a sessiontodo session's todo list."""

EXAMPLES = """\
examples:
  sessiontodo-mcp                                    # stdio, a new session for this process
  sessiontodo-mcp --session-id build-42              # stdio, that session's list
  sessiontodo-mcp --transport http --port 50060      # http://127.0.0.1:50060/mcp, a session per MCP session"""

_METAVARS_BY_TYPE: dict[Any, str] = {Path: "FILE", SecretStr: "TOKEN"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line and status 2, as the usage block would bury the reason."""
        self.exit(2, f"{self.prog}: {message} (see --help)\n")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _metavar(field: FieldInfo) -> str:
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("metavar"), str):
        return str(extra["metavar"])
    annotation = field.annotation
    for kind, metavar in _METAVARS_BY_TYPE.items():
        if annotation is kind or annotation == kind | None:
            return metavar
    raise TypeError(f"no metavar for {annotation!r}")


def _help(name: str, field: FieldInfo, more: str = "") -> str:
    default = "" if field.default in (None, [], False) else f" Default: {field.default}."
    return f"{field.description}{more}{default} [env SESSIONTODO_MCP_{name.upper()}]".replace("%", "%%")


def _parser() -> _Parser:
    parser = _Parser(
        prog=PROG,
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    connection = parser.add_argument_group("connection to sessiontodo")
    for name, field in Settings.model_fields.items():
        group = connection if name in ServiceConnection.model_fields else parser
        flag, help_text = _flag(name), _help(name, field)
        if field.annotation is bool:
            group.add_argument(flag, action="store_true", default=argparse.SUPPRESS, help=help_text)
        elif field.annotation == list[str]:
            more = _help(name, field, " Repeat for several.")
            group.add_argument(flag, action="append", metavar=_metavar(field), default=argparse.SUPPRESS, help=more)
        else:
            group.add_argument(flag, metavar=_metavar(field), default=argparse.SUPPRESS, help=help_text)
    return parser


def parse_settings(argv: Sequence[str]) -> Settings:
    """The settings from ``argv``, the environment and the defaults; exits with status 2 if they are invalid."""
    parser = _parser()
    flags = vars(parser.parse_args(argv))
    try:
        settings = Settings(**flags)
    except ValidationError as error:
        first = error.errors()[0]
        name = str(first["loc"][0]) if first["loc"] else ""
        where = f"{_flag(name)} / SESSIONTODO_MCP_{name.upper()}: " if name in Settings.model_fields else ""
        parser.error(f"{where}{first['msg']}")
    if refusal := settings.refusal():
        parser.error(refusal)
    return settings

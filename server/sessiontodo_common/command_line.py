"""One standard for the command lines built on pydantic-settings (the server, the OpenCode sidecar
and mirror, the MCP server, the web board, the ACP proxy): help for people, and a wrong flag or
value as one line and exit 2.

- Help: options in named groups, real metavars (``FILE``, ``SECONDS``, the choices of a
  ``Literal`` or an enum, or a field's own: ``json_schema_extra={"metavar": "HOST:PORT"}``),
  every flag's environment variable, and examples at the end.
- A boolean flag alone means true (``--tls``); ``--tls false`` still works.
- A wrong flag is ``prog: unknown flag --prot; did you mean --port? (--help lists them)``, a wrong
  value ``prog: --port 'abc': Input should be a valid integer``; both exit with status 2.
- Logs go to stderr (``log_to_stderr``); an unexpected failure is one line and exit 1, its
  traceback only under ``--log-level debug`` (``run_command``).
"""

from __future__ import annotations

import argparse
import difflib
import enum
import inspect
import logging
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import AliasChoices, SecretStr, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, CliSettingsSource

S = TypeVar("S", bound=BaseSettings)

USAGE_ERROR = 2
"""The exit status of a command line that cannot be used, as argparse and click use."""


class _UsageError(Exception):
    """A flag or value the command cannot use; ``str()`` is the one line to print after the program's name."""


class _Parser(argparse.ArgumentParser):
    """argparse, raising ``_UsageError`` instead of printing the usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(self._one_line(message))

    def _one_line(self, message: str) -> str:
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        if unknown is None:
            return f"{message} (--help lists the flags)"
        flag = unknown.group(1).split()[0].split("=")[0]
        known = [option for action in self._actions for option in action.option_strings]
        close = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        return f"unknown flag {flag}{hint} (--help lists the flags)"


def fail(prog: str, message: str) -> NoReturn:
    """Print ``prog: message`` on stderr, alone, and exit with the usage status (2)."""
    print(f"{prog}: {message}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR)


def _metavar(name: str, field: FieldInfo) -> str:
    """A metavar a person reads: the field's own, a Literal's or an enum's choices, FILE for paths,
    SECONDS for floats, else the name."""
    extra = field.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("metavar"), str):
        return str(extra["metavar"])
    annotation = field.annotation
    options = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(options) == 1:
        annotation = options[0]
    if typing.get_origin(annotation) is typing.Literal:
        return "{" + ",".join(str(choice) for choice in typing.get_args(annotation)) + "}"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "{" + ",".join(str(member.value) for member in annotation) + "}"
    if annotation is Path:
        return "FILE"
    if annotation is float:
        return "SECONDS"
    if annotation is int:
        return "N"
    if annotation is SecretStr:
        return "SECRET"
    return name.upper()


def _env_names(name: str, field: FieldInfo, env_prefix: str) -> list[str]:
    """The environment variables a field is read from: its upper-case aliases, else prefix and name."""
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        names = [choice for choice in alias.choices if isinstance(choice, str) and choice.isupper()]
        if names:
            return names
    return [f"{env_prefix}{name.upper()}"]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def parse_settings(
    settings_cls: type[S],
    args: Sequence[str],
    *,
    prog: str,
    usage: str = "[options]",
    groups: Mapping[str, Sequence[str]] = {},
    examples: Sequence[str] = (),
    flag_aliases: Mapping[str, Sequence[str]] = {},
) -> S:
    """Settings from ``args``, the environment and the defaults. ``--help`` prints the help and exits 0;
    a flag or value that cannot be used is one line on stderr (``fail``) and exit 2.

    ``usage`` follows the program's name in the usage line; ``groups`` names the help's option
    groups (title: field names, in the order shown; the rest go under "options"); ``examples`` end
    the help; ``flag_aliases`` gives a field older spellings still accepted (``{"sessiontodo_address":
    ["--address"]}``), shown beside its flag.
    """
    fields = settings_cls.model_fields
    env_prefix = settings_cls.model_config.get("env_prefix", "")
    epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples) if examples else None
    parser = _Parser(
        prog=prog,
        usage=f"%(prog)s {usage}",
        description=inspect.cleandoc(settings_cls.__doc__ or ""),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    group_of = {field: title for title, members in groups.items() for field in members}
    sections: dict[str, argparse._ArgumentGroup] = {}

    def add_argument(target: argparse.ArgumentParser, *names: str, **kwargs: Any) -> Any:
        field = kwargs.get("dest", "")
        names = (*names, *flag_aliases.get(field, ()))
        if field in fields:
            shown = str(kwargs.get("help", "")).replace(" (default: null)", "")
            default = fields[field].default
            if isinstance(default, enum.Enum):  # pydantic-settings shows the member's name; the flag takes its value
                shown = shown.replace(f"(default: {default.name})", f"(default: {default.value})")
            kwargs["help"] = " ".join(
                [shown, *(f"[env {name}]" for name in _env_names(field, fields[field], env_prefix))]
            )
            annotation = fields[field].annotation
            if annotation is bool:  # --tls alone is true; --tls false still works
                kwargs.update(nargs="?", const="true", metavar="true|false")
            else:
                kwargs["metavar"] = _metavar(field, fields[field])
            title = group_of.get(field)
            if title is not None:
                if title not in sections:
                    sections[title] = target.add_argument_group(title)
                return sections[title].add_argument(*names, **kwargs)
        return target.add_argument(*names, **kwargs)

    source: CliSettingsSource[Any] = CliSettingsSource(
        settings_cls,
        cli_prog_name=prog,
        cli_hide_none_type=True,
        cli_exit_on_error=False,
        root_parser=parser,
        add_argument_method=add_argument,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for title, section in sections.items():  # a group shows its flags in the order it lists them
        section._group_actions.sort(key=lambda action: list(groups[title]).index(action.dest))
    try:
        return settings_cls(_cli_settings_source=source(args=list(args)))
    except _UsageError as error:
        fail(prog, str(error))
    except ValidationError as invalid:
        fail(prog, _validation_line(invalid, settings_cls))


def _validation_line(invalid: ValidationError, settings_cls: type[BaseSettings]) -> str:
    """The first problem of a validation error as ``--flag 'value': what is wrong`` (with its env var)."""
    problem = invalid.errors(include_url=False)[0]
    if not problem["loc"]:  # a check across fields (a model validator): its message names the flags
        return str(problem["msg"]).removeprefix("Value error, ")
    name = str(problem["loc"][0])
    prefix = settings_cls.model_config.get("env_prefix", "")
    where = f"{_flag(name)} (or {prefix}{name.upper()})"
    value = problem.get("input")
    shown = f" {value!r}" if isinstance(value, str | int | float) and not isinstance(value, bool) else ""
    return f"{where}{shown}: {str(problem['msg']).removeprefix('Value error, ')}"


def log_to_stderr(level: str) -> None:
    """Log records of ``level`` and above to stderr, one timestamped line each (stdout is the program's output)."""
    logging.basicConfig(
        stream=sys.stderr, level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def run_command(prog: str, main: Callable[[], None], *, log_level: str) -> None:
    """Run ``main``; an unexpected failure is one line on stderr and exit 1, with its traceback only
    under ``--log-level debug``."""
    try:
        main()
    except (SystemExit, KeyboardInterrupt):
        raise
    except Exception as error:
        if log_level.upper() == "DEBUG":
            raise
        print(f"{prog}: {error} (--log-level debug shows where)", file=sys.stderr)
        raise SystemExit(1) from None

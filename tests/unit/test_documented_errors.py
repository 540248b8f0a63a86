"""docs/polyglot.md's error table is what the server sends: every ErrorInfo reason of a domain error,
with its status code and its metadata keys, read from the one error table (api/error_status.py)
through the statuses it makes. A new reason or key, or a renamed one, fails here until documented."""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

from google.rpc import code_pb2, error_details_pb2

from sessiontodo_server.api.error_status import to_status
from sessiontodo_server.domain import errors
from tests.support import ROOT

ERROR_DOC = ROOT / "docs" / "polyglot.md"
ARGUMENTS = {"violations": [("todos[0].content", "must not be empty")], "expected": 1, "actual": 2, "value": 3}
"""A value for each constructor parameter that is not an id or a name (those get "x")."""


def domain_errors() -> Iterator[errors.TodoError]:
    """One instance of every concrete domain error class."""
    classes = [errors.TodoError]
    while classes:
        cls = classes.pop()
        classes += cls.__subclasses__()
        if cls is errors.TodoError:
            continue
        if cls.__init__ is errors.TodoError.__init__:  # Exception's: a message only
            yield cls("why")
        else:
            parameters = list(inspect.signature(cls.__init__).parameters)[1:]  # after self
            yield cls(*(ARGUMENTS.get(name, "x") for name in parameters))


def sent() -> dict[str, tuple[str, set[str]]]:
    """ErrorInfo reason -> (status code name, every metadata key any error with that reason carries)."""
    reasons: dict[str, tuple[str, set[str]]] = {}
    for error in domain_errors():
        status = to_status(error)
        info = error_details_pb2.ErrorInfo()
        next(detail for detail in status.details if detail.Unpack(info))
        _, keys = reasons.setdefault(info.reason, (code_pb2.Code.Name(status.code), set()))
        keys |= set(info.metadata)
    return reasons


def documented() -> dict[str, tuple[str, set[str]]]:
    """The table's rows: reason -> (code, the backticked words of the metadata column)."""
    rows = re.findall(r"^\| `([A-Z_]+)` \(\d+\) \| `([A-Z_]+)` \| ([^|]*) \|", ERROR_DOC.read_text(), re.MULTILINE)
    return {reason: (code, set(re.findall(r"`([^`]+)`", metadata))) for code, reason, metadata in rows}


def test_the_error_table_lists_every_reason_with_its_code() -> None:
    assert {reason: code for reason, (code, _) in documented().items()} == {
        reason: code for reason, (code, _) in sent().items()
    }


def test_the_error_table_names_every_metadata_key_of_each_reason() -> None:
    keys = set().union(*(keys for _, keys in sent().values()))
    assert {reason: words & keys for reason, (_, words) in documented().items()} == {
        reason: keys for reason, (_, keys) in sent().items()
    }

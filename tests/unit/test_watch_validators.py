"""The etcd-style watch validators themselves: each broken guarantee is caught (the robustness runs rely on them)."""

from __future__ import annotations

from sessiontodo_client import ChangeKind, Todo, WatchEvent
from tests.support.watch_validators import SessionLog, validate


def event(kind: ChangeKind, revision: int, *contents: str, session_id: str = "s") -> WatchEvent:
    todos = [Todo(id=f"t{n}", content=content) for n, content in enumerate(contents)]
    return WatchEvent(session_id=session_id, kind=kind, revision=revision, todos=todos)


def test_the_validators_catch_every_broken_guarantee() -> None:
    log = SessionLog("s", acknowledged={2: (("t0", "s/2"),), 3: (("t0", "s/3"),), 4: (("t0", "s/4"),)})
    log.watchers["good"] = [
        event(ChangeKind.SNAPSHOT, 1),
        event(ChangeKind.RESET, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["gap"] = [
        event(ChangeKind.SNAPSHOT, 1),
        event(ChangeKind.TODOS_REPLACED, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["twice"] = [
        event(ChangeKind.SNAPSHOT, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "s/4"),
    ]
    log.watchers["foreign"] = [
        event(ChangeKind.SNAPSHOT, 3, "s/3"),
        event(ChangeKind.TODOS_REPLACED, 4, "other/4", session_id="other"),
    ]
    log.watchers["torn"] = [event(ChangeKind.SNAPSHOT, 3, "s/3"), event(ChangeKind.TODOS_REPLACED, 4, "s/4", "s/extra")]
    log.watchers["behind"] = [event(ChangeKind.SNAPSHOT, 1), event(ChangeKind.TODOS_REPLACED, 2, "s/2")]
    problems = validate(log, final_revision=4)
    culprits = {problem.split(":")[0].removeprefix("s/") for problem in problems}
    assert culprits == {"gap", "twice", "foreign", "torn", "behind"}, problems

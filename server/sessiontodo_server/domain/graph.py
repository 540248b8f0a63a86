"""Task graphs: the dependency rules of a list, what is ready, and who blocks whom.

A todo's ``blocked_by`` names todos of the same list that must be finished before it. The rules
(every id names a todo of the list, never the todo itself, each id once, a bounded number, no
cycle) are checked here for every write path, with field paths naming the culprit. Pure: a list
in, an answer out; nothing here knows about stores or gRPC.

A blocker is *finished* when it is COMPLETED or CANCELLED: a cancelled todo was dropped, so it
holds nothing back. A todo is *ready* when it is PENDING, unowned and every blocker is finished.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Sequence

from sessiontodo_server.domain.errors import InvalidArgument
from sessiontodo_server.domain.values import Todo, TodoStatus

FINISHED = frozenset({TodoStatus.COMPLETED, TodoStatus.CANCELLED})
"""The statuses in which a todo no longer blocks the todos waiting on it."""

_PENDING = TodoStatus.PENDING
_SHOWN_IN_CYCLE = 8
"""Ids a cycle's description names before it elides the rest."""


def list_violations(todos: Sequence[Todo], max_blockers: int, prefix: str = "") -> list[tuple[str, str]]:
    """Every broken dependency rule of a whole list, each naming its culprit
    (``{prefix}todos[3].blocked_by[1]``): unknown ids, self-references, an id twice, too many
    blockers; when there are none of those, the edge that closes the first cycle found.

    Linear in todos plus edges. ``todos.replace_all`` takes a cheaper path first for lists whose
    blockers all come earlier in the list (no cycle is possible there) and calls this otherwise."""
    position = {todo.id: index for index, todo in enumerate(todos)}
    violations: list[tuple[str, str]] = []
    in_list_order = True
    for index, todo in enumerate(todos):
        if not todo.blocked_by:
            continue
        field = f"{prefix}todos[{index}].blocked_by"
        violations += blocker_violations(todo.id, todo.blocked_by, position, max_blockers, field)
        in_list_order = in_list_order and all(position.get(blocker, index) < index for blocker in todo.blocked_by)
    if violations or in_list_order:
        return violations
    closing = _closing_edge(todos, position)
    if closing is None:
        return []
    index, nth, cycle = closing
    return [(f"{prefix}todos[{index}].blocked_by[{nth}]", _cycle_text(cycle))]


def blocker_violations(
    todo_id: str, blockers: Sequence[str], known: Container[str] | None, max_blockers: int, field: str
) -> list[tuple[str, str]]:
    """What is wrong with one todo's blockers: too many, the todo itself, an id given twice, and
    (unless ``known`` is None) an id naming no todo of ``known``, the list's ids; ``field[i]``
    names each culprit."""
    violations = []
    if len(blockers) > max_blockers:
        violations.append((field, f"at most {max_blockers} blockers per todo"))
    seen: set[str] = set()
    for nth, blocker in enumerate(blockers):
        if todo_id and blocker == todo_id:
            violations.append((f"{field}[{nth}]", "a todo cannot block itself"))
        elif known is not None and blocker not in known:
            violations.append((f"{field}[{nth}]", f"{blocker[:128]!r} names no todo of this list"))
        elif blocker in seen:
            violations.append((f"{field}[{nth}]", f"{blocker[:128]!r} is given twice"))
        seen.add(blocker)
    return violations


def check_list(todos: Sequence[Todo], max_blockers: int, prefix: str = "") -> None:
    if violations := list_violations(todos, max_blockers, prefix):
        raise InvalidArgument(violations)


def known_and_acyclic(todos: Sequence[Todo], blockers: Iterable[str]) -> bool:
    """Whether ``blockers`` (every id named in the list's ``blocked_by``) all name todos of the
    list and the edges make no cycle: the check of a list with no other problem, without naming one."""
    position = {todo.id: index for index, todo in enumerate(todos)}
    return position.keys() >= set(blockers) and _closing_edge(todos, position) is None


def _closing_edge(todos: Sequence[Todo], position: dict[str, int]) -> tuple[int, int, list[int]] | None:
    """A depth-first walk along ``blocked_by`` (each todo and edge once): the todo, the index in its
    ``blocked_by`` of the edge that closes a cycle, and the cycle's todos; None without a cycle."""
    visiting, done = 1, 2
    state = [0] * len(todos)
    for root in range(len(todos)):
        if state[root] or not todos[root].blocked_by:
            continue
        state[root] = visiting
        stack = [(root, 0)]
        while stack:
            node, nth = stack[-1]
            blockers = todos[node].blocked_by
            if nth == len(blockers):
                state[node] = done
                stack.pop()
                continue
            stack[-1] = (node, nth + 1)
            successor = position[blockers[nth]]
            if state[successor] == visiting:
                path = [entry[0] for entry in stack]
                return node, nth, path[path.index(successor) :]
            if not state[successor]:
                state[successor] = visiting
                stack.append((successor, 0))
    return None


def cycle_through(todos: Sequence[Todo], todo_id: str, new_blockers: Iterable[str]) -> list[str] | None:
    """The cycle that making ``todo_id`` wait on ``new_blockers`` would close: the ids from the
    todo through a new blocker back to the todo; None when there is none. A walk from the new
    blockers along ``blocked_by``, each todo at most once."""
    by_id = {todo.id: todo for todo in todos}
    came_from: dict[str, str] = {}
    frontier = []
    for blocker in new_blockers:
        if blocker not in came_from:
            came_from[blocker] = todo_id
            frontier.append(blocker)
    while frontier:
        current = frontier.pop()
        if current == todo_id:
            path = [current]
            step = came_from[current]
            while step != todo_id:
                path.append(step)
                step = came_from[step]
            return [todo_id, *reversed(path[1:]), todo_id]
        todo = by_id.get(current)
        for blocker in todo.blocked_by if todo is not None else ():
            if blocker not in came_from:
                came_from[blocker] = current
                frontier.append(blocker)
    return None


def cycle_violation(field: str, cycle_ids: Sequence[str]) -> tuple[str, str]:
    return field, _cycle_text(cycle_ids)


def _cycle_text(cycle: Sequence[int] | Sequence[str]) -> str:
    names = [str(step) for step in cycle]
    if isinstance(cycle[0], int):  # positions in the list
        names = [f"todos[{step}]" for step in cycle] + [f"todos[{cycle[0]}]"]
    shown = names if len(names) <= _SHOWN_IN_CYCLE else [*names[: _SHOWN_IN_CYCLE - 1], "…", names[-1]]
    return f"closes a cycle: {' waits on '.join(shown)}"


def finished_ids(todos: Iterable[Todo]) -> set[str]:
    return {todo.id for todo in todos if todo.status in FINISHED}


def is_ready(todo: Todo, finished: set[str]) -> bool:
    """PENDING, unowned, every blocker finished (``finished``: the list's ``finished_ids``)."""
    return todo.status is _PENDING and not todo.owner and finished.issuperset(todo.blocked_by)


def unfinished_blockers(todo: Todo, todos: Iterable[Todo]) -> list[str]:
    """The blockers of ``todo`` that still hold it back, in its ``blocked_by`` order."""
    finished = finished_ids(todos)
    return [blocker for blocker in todo.blocked_by if blocker not in finished]


def select(todos: tuple[Todo, ...], *, ready: bool = False, owner: str | None = None) -> tuple[Todo, ...]:
    """The todos a read's filter keeps, in list order: only ready ones, and/or only ``owner``'s
    (``""``: only unowned ones; None: any owner)."""
    if ready:
        finished = finished_ids(todos)
        todos = tuple(todo for todo in todos if is_ready(todo, finished))
    if owner is not None:
        todos = tuple(todo for todo in todos if todo.owner == owner)
    return todos


def blocks(todos: Iterable[Todo]) -> dict[str, list[str]]:
    """Who each todo blocks: blocker id -> the ids of the todos naming it, in list order (only
    todos that block something appear)."""
    waiting: dict[str, list[str]] = {}
    for todo in todos:
        for blocker in todo.blocked_by:
            waiting.setdefault(blocker, []).append(todo.id)
    return waiting


def without_blocker(todos: tuple[Todo, ...], removed_id: str) -> tuple[Todo, ...]:
    """The list with ``removed_id`` taken out of every ``blocked_by`` (a removal's other half)."""
    return tuple(
        todo._replace(blocked_by=tuple(b for b in todo.blocked_by if b != removed_id))
        if removed_id in todo.blocked_by
        else todo
        for todo in todos
    )

"""Plans written by agents that know nothing of task graphs, kept from erasing one.

OpenCode's ``todowrite``, ACP plans and the MCP ``todo_write`` replace a whole list with todos of
content, status and priority only. Written as they come, they would clear every owner and
dependency others set. ``match_todos`` pairs each written todo with the stored one it continues
(by id, else by content), and ``with_graph`` gives it that todo's id, description, active form,
owner and blockers, so only what the plan says changes. ``replace_plan`` writes such a plan at the
revision it was made from, so a claim made meanwhile is seen, not overwritten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sessiontodo_client.client import TodoClient
from sessiontodo_client.errors import Aborted
from sessiontodo_client.models import Todo, TodoList

PLAN_ATTEMPTS = 5
"""How often ``replace_plan`` reads again after someone else changed the list between its read and write."""


def match_todos(written: Sequence[tuple[str, str]], stored: Sequence[Todo]) -> list[Todo | None]:
    """For each written ``(id, content)``, the stored todo it continues: the one with its id, else (written
    without an id) the first not yet matched with the same content; None for a new todo."""
    by_id = {todo.id: todo for todo in stored}
    taken = {todo_id for todo_id, _ in written if todo_id in by_id}
    matched: list[Todo | None] = []
    for todo_id, content in written:
        if todo_id:
            matched.append(by_id.get(todo_id))
            continue
        found = next((todo for todo in stored if todo.id not in taken and todo.content == content), None)
        if found is not None:
            taken.add(found.id)
        matched.append(found)
    return matched


def with_graph(todos: Sequence[Todo], matched: Sequence[Todo | None]) -> list[Todo]:
    """Each todo with its match's id (if it has none), and its match's description, active form, owner and
    blockers where it gives none; blockers no longer in the list are dropped (the server refuses them)."""
    kept = [_continued(todo, match) for todo, match in zip(todos, matched, strict=True)]
    ids = {todo.id for todo in kept if todo.id}
    return [
        todo.model_copy(update={"blocked_by": [blocker for blocker in todo.blocked_by if blocker in ids]})
        for todo in kept
    ]


def _continued(todo: Todo, match: Todo | None) -> Todo:
    if match is None:
        return todo
    return todo.model_copy(
        update={
            "id": todo.id or match.id,
            "description": todo.description or match.description,
            "active_form": todo.active_form or match.active_form,
            "owner": todo.owner or match.owner,
            "blocked_by": todo.blocked_by or match.blocked_by,
        }
    )


def keeping_graph(todos: Sequence[Todo], stored: Sequence[Todo]) -> list[Todo]:
    """``todos`` (a plan without graph fields) with the graph fields of the ``stored`` todos they continue."""
    return with_graph(todos, match_todos([(todo.id, todo.content) for todo in todos], stored))


async def replace_plan(
    client: TodoClient,
    session_id: str,
    plan: Callable[[list[Todo]], list[Todo]],
    *,
    expected_revision: int | None = None,
    origin: str = "",
) -> tuple[int, TodoList]:
    """Replace the list with ``plan(stored todos)``, conditionally on the revision read; after a conflict
    read and plan again (at most ``PLAN_ATTEMPTS`` times). With ``expected_revision`` only at that
    revision, once (``Aborted`` otherwise). Returns the revision read and the list as written."""
    attempt = 1
    while True:
        current = await client.get_todos(session_id)
        revision = current.revision if expected_revision is None else expected_revision
        try:
            written = await client.replace_todos(session_id, plan(current.todos), revision, origin=origin)
        except Aborted:
            if expected_revision is not None or attempt == PLAN_ATTEMPTS:
                raise
            attempt += 1
            continue
        return current.revision, written

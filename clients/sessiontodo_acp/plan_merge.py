"""Apply an agent's plan onto the current list: its own changes, never an undo of others' newer writes.

An ACP agent sends its whole plan every time, but it only ever saw its own previous plan: a
todo another client added, edited or removed since is not in what it sends, and replacing the
list with the plan would silently undo that acknowledged write. So a plan is read as the
changes the agent made to its previous plan (the *base*), and those changes are applied onto
the session's current list, by todo id, else by content (``keep_known_ids``):

- a todo of the base missing from the plan was removed by the agent: it is removed;
- a todo of the plan that is in the base keeps every field the agent did not change from the
  current list (another client's status, content, priority, metadata, and every field ACP does
  not carry: description, active form, owner, blockers), and takes the fields the agent changed;
  one removed elsewhere stays removed;
- a todo of the plan that is not in the base is the agent's addition: added after the todo that
  precedes it in the plan (a todo another client added with the same content is taken as it);
- a todo of the current list that is not in the base (another client's addition) stays, and keeps
  its place;
- order: the current list's, unless the agent reordered the todos it kept, then the plan's;
- a blocker (``blocked_by``) naming a todo the merged list no longer holds is dropped, as removing
  that todo would have dropped it.

When nobody else wrote since the base, the result is exactly the plan. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sessiontodo_acp.conversions import AGENT_METADATA_PREFIX, keep_known_ids
from sessiontodo_client import Todo

_Key = str | int
"""A todo of the merge: its id, or (a new todo of the agent's) its index in the plan."""


@dataclass(frozen=True)
class MergedPlan:
    """The list to store, and where each entry of the plan ended up in it."""

    todos: list[Todo]
    """The merged list; the agent's new todos carry no id (or the id the agent gave)."""
    plan: list[Todo]
    """The plan with the ids it was matched to (the next base, once new todos have their stored ids)."""
    positions: list[int | None]
    """For each entry of ``plan``, its index in ``todos``; None for a todo removed elsewhere."""

    def stored_plan(self, stored: Sequence[Todo]) -> list[Todo]:
        """The plan with the ids ``stored`` (what sessiontodo returned for ``todos``) gave its new todos."""
        return [
            todo if position is None else todo.model_copy(update={"id": stored[position].id})
            for todo, position in zip(self.plan, self.positions, strict=True)
        ]


def _changed(entry: Todo, previous: Todo | None, current: Todo) -> Todo:
    """``current`` with the fields the agent changed from ``previous`` (all of them, if it had none)."""
    update: dict[str, object] = {}
    for name in ("content", "status", "priority"):
        if previous is None or getattr(entry, name) != getattr(previous, name):
            update[name] = getattr(entry, name)
    agent_metadata = {key: value for key, value in entry.metadata.items() if key.startswith(AGENT_METADATA_PREFIX)}
    previous_agent_metadata = (
        None
        if previous is None
        else {key: value for key, value in previous.metadata.items() if key.startswith(AGENT_METADATA_PREFIX)}
    )
    if agent_metadata != previous_agent_metadata:
        others = {key: value for key, value in current.metadata.items() if not key.startswith(AGENT_METADATA_PREFIX)}
        update["metadata"] = {**others, **agent_metadata}
    return current.model_copy(update=update) if update else current


def _without_lost_blockers(todos: list[Todo]) -> list[Todo]:
    ids = {todo.id for todo in todos if todo.id}
    return [
        todo
        if all(blocker in ids for blocker in todo.blocked_by)
        else todo.model_copy(update={"blocked_by": [blocker for blocker in todo.blocked_by if blocker in ids]})
        for todo in todos
    ]


def _insert_near(order: list[_Key], key: _Key, before: Sequence[_Key], after: Sequence[_Key]) -> None:
    """Put ``key`` after the nearest of ``before`` (nearest last) already in ``order``, else before the
    nearest of ``after``, else at the end."""
    for neighbour in reversed(before):
        if neighbour in order:
            order.insert(order.index(neighbour) + 1, key)
            return
    for neighbour in after:
        if neighbour in order:
            order.insert(order.index(neighbour), key)
            return
    order.append(key)


def merge_plan(base: Sequence[Todo], plan: Sequence[Todo], current: Sequence[Todo]) -> MergedPlan:
    """Apply the changes from ``base`` (the agent's previous plan, with ids) to ``plan`` (its new one, as
    read) onto ``current`` (the session's list now). See the module docstring for the rules."""
    base_by_id = {todo.id: todo for todo in base if todo.id}
    current_by_id = {todo.id: todo for todo in current}
    matched = keep_known_ids(plan, base)
    others_by_content: dict[str, list[str]] = {}
    planned = {todo.id for todo in matched if todo.id}
    for todo in current:
        if todo.id not in base_by_id and todo.id not in planned:
            others_by_content.setdefault(todo.content, []).append(todo.id)
    resolved: list[Todo] = []
    for todo in matched:
        if not todo.id and (same := others_by_content.get(todo.content)):
            todo = todo.model_copy(update={"id": same.pop(0)})
        resolved.append(todo)

    keys: list[_Key] = [todo.id if todo.id in current_by_id else index for index, todo in enumerate(resolved)]
    removed_by_agent = base_by_id.keys() - {todo.id for todo in resolved}
    kept = [todo.id for todo in resolved if todo.id in base_by_id]
    reordered = kept != [todo.id for todo in base if todo.id in set(kept)]
    current_keys: list[_Key] = [todo.id for todo in current if todo.id not in removed_by_agent]
    removed_elsewhere = {index for index, todo in enumerate(resolved) if keys[index] == index and todo.id in base_by_id}
    planned_keys = [key for index, key in enumerate(keys) if index not in removed_elsewhere]

    order: list[_Key]
    if reordered:
        order = list(planned_keys)
        for index, key in enumerate(current_keys):
            if key not in order:
                _insert_near(order, key, current_keys[:index], current_keys[index + 1 :])
    else:
        order = list(current_keys)
        for index, key in enumerate(planned_keys):
            if key not in order:
                _insert_near(order, key, planned_keys[:index], planned_keys[index + 1 :])

    by_key: dict[_Key, Todo] = {}
    for key, todo in zip(keys, resolved, strict=True):
        if isinstance(key, int):
            by_key[key] = todo
        else:
            by_key[key] = _changed(todo, base_by_id.get(todo.id), current_by_id[todo.id])
    todos = _without_lost_blockers([by_key[key] if key in by_key else current_by_id[str(key)] for key in order])
    position = {key: index for index, key in enumerate(order)}
    return MergedPlan(todos=todos, plan=resolved, positions=[position.get(key) for key in keys])

"""The board's writes: every edit with origin ``web`` and the revision the viewer saw.

Each answers once the board's feed has delivered its change, so the page that made it holds the
same list as every other page. A revision mismatch (someone else changed the list first) raises
``Conflict`` carrying the list as it is now, for the page to show instead.
"""

from __future__ import annotations

from sessiontodo_client import Aborted, ClaimRefused, Todo, TodoClient
from sessiontodo_web.board import Board
from sessiontodo_web.models import (
    AddTodoBody,
    ClaimBody,
    RemoveTodoBody,
    ReorderBody,
    SessionDetail,
    UpdateTodoBody,
)

ORIGIN = "web"
"""The origin of the board's writes, as every watcher and the feed see it."""


class Conflict(Exception):
    """The list changed since the viewer saw it; ``current`` is the list now."""

    def __init__(self, current: SessionDetail) -> None:
        super().__init__(
            f"someone else changed this list (now at revision {current.session.revision}); your change was not made"
        )
        self.current = current


class Refused(Exception):
    """A claim or release the todo's state refused (taken, blocked, not pending, not held); ``current`` is the
    list now, which shows why."""

    def __init__(self, why: str, current: SessionDetail) -> None:
        super().__init__(why)
        self.current = current


def refusal_reason(error: ClaimRefused) -> str:
    """Why a claim or release was refused, in words."""
    if error.reason == "TODO_TAKEN":
        return f"{error.owner} took it first"
    if error.reason == "TODO_BLOCKED":
        return f"it waits for {len(error.blocked_by)} unfinished todo(s)"
    if error.reason == "TODO_NOT_PENDING":
        return f"it is {error.status.lower() or 'not pending'}, not pending"
    return f"it is not held by you (owner: {error.owner or 'nobody'})"


class BadOrder(Exception):
    """A reorder whose ids are not the list's ids, each once."""


class UnknownSession(Exception):
    """The board holds no such session (never existed, removed, or another tenant's)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"Session not found: {session_id}")


class Editor:
    """Edits of sessions' lists through ``client``, answered from ``board``."""

    def __init__(self, client: TodoClient, board: Board) -> None:
        self._client = client
        self._board = board

    async def add(self, session_id: str, body: AddTodoBody) -> SessionDetail:
        todo = Todo(content=body.content, status=body.status, priority=body.priority)
        try:
            added = await self._client.add_todo(
                session_id, todo, index=body.index, expected_revision=body.expected_revision, origin=ORIGIN
            )
        except Aborted as error:
            raise await self._conflict(session_id, _actual_revision(error)) from None
        return await self._answer(session_id, added.revision)

    async def update(self, session_id: str, todo_id: str, body: UpdateTodoBody) -> SessionDetail:
        try:
            updated = await self._client.update_todo(
                session_id,
                todo_id,
                content=body.content,
                status=body.status,
                priority=body.priority,
                add_blocked_by=body.add_blocked_by,
                remove_blocked_by=body.remove_blocked_by,
                expected_revision=body.expected_revision,
                origin=ORIGIN,
            )
        except Aborted as error:
            raise await self._conflict(session_id, _actual_revision(error)) from None
        return await self._answer(session_id, updated.revision)

    async def claim(self, session_id: str, todo_id: str, body: ClaimBody) -> SessionDetail:
        """Give the todo to ``body.owner``, in progress; refused (``Refused``) when it is not free to take."""
        try:
            claim = await self._client.claim_todo(session_id, body.owner, todo_id, origin=ORIGIN)
        except ClaimRefused as error:
            raise await self._refused(session_id, f"Not claimed: {refusal_reason(error)}.") from None
        return await self._answer(session_id, claim.revision)

    async def release(self, session_id: str, todo_id: str, body: ClaimBody) -> SessionDetail:
        """Give the todo back (pending, unowned); refused (``Refused``) unless ``body.owner`` holds it."""
        try:
            released = await self._client.release_todo(session_id, todo_id, body.owner, origin=ORIGIN)
        except ClaimRefused as error:
            raise await self._refused(session_id, f"Not released: {refusal_reason(error)}.") from None
        return await self._answer(session_id, released.revision)

    async def remove(self, session_id: str, todo_id: str, body: RemoveTodoBody) -> SessionDetail:
        try:
            revision = await self._client.remove_todo(session_id, todo_id, body.expected_revision, origin=ORIGIN)
        except Aborted as error:
            raise await self._conflict(session_id, _actual_revision(error)) from None
        return await self._answer(session_id, revision)

    async def reorder(self, session_id: str, body: ReorderBody) -> SessionDetail:
        """Put the list in the order of ``body.todo_ids`` (every id of the list, once each)."""
        current = await self._client.get_todos(session_id)
        if current.revision != body.expected_revision:
            raise await self._conflict(session_id, current.revision)
        by_id = {todo.id: todo for todo in current.todos}
        if sorted(body.todo_ids) != sorted(by_id):
            raise BadOrder("todo_ids must name every todo of the list exactly once")
        try:
            written = await self._client.replace_todos(
                session_id, [by_id[todo_id] for todo_id in body.todo_ids], body.expected_revision, origin=ORIGIN
            )
        except Aborted as error:
            raise await self._conflict(session_id, _actual_revision(error)) from None
        return await self._answer(session_id, written.revision)

    async def _answer(self, session_id: str, revision: int) -> SessionDetail:
        await self._board.delivered(session_id, revision)
        detail = self._board.detail(session_id)
        if detail is None:  # removed right after the write
            raise UnknownSession(session_id)
        return detail

    async def _refused(self, session_id: str, why: str) -> Refused:
        """The refusal, with the list as it is now (read, then awaited on the board)."""
        current = await self._client.get_todos(session_id)
        await self._board.delivered(session_id, current.revision)
        detail = self._board.detail(session_id)
        if detail is None:
            raise UnknownSession(session_id)
        return Refused(why, detail)

    async def _conflict(self, session_id: str, actual_revision: int | None) -> Conflict:
        """The conflict, once the board holds the revision that won."""
        if actual_revision is not None:
            await self._board.delivered(session_id, actual_revision)
        detail = self._board.detail(session_id)
        if detail is None:
            raise UnknownSession(session_id)
        return Conflict(detail)


def _actual_revision(error: Aborted) -> int | None:
    """The revision an ABORTED write found (its ErrorInfo says), if it says."""
    actual = error.metadata.get("actualRevision", "")
    return int(actual) if actual.isdigit() else None

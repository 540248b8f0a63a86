"""The two-way bridge between one Claude Code task list and one sessiontodo session.

Two followers feed one queue: the list folder's changes (``watcher``, inotify) and the session's
``WatchTodos`` stream (every message carries the full list; the typed client resumes it across
reconnects). One loop takes what is queued and makes a *pass*: it reads every task file, takes
the newest list sessiontodo sent, and brings both sides to the same fields:

1. pairs: a task names its todo in ``metadata["sessiontodo.todo_id"]``; a task that does not
   yet, but whose todo was made before a crash, is found by the todo's ``claude.task_id`` and
   ``claude.source``;
2. deletes: a pair the state remembers, gone on one side, is deleted on the other — as Claude
   deletes, or by RemoveTodo. A vanished folder, an unreadable file or a removed session is not a
   delete: nothing is deleted for it;
3. creates: a task without a todo becomes one (AddTodo, origin ``claude-code``); a todo without a
   task becomes one (Claude's next id, under its list lock);
4. fields: each pair is merged field by field against what both sides last agreed on
   (``merge``); what changed is written to the side that lacks it: one atomic BatchWrite for
   sessiontodo (conditional on the revision the pass read: another writer in between makes the
   pass start again), task files under Claude's locks.

A pass is idempotent, so any missed event, restart or kill -9 is repaired by the next pass:
the first one runs as soon as the watch's snapshot arrives.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sessiontodo_claude.folder import LockTimeout, TaskFolder
from sessiontodo_claude.mapping import (
    SOURCE_KEY,
    TASK_ID_KEY,
    TODO_ID_KEY,
    Item,
    changed_fields,
    item_from_task,
    item_from_todo,
    metadata_of,
    task_changes,
    task_from_item,
    todo_from_item,
    todo_id_of,
)
from sessiontodo_claude.merge import Side, merge
from sessiontodo_claude.state import BridgeState, load_state, save_state
from sessiontodo_claude.tasks import Task
from sessiontodo_claude.watcher import changed_task_ids, until_made
from sessiontodo_client import (
    Aborted,
    AddTodoWrite,
    ChangeKind,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    RemoveTodoWrite,
    RetryPolicy,
    ServiceError,
    Todo,
    TodoClient,
    TodoList,
    TodoStatus,
    UpdateTodoWrite,
    Write,
)

log = logging.getLogger(__name__)

ORIGIN = "claude-code"
LIST_LABEL = "claude.list"
"""The label naming the task list on the session the bridge creates."""
RESTART_PASSES = 8
"""Passes tried in a row while other writers keep changing the session under it (ABORTED)."""

_REFUSED = (InvalidArgument, NotFound, FailedPrecondition)
"""Refusals of one write: the rest of the pass goes on without it."""


@dataclass(frozen=True)
class _Noticed:
    """What a follower saw: a change on one side, with the newest list when it is sessiontodo's."""

    side: Side
    todos: TodoList | None = None
    session_created: str = ""
    """With ``todos``: when the session they are of was created."""
    session_gone: bool = False


@dataclass
class _Pass:
    """One pass's view of both sides and what it is about to write."""

    tasks: dict[str, Task]
    unreadable: frozenset[str]
    todos: dict[str, Todo]
    agreed: dict[str, Item]
    """A copy, kept only when the pass completes: a pass started again starts from the same memory."""
    pairs: dict[str, str] = field(default_factory=dict)
    """todo id → task id."""
    new_tasks: list[Task] = field(default_factory=list)
    claude_items: dict[str, Item] = field(default_factory=dict)
    created: dict[str, Item] = field(default_factory=dict)
    """Todos this pass makes from tasks, as it makes them."""
    writes: list[Write] = field(default_factory=list)
    deleted_tasks: list[str] = field(default_factory=list)


class ClaudeBridge:
    """Mirrors ``folder`` (one Claude Code task list) and ``session_id`` both ways, for as long as ``run`` runs."""

    def __init__(
        self,
        client: TodoClient,
        folder: TaskFolder,
        *,
        session_id: str,
        list_id: str,
        state_path: Path,
        source: str = "",
        retry: RetryPolicy = RetryPolicy(),
    ) -> None:
        self._client = client
        self._folder = folder
        self._session_id = session_id
        self._list_id = list_id
        self._state_path = state_path
        self._retry = retry
        self._source = source or f"{socket.gethostname()}:{folder.path.resolve()}"
        self._state = BridgeState(session_id)
        self._service: TodoList | None = None
        """The newest list sessiontodo sent (the watch's messages carry it whole)."""
        self._written_revision = 0
        """The revision of the bridge's last write: lists older than it are stale and wait for the watch."""
        self._queue: asyncio.Queue[_Noticed] = asyncio.Queue()
        self.passes = 0
        """How many passes ran (a pass that found both sides equal counts too)."""

    async def run(self) -> None:
        """Follow both sides until cancelled."""
        self._state = load_state(self._state_path, self._session_id)
        self._folder.ensure()
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self._follow_folder())
            tasks.create_task(self._follow_session())
            tasks.create_task(self._sync())

    async def _ensure_session(self) -> None:
        labels = {LIST_LABEL: self._list_id, "title": f"Claude Code tasks: {self._list_id}"}
        await self._client.create_session(self._session_id, labels=labels, origin=ORIGIN)

    async def _follow_folder(self) -> None:
        """Every change of a task file; a folder removed is waited for (never made again here: a pass while it
        is gone deletes nothing, and one after it came back sees what is in it)."""
        while True:
            async for _ in changed_task_ids(self._folder.path):
                self._queue.put_nowait(_Noticed("claude"))
                if not self._folder.path.is_dir():
                    break
            await until_made(self._folder.path)
            self._queue.put_nowait(_Noticed("claude"))

    async def _follow_session(self) -> None:
        """The session's changes, each with its whole list; a session removed (or lost with a store that keeps
        nothing) is made again, and the tasks fill it again."""
        failures = 0
        while True:
            try:
                await self._ensure_session()
                async for event in self._client.watch(self._session_id):
                    failures = 0
                    if event.kind is ChangeKind.SESSION_REMOVED:
                        break
                    if event.kind is not ChangeKind.PROGRESS:
                        listed = TodoList(todos=event.todos, revision=event.revision)
                        created = event.session.created_at if event.session is not None else None
                        self._queue.put_nowait(_Noticed("sessiontodo", listed, created.isoformat() if created else ""))
            except NotFound:
                pass
            except ServiceError as error:  # the client retried UNAVAILABLE already: say so, and go on trying
                delay = self._retry.delay(failures)
                failures += 1
                log.warning("watching session %s failed (%s); again in %.1f s", self._session_id, error, delay)
                await asyncio.sleep(delay)
                continue
            log.warning("session %s is gone; making it again from the task list", self._session_id)
            self._queue.put_nowait(_Noticed("sessiontodo", session_gone=True))

    async def _sync(self) -> None:
        failures = 0
        while True:
            noticed = [await self._queue.get()]
            while not self._queue.empty():
                noticed.append(self._queue.get_nowait())
            prefer: Side = noticed[-1].side
            for item in noticed:
                if item.session_gone or self._another_session(item.session_created):
                    self._forget_session()
                if item.session_created:
                    self._state.session_created = item.session_created
                if item.todos is not None and (self._service is None or item.todos.revision >= self._service.revision):
                    self._service = item.todos
            if self._service is None or self._service.revision < self._written_revision:
                continue  # the watch has not caught up with the bridge's own write yet: its message will come
            try:
                await self._pass_until_settled(prefer)
                failures = 0
            except (ServiceError, LockTimeout, OSError) as error:  # sessiontodo down, a lock held, a disk full
                delay = self._retry.delay(failures)
                failures += 1
                log.warning("a pass failed (%s); trying again in %.1f s", str(error) or type(error).__name__, delay)
                await asyncio.sleep(delay)
                self._queue.put_nowait(_Noticed(prefer))

    def _another_session(self, created: str) -> bool:
        """Whether a list comes from a session made anew since the pairs were made (see ``BridgeState``)."""
        return bool(created and self._state.session_created and created != self._state.session_created)

    def _forget_session(self) -> None:
        """A removed session deletes no task: every task is carried again to the session made anew."""
        self._state = BridgeState(self._session_id)
        self._service = None
        self._written_revision = 0

    async def _pass_until_settled(self, prefer: Side) -> None:
        for _ in range(RESTART_PASSES):
            try:
                await self.sync_once(prefer)
                return
            except Aborted:
                current = await self._client.get_todos(self._session_id)
                if self._service is not None and current.revision < self._service.revision:
                    return  # a revision going back is a session made anew: the watch brings it, and its start
                self._service = current
        log.warning("the session kept changing under %d passes; the next change brings another", RESTART_PASSES)

    async def sync_once(self, prefer: Side) -> None:
        """One pass (see the module's docstring) against the newest list sessiontodo sent."""
        assert self._service is not None
        self.passes += 1
        service = self._service
        listing = await self._folder.read_all()
        work = _Pass(
            tasks=listing.tasks,
            unreadable=listing.unreadable,
            todos={todo.id: todo for todo in service.todos},
            agreed=dict(self._state.agreed),
        )
        self._pair(work)
        self._carry_deletes(work, folder_present=self._folder.path.is_dir())
        self._make_todos(work)
        await self._make_tasks(work)
        merged = self._merge(work, prefer)

        refused = await self._write_service(work.writes, expected_revision=service.revision) if work.writes else set()
        for task_id in work.deleted_tasks:
            await self._folder.delete(task_id)
        todo_to_task = {todo_id: task_id for todo_id, task_id in work.pairs.items() if todo_id not in refused}
        for todo_id, item in merged.items():
            if todo_id in refused:
                continue  # sessiontodo refused to make it: the task stays unpaired, and is tried again
            task = work.tasks[work.pairs[todo_id]]
            await self._write_task(task, work.claude_items[todo_id], item, todo_id, todo_to_task)
            work.agreed[todo_id] = item
        self._state.agreed = work.agreed
        self._state.pairs = {
            todo_id: task_id
            for todo_id, task_id in todo_to_task.items()
            if todo_id in merged or task_id in work.unreadable
        }
        save_state(self._state_path, self._state)

    def _pair(self, work: _Pass) -> None:
        """Each task with the todo it names (or was made into before a crash); tasks naming none are new."""
        for task in work.tasks.values():
            todo_id = todo_id_of(task) or self._made_from(task.id, work.todos)
            if todo_id and todo_id not in work.pairs:
                work.pairs[todo_id] = task.id
            else:
                work.new_tasks.append(task)
        for todo_id, task_id in self._state.pairs.items():
            if task_id in work.unreadable:
                work.pairs.setdefault(todo_id, task_id)  # not gone: read again on the next pass

    def _carry_deletes(self, work: _Pass, *, folder_present: bool) -> None:
        """A pair both sides agreed on, now gone on one side, is deleted on the other: never for an unreadable
        file, nor for a removed folder (its tasks are written again, into the folder made anew)."""
        for todo_id in list(work.agreed):
            in_claude, in_service = todo_id in work.pairs, todo_id in work.todos
            if in_claude and in_service:
                continue
            if in_claude:
                if work.pairs[todo_id] not in work.unreadable:
                    work.deleted_tasks.append(work.pairs.pop(todo_id))
                    del work.agreed[todo_id]
            elif in_service and folder_present:
                work.writes.append(RemoveTodoWrite(session_id=self._session_id, todo_id=todo_id))
                del work.todos[todo_id]
                del work.agreed[todo_id]
            else:  # (a folder removed: the todo stays, and its task is written again)
                del work.agreed[todo_id]

    def _make_todos(self, work: _Pass) -> None:
        """A todo for each new task, and again for each task naming a todo sessiontodo never had as far as
        the bridge knows (a removed session, lost state): under the id the task names."""
        orphans = [
            (todo_id, work.tasks[task_id])
            for todo_id, task_id in work.pairs.items()
            if todo_id not in work.todos and task_id in work.tasks
        ]
        for todo_id, _ in orphans:
            del work.pairs[todo_id]
        for todo_id, task in [*orphans, *((f"todo_{uuid.uuid4().hex[:16]}", task) for task in work.new_tasks)]:
            work.pairs[todo_id] = task.id
            item = item_from_task(task, {})
            todo = todo_from_item(item, task_id=task.id, source=self._source).model_copy(update={"id": todo_id})
            work.writes.append(AddTodoWrite(session_id=self._session_id, todo=todo))
            work.created[todo_id] = item | {"blocked_by": ()}  # blockers follow once every todo exists
        task_to_todo = {task_id: todo_id for todo_id, task_id in work.pairs.items()}
        work.claude_items = {
            todo_id: item_from_task(work.tasks[task_id], task_to_todo)
            for todo_id, task_id in work.pairs.items()
            if task_id in work.tasks
        }

    async def _make_tasks(self, work: _Pass) -> None:
        """A task for each todo without one (its blockers follow once every task exists)."""
        for todo_id, todo in work.todos.items():
            if todo_id not in work.pairs:
                item = item_from_todo(todo) | {"blocked_by": ()}
                made = await self._folder.create(task_from_item(item, todo_id))
                work.pairs[todo_id] = made.id
                work.tasks[made.id] = made
                work.claude_items[todo_id] = item
                work.agreed[todo_id] = item

    def _merge(self, work: _Pass, prefer: Side) -> dict[str, Item]:
        """Each pair's fields both sides should show; what sessiontodo lacks is queued as UpdateTodo writes."""
        merged: dict[str, Item] = {}
        for todo_id, task_id in work.pairs.items():
            if task_id not in work.tasks:
                continue  # unreadable this pass
            service = work.created.get(todo_id) or item_from_todo(work.todos[todo_id])
            base = work.created.get(todo_id) or work.agreed.get(todo_id)
            merged[todo_id] = merge(base, work.claude_items[todo_id], service, prefer)
            update = self._service_update(todo_id, service, merged[todo_id])
            if update is not None:
                work.writes.append(update)
        return merged

    def _made_from(self, task_id: str, todos: dict[str, Todo]) -> str:
        """The todo made from this task before the bridge could note it in the task (a crash in between)."""
        for todo in todos.values():
            if todo.metadata.get(SOURCE_KEY) == self._source and todo.metadata.get(TASK_ID_KEY) == task_id:
                return todo.id
        return ""

    def _service_update(self, todo_id: str, before: Item, after: Item) -> UpdateTodoWrite | None:
        fields = changed_fields(before, after)
        if not fields:
            return None
        metadata = metadata_of(after)
        old_blockers, new_blockers = set(before.get("blocked_by", ())), set(after.get("blocked_by", ()))
        return UpdateTodoWrite(
            session_id=self._session_id,
            todo_id=todo_id,
            content=after["content"] if "content" in fields else None,
            description=after["description"] if "description" in fields else None,
            active_form=after["active_form"] if "active_form" in fields else None,
            owner=after["owner"] if "owner" in fields else None,
            status=TodoStatus(after["status"]) if "status" in fields else None,
            metadata={key: value for key, value in metadata.items() if f"metadata.{key}" in fields},
            remove_metadata=[
                name.removeprefix("metadata.") for name in fields if name.startswith("metadata.") and name not in after
            ],
            add_blocked_by=sorted(new_blockers - old_blockers),
            remove_blocked_by=sorted(old_blockers - new_blockers),
        )

    async def _write_service(self, writes: Sequence[Write], *, expected_revision: int) -> set[str]:
        """All of ``writes`` in one atomic batch, the first conditional on the revision the pass read (ABORTED:
        the pass starts again). A refused batch is written again one write at a time, skipping the refused;
        returns the ids of the todos whose creation was refused."""
        first = writes[0].model_copy(update={"expected_revision": expected_revision})
        try:
            results = await self._client.batch_write([first, *writes[1:]], origin=ORIGIN)
        except _REFUSED as batch_error:
            log.warning("sessiontodo refused a batch (%s); writing it one write at a time", batch_error)
            results = []
            refused: set[str] = set()
            for write in writes:
                try:
                    results += await self._client.batch_write([write], origin=ORIGIN)
                except _REFUSED as error:
                    log.warning("sessiontodo refused %s: %s", type(write).__name__, error)
                    if isinstance(write, AddTodoWrite):
                        refused.add(write.todo.id)
            self._written_revision = max([self._written_revision, *(result.revision for result in results)])
            return refused
        self._written_revision = max([self._written_revision, *(result.revision for result in results)])
        return set()

    async def _write_task(self, task: Task, before: Item, after: Item, todo_id: str, task_of: dict[str, str]) -> None:
        """Write into the task what it lacks of ``after``, and the todo it is paired with."""
        fields = changed_fields(before, after)
        top, metadata = task_changes(task, after, fields - {"blocked_by"})
        if task.metadata.get(TODO_ID_KEY) != todo_id:
            metadata[TODO_ID_KEY] = todo_id
        if top or metadata:
            await self._folder.update(task.id, top, metadata=metadata)
        if "blocked_by" in fields:
            blockers = [task_of[todo_id] for todo_id in after.get("blocked_by", ()) if todo_id in task_of]
            await self._folder.set_blocked_by(task.id, blockers)

"""When claims' leases run out: an index of lease deadlines, fed by the changes this process sees.

Every replica sees every change (its own writes and, through the store's follower, the others'),
so each one keeps its own index and any of them may lapse a lease: the lapse is a write the store
applies atomically to the current list (``claims.lapse``), which re-checks the deadline then. A
lease renewed in the meantime (here or on another replica) is found alive and nothing changes,
and two replicas lapsing the same lease make one change between them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from sessiontodo_server.domain.values import Change, ChangeKind, Todo

_LISTS_WITH_LEASES = frozenset({ChangeKind.SNAPSHOT, ChangeKind.RESET, ChangeKind.TODOS_REPLACED})
"""Changes after which any todo of the list may hold a lease this index has not seen."""


class LeaseIndex:
    """Lease deadlines by time: (deadline, session id, todo id), the latest deadline of each lease
    kept aside so that a renewed lease's old entry is skipped when it comes due."""

    def __init__(self) -> None:
        self._deadlines: list[tuple[float, str, str]] = []
        self._latest: dict[tuple[str, str], float] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def note(self, change: Change) -> None:
        """Index the leases ``change`` set or renewed (a claim or a renewal is one todo's update;
        a snapshot, a reset or a replace may carry any)."""
        if change.kind is ChangeKind.TODO_UPDATED:
            for todo in change.todos:
                if todo.id == change.todo_id:
                    if todo.lease_expires_at:
                        self._push(change.session_id, todo)
                    return
        elif change.kind in _LISTS_WITH_LEASES and change.session_id:
            self.note_list(change.session_id, change.todos)

    def note_list(self, session_id: str, todos: Iterable[Todo]) -> None:
        for todo in todos:
            if todo.lease_expires_at:
                self._push(session_id, todo)

    def _push(self, session_id: str, todo: Todo) -> None:
        lease = (session_id, todo.id)
        if self._latest.get(lease) != todo.lease_expires_at:
            self._latest[lease] = todo.lease_expires_at
            heapq.heappush(self._deadlines, (todo.lease_expires_at, session_id, todo.id))

    def due(self, now: float) -> list[tuple[str, str]]:
        """The leases (session id, todo id) whose latest known deadline is at or before ``now``,
        each handed out once; whether they really lapse is for the store's write to decide."""
        due = []
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, session_id, todo_id = heapq.heappop(self._deadlines)
            lease = (session_id, todo_id)
            if self._latest.get(lease) == deadline:
                del self._latest[lease]
                due.append(lease)
        return due

    def again(self, session_id: str, todo_id: str, deadline: float) -> None:
        """Hand a lease out again at ``deadline``: its lapse could not be written (store unreachable)."""
        lease = (session_id, todo_id)
        if lease not in self._latest:
            self._latest[lease] = deadline
            heapq.heappush(self._deadlines, (deadline, session_id, todo_id))

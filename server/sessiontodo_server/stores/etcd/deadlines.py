"""The idle-TTL deadlines of the sessions that have one, as this replica knows them from etcd
(``d/ID`` keys, loaded at start and followed on the watch).

Each deadline comes with the etcd revision of its key: removing an expired session compares
against it, so a session written meanwhile (through any replica) keeps living, and of several
replicas reaping at once only one removes it — its EXPIRED change is made once.
"""

from __future__ import annotations

import heapq

ENTRY_BYTES = 200
"""What one deadline costs this process (id, tuple, dict and heap slots), for the memory budget."""


class Deadlines:
    def __init__(self) -> None:
        self._by_id: dict[str, tuple[float, int]] = {}
        self._heap: list[tuple[float, str]] = []
        self._scheduled: dict[str, float] = {}
        """The earliest heap entry of each id: a later deadline is found when that one comes due."""

    def __len__(self) -> int:
        return len(self._by_id)

    def set(self, session_id: str, deadline: float, revision: int) -> None:
        self._by_id[session_id] = (deadline, revision)
        scheduled = self._scheduled.get(session_id)
        if scheduled is None or deadline < scheduled:
            heapq.heappush(self._heap, (deadline, session_id))
            self._scheduled[session_id] = deadline

    def retry(self, session_id: str) -> None:
        """``session_id`` came due but could not be removed: due again at the next check."""
        if (current := self._by_id.get(session_id)) is not None:
            self.set(session_id, *current)

    def discard(self, session_id: str) -> None:
        self._by_id.pop(session_id, None)

    def clear(self) -> None:
        self._by_id.clear()
        self._heap.clear()
        self._scheduled.clear()

    def due(self, now: float) -> list[tuple[str, int]]:
        """Sessions whose deadline is at or before ``now``, with their deadline key's revision."""
        due = []
        while self._heap and self._heap[0][0] <= now:
            at, session_id = heapq.heappop(self._heap)
            if self._scheduled.get(session_id) != at:
                continue  # an earlier entry of this id came first
            del self._scheduled[session_id]
            current = self._by_id.get(session_id)
            if current is None:
                continue
            if current[0] <= now:
                due.append((session_id, current[1]))
            else:
                self.set(session_id, *current)
        return due

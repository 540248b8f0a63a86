"""Idle-TTL deadlines in a heap, with at most one entry per session: a session renewed since its
entry was pushed is found still alive when the entry comes due, and pushed again."""

from __future__ import annotations

import heapq
from collections.abc import Mapping

from sessiontodo_server.stores.session_record import SessionRecord


class ExpiryQueue:
    def __init__(self) -> None:
        self._deadlines: list[tuple[float, str]] = []
        self._found_due: dict[str, float] = {}
        """Sessions ``due`` handed out, with the time it looked: their removal checks again."""

    def schedule(self, session_id: str, record: SessionRecord) -> None:
        if not record.expiry_scheduled and (deadline := record.info.expires_at) is not None:
            heapq.heappush(self._deadlines, (deadline, session_id))
            record.expiry_scheduled = True

    def due(self, now: float, records: Mapping[str, SessionRecord]) -> list[str]:
        """Sessions whose idle TTL has run out at ``now``."""
        due = []
        while self._deadlines and self._deadlines[0][0] <= now:
            _, session_id = heapq.heappop(self._deadlines)
            record = records.get(session_id)
            if record is None:
                continue
            record.expiry_scheduled = False
            deadline = record.info.expires_at
            if deadline is not None and deadline <= now:
                due.append(session_id)
                self._found_due[session_id] = now
            else:
                self.schedule(session_id, record)
        return due

    def renewed(self, session_id: str, record: SessionRecord | None) -> bool:
        """Whether a session ``due`` found expired was written since (durably, or accepted and pending:
        acknowledged either way once durable), moving its deadline past the time ``due`` looked;
        such a session must not expire. Each finding is checked once."""
        found_at = self._found_due.pop(session_id, None)
        if found_at is None or record is None:
            return False
        deadline = record.latest_info.expires_at
        return deadline is None or deadline > found_at

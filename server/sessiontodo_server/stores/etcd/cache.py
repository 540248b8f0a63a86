"""The newest version of recently used sessions this replica knows of, so that a write can be
one Txn: applied to the cached version, compared against its etcd revision. A stale entry
costs one failed compare (whose answer carries the current version), never a wrong write.
Bounded in bytes (the lists' share of the memory budget), least recently used out first."""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

from sessiontodo_server.domain.budget import list_bytes
from sessiontodo_server.stores.etcd.records import Record

ENTRY_BYTES = 400
"""What an entry costs beyond its list: the record, its info, the dict slot."""


class Version(NamedTuple):
    """A session's record as of etcd revision ``revision`` (the key's mod revision)."""

    revision: int
    record: Record


class SessionCache:
    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, tuple[Version, int]] = OrderedDict()
        self.bytes = 0

    def get(self, session_id: str) -> Version | None:
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        self._entries.move_to_end(session_id)
        return entry[0]

    def put(self, session_id: str, version: Version) -> None:
        """Remember ``version`` unless a newer one is known."""
        entry = self._entries.get(session_id)
        if entry is not None:
            if entry[0].revision >= version.revision:
                return
            self.bytes -= entry[1]
        size = ENTRY_BYTES + list_bytes(version.record.todos)
        self._entries[session_id] = (version, size)
        self._entries.move_to_end(session_id)
        self.bytes += size
        while self.bytes > self._capacity and self._entries:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.bytes -= evicted

    def older(self, session_id: str, revision: int) -> bool:
        """Whether the session is cached at a version older than ``revision``."""
        entry = self._entries.get(session_id)
        return entry is not None and entry[0].revision < revision

    def discard(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self.bytes -= entry[1]

    def clear(self) -> None:
        self._entries.clear()
        self.bytes = 0

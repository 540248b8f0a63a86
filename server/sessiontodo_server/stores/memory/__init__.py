"""The in-process store, and the journal contract that makes it durable (the sqlite store)."""

from sessiontodo_server.stores.memory.journal import Journal, Loaded
from sessiontodo_server.stores.memory.store import MemoryStore

__all__ = ["Journal", "Loaded", "MemoryStore"]

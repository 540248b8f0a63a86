"""The memory budget: what lists, the history kept for resuming, and watcher buffers may hold.

Sizes are estimates of resident memory: a list's text plus a fixed cost per todo (the Python
objects), and a retained change twice over (its list, and the encoding its watchers share,
which lives exactly as long as the change). Each share is enforced where the memory is held:

- lists (half the budget; a session's labels count with its list): a write or a new session that
  would grow them past their share is RESOURCE_EXHAUSTED with a QuotaFailure on "memory";
  shrinking writes and removals always go through;
- history and feed (a quarter, ``stores/memory/retention.py``): the oldest changes are let go first, so a
  watcher resuming from before them gets a RESET, never a gap;
- watcher buffers (a quarter, ``domain/watch.py``): a watcher whose buffer would take them past their
  share is reset instead, like one whose buffer is full; feeds' filters count here too, and a feed
  whose filter would not fit is RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import weakref
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

from sessiontodo_server.domain.values import Change, SessionFilter, SessionInfo, Todo

DEFAULT_BUDGET = 1 << 30

TODO_OVERHEAD = 200
"""Bytes a todo costs beyond its text: the Todo object, its two strings' headers, a tuple slot."""

CHANGE_OVERHEAD = 300


def list_bytes(todos: Sequence[Todo]) -> int:
    """Text and per-todo cost of a list (with builtins over the whole list: a write of 1000 todos
    pays for this on every commit)."""
    text = sum(map(len, map(_content, todos))) + sum(map(len, map(_id, todos)))
    metadata = sum(ENTRY_OVERHEAD + len(k) + len(v) for m in filter(None, map(_metadata, todos)) for k, v in m.items())
    graph = sum(map(len, map(_description, todos))) + sum(map(len, map(_active_form, todos)))
    graph += sum(map(len, map(_owner, todos)))
    blockers = list(chain.from_iterable(map(_blocked_by, todos)))
    if blockers:
        graph += EDGE_OVERHEAD * len(blockers) + sum(map(len, blockers))
    return TODO_OVERHEAD * len(todos) + text + metadata + graph


_content, _id, _metadata = attrgetter("content"), attrgetter("id"), attrgetter("metadata")
_description, _active_form, _owner = attrgetter("description"), attrgetter("active_form"), attrgetter("owner")
_blocked_by = attrgetter("blocked_by")

EDGE_OVERHEAD = 64
"""Bytes a blocker costs beyond its id's text: its string's header and a tuple slot."""

ENTRY_OVERHEAD = 120
"""Bytes a label or a todo's metadata entry costs beyond its text: its key and value string headers
and its dict slot (counting metadata by its text alone made many small entries cost 3.6 times
what was counted)."""

FILTER_ID_OVERHEAD = 120
"""Bytes a session id in a feed's filter costs beyond its text: its string header and its set slot."""


def filter_bytes(only: SessionFilter) -> int:
    """What a feed's filter holds for the stream's life: its session ids and its labels."""
    ids = sum(FILTER_ID_OVERHEAD + len(session_id) for session_id in only.session_ids)
    return ids + sum(ENTRY_OVERHEAD + len(key) + len(value) for key, value in only.labels.items())


def info_bytes(info: SessionInfo | None) -> int:
    """A session's labels: up to 64 labels of 4 KiB each per session, so counted like todos."""
    if info is None or not info.labels:
        return 0
    return sum(ENTRY_OVERHEAD + len(key) + len(value) for key, value in info.labels.items())


def state_bytes(todos: Sequence[Todo], info: SessionInfo | None) -> int:
    """What a session's state holds: its list and its labels."""
    return list_bytes(todos) + info_bytes(info)


_change_sizes: weakref.WeakKeyDictionary[Change, int] = weakref.WeakKeyDictionary()


def change_bytes(change: Change) -> int:
    """A retained change: its list and labels (often shared with the next change, counted anyway)
    and its encoding. Measured once per change however many holders ask (a store that measured
    its state says so in ``state_size``)."""
    if change.state_size >= 0:
        return CHANGE_OVERHEAD + 2 * change.state_size
    size = _change_sizes.get(change)
    if size is None:
        size = _change_sizes[change] = CHANGE_OVERHEAD + 2 * state_bytes(change.todos, change.info)
    return size


@dataclass(frozen=True, slots=True)
class MemoryBudget:
    total: int = DEFAULT_BUDGET
    per_tenant: int = 0
    """Bytes of lists one tenant may hold within the lists' share (0: no share of its own)."""

    @property
    def lists(self) -> int:
        return self.total // 2

    @property
    def history(self) -> int:
        return self.total // 4

    @property
    def buffers(self) -> int:
        return self.total // 4


class Held:
    """Changes held by any number of holders, each counted once. ``ordered`` keeps them in the
    order first held, for ``oldest`` (a plain dict is cheaper where that is not needed)."""

    def __init__(self, ordered: bool = False) -> None:
        self._holders: dict[Change, int] = OrderedDict() if ordered else {}
        """The number of holders of each change (its size is ``change_bytes``, the same each time:
        an int per change rather than a list of count and size, which the collector would walk)."""
        self.bytes = 0

    def __contains__(self, change: Change) -> bool:
        return change in self._holders

    def size_if_held(self, change: Change) -> int:
        """What holding ``change`` would add: nothing when it is already held."""
        return 0 if change in self._holders else change_bytes(change)

    @staticmethod
    def size(change: Change) -> int:
        return change_bytes(change)

    def hold(self, change: Change, holders: int = 1) -> None:
        count = self._holders.get(change)
        if count is None:
            self._holders[change] = holders
            self.bytes += change_bytes(change)
        else:
            self._holders[change] = count + holders

    def release(self, change: Change) -> None:
        count = self._holders[change] - 1
        if count:
            self._holders[change] = count
        else:
            del self._holders[change]
            self.bytes -= change_bytes(change)

    def oldest(self) -> Change | None:
        return next(iter(self._holders), None)


DEFAULT_MEMORY_BUDGET = MemoryBudget()


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``: freed todos live in many small allocations that glibc keeps for
    reuse rather than give back; trimming returns the free pages to the operating system."""
    name = ctypes.util.find_library("c")
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None) if name else None
    except OSError:
        return None


_TRIM = _malloc_trim()

GIVE_BACK_BYTES = 16 << 20
"""Freeing at least this much at once (removing big sessions) gives the memory back to the system."""


def give_back(freed: int) -> None:
    """After ``freed`` bytes were let go: return them to the operating system when it is worth it."""
    if freed >= GIVE_BACK_BYTES and _TRIM is not None:
        gc.collect(0)
        _TRIM(0)

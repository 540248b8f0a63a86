"""Batches remembered by request id, so that a retried BatchWrite gets the first call's outcomes:
kept for ``REQUEST_RETENTION_SECONDS``, counted toward the lists' share of the memory budget."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sessiontodo_server.domain.batch import Outcome
from sessiontodo_server.domain.budget import list_bytes
from sessiontodo_server.domain.store import REQUEST_RETENTION_SECONDS
from sessiontodo_server.stores.memory.accounting import ListsAccount

BATCH_BYTES = 300
"""What remembering one batch costs beyond its outcomes, for the memory budget."""
OUTCOME_BYTES = 120
"""What one outcome costs beyond its todo and ids."""


@dataclass(frozen=True, slots=True)
class RememberedBatch:
    fingerprint: str
    outcomes: tuple[Outcome, ...]
    at: float
    size: int


def batch_bytes(outcomes: tuple[Outcome, ...]) -> int:
    return BATCH_BYTES + sum(
        OUTCOME_BYTES
        + (list_bytes((outcome.todo,)) if outcome.todo is not None else 0)
        + sum(map(len, outcome.todo_ids))
        + sum(map(len, outcome.removed))
        for outcome in outcomes
    )


class RememberedBatches:
    def __init__(self, account: ListsAccount) -> None:
        self._account = account
        self._by_key: OrderedDict[str, RememberedBatch] = OrderedDict()
        """Oldest first: batches are remembered in the order they are made."""

    def find(self, key: str) -> RememberedBatch | None:
        return self._by_key.get(key)

    def check_room(self, outcomes: tuple[Outcome, ...]) -> int:
        """What remembering ``outcomes`` costs; LimitExceeded when the lists' share has no room for it."""
        size = batch_bytes(outcomes)
        self._account.check_shared_growth(size)
        return size

    def remember(self, key: str, fingerprint: str, outcomes: tuple[Outcome, ...], at: float, size: int) -> None:
        self._by_key[key] = RememberedBatch(fingerprint, outcomes, at, size)
        self._account.resize_shared(size)

    def expired(self, now: float) -> list[str]:
        """Keys of batches older than the retention."""
        cutoff, keys = now - REQUEST_RETENTION_SECONDS, []
        for key, batch in self._by_key.items():  # oldest first: stop at the first one kept
            if batch.at >= cutoff:
                break
            keys.append(key)
        return keys

    def forget(self, keys: list[str]) -> None:
        for key in keys:
            if (batch := self._by_key.pop(key, None)) is not None:
                self._account.resize_shared(-batch.size)

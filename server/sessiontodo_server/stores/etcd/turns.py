"""A replica's own writes, taking their turn in the order etcd committed them.

The book publishes the changes a store call returns, as soon as it returns; the watch (the
follower) hands over every other change. For this replica's watchers to see changes in commit
order, a write is answered only once the watch has reached it (so everything before it was
handed over), and the watch hands over nothing after it until the write was answered (so
nothing after it comes first). Own writes reached one after the other are answered in that
order — each writer waits for the one reached before it — without the watch waiting for each:
it waits for them all only before it hands over another replica's change. Each write
carries a token (``writer.sequence``) in what it puts, so the watch knows its own writes. A write
that failed or gave up before the watch reached it leaves its changes to the watch, which hands
them over in their place; one that ends unanswered after it was reached (its caller went away)
has them handed over in its own place, once the write reached before it is over.

An operation of several Txns (removing more sessions than one Txn may hold) is reached at its
first; the book publishes all its changes when it ends. Another replica's change committed
between two of its Txns, or an own change handed over after later ones were published, can then
no longer be delivered in order: the watch resets every watcher and feed instead of skipping it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sessiontodo_server.domain.values import Change


@dataclass(eq=False)
class Turn:
    token: str
    reached: asyncio.Future[Sequence[Change]]
    """Set by the watch when it reaches the operation's first Txn (with that Txn's changes)."""
    released: asyncio.Future[None]
    """Set when the operation's changes were published (or never will be): the watch goes on."""
    published: list[Change] = field(default_factory=list)
    """What the book published for this operation."""
    previous: Turn | None = None
    """The operation the watch reached just before, if it was not over then: answered first."""

    async def answered_in_order(self, timeout: float) -> bool:
        """Wait until the watch reached this operation (at most ``timeout`` seconds: False when it did
        not) and the one reached before it is over (which takes no longer than scheduling it)."""
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(self.reached)
        except TimeoutError:
            if not self.reached.done():
                return False
        if self.previous is not None:
            await asyncio.shield(self.previous.released)
            self.previous = None
        return True


class Turns:
    def __init__(self, writer: str, hand_over: Callable[[Sequence[Change]], None]) -> None:
        self._writer = f"{writer}."
        self._hand_over = hand_over
        """Delivers changes the book will not publish (those of an operation that ended unanswered)."""
        self._sequence = 0
        self._pending: dict[str, Turn] = {}
        self._published: dict[str, int] = {}
        """Tokens of operations the book published, with their last cursor: the watch skips their
        changes until it is past that cursor."""
        self.last_published = 0
        """The highest cursor the book published for this replica's operations."""
        self._last_reached: Turn | None = None

    def begin(self) -> Turn:
        self._sequence += 1
        loop = asyncio.get_running_loop()
        turn = Turn(f"{self._writer}{self._sequence}", loop.create_future(), loop.create_future())
        self._pending[turn.token] = turn
        return turn

    def publish(self, turn: Turn, changes: Sequence[Change]) -> None:
        """``changes`` are about to be returned (so published) by ``turn``'s operation."""
        turn.published = list(changes)
        if changes:
            self.last_published = max(self.last_published, changes[-1].cursor)

    def end(self, turn: Turn) -> None:
        """The operation is over: published, failed or given up."""
        del self._pending[turn.token]
        reached = turn.reached.result() if turn.reached.done() and not turn.reached.cancelled() else ()
        if turn.published or not reached:
            if turn.published:
                self._published[turn.token] = turn.published[-1].cursor
            turn.released.set_result(None)
            return
        # Reached, but its caller went away: its changes come in its place, after the write before it.
        self._published[turn.token] = reached[-1].cursor

        def hand_over(_: object = None) -> None:
            self._hand_over(reached)
            turn.released.set_result(None)

        previous, turn.previous = turn.previous, None
        if previous is None or previous.released.done():
            hand_over()
        else:
            previous.released.add_done_callback(hand_over)

    def is_own(self, token: str) -> bool:
        return token.startswith(self._writer)

    def reach(self, token: str, changes: Sequence[Change]) -> bool:
        """The watch reached ``changes`` of this replica's operation ``token``: its writer may go on.
        False when the operation is over without having published them: the watch hands them over."""
        turn = self._pending.get(token)
        if turn is not None:
            if not turn.reached.done():
                last = self._last_reached
                turn.previous = last if last is not None and not last.released.done() else None
                turn.reached.set_result(changes)
                self._last_reached = turn
            return True
        return token in self._published

    async def settle(self, token: str, changes: Sequence[Change]) -> bool:
        """Once the operation that made ``changes`` is over: whether the book published them (else the
        watch hands them over)."""
        turn = self._pending.get(token)
        if turn is not None:
            await turn.released
        last = self._published.get(token)
        if last is None:
            return False
        if changes[-1].cursor >= last:
            del self._published[token]
        return True

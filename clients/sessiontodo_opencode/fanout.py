"""Fan-out of bus events to ``/event`` subscribers: bounded buffers and a short catch-up window.

Like upstream OpenCode, a new subscriber gets no replay of the past, with one exception that
makes GET-then-subscribe race-free: every session changed within the last ``catch_up_window``
seconds has its latest event of each kind sent first. A client that read a list and subscribed
a moment later therefore sees any change it could have missed in between; its lists are full
lists, so a repeat is harmless.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, Protocol, TypeVar


class BusEvent(Protocol):
    """What the fan-out needs of an event: which session it is about and what kind it is."""

    @property
    def session_id(self) -> str: ...

    @property
    def type(self) -> str: ...


E = TypeVar("E", bound=BusEvent)


class Subscription(Generic[E]):
    """One consumer's events, through a bounded buffer.

    When more than ``capacity`` events wait unread, the buffer collapses to the latest event
    per session and kind (every event carries a full state: a whole list, a whole Session),
    so memory stays bounded by the number of sessions, never by the change rate.
    """

    def __init__(self, follows: Callable[[E], bool], capacity: int) -> None:
        self.follows = follows
        self._capacity = capacity
        self._pending: deque[E] = deque()
        self._collapsed: OrderedDict[tuple[str, str], E] | None = None
        self._wakeup = asyncio.Event()
        self._closed = False
        self.collapse_count = 0
        """How many times this subscriber fell behind and was caught up with latest states."""

    @property
    def buffered(self) -> int:
        return len(self._pending) + len(self._collapsed or ())

    def push(self, event: E) -> None:
        if self._collapsed is None and len(self._pending) >= self._capacity:
            self._collapsed = OrderedDict(((pending.session_id, pending.type), pending) for pending in self._pending)
            self._pending.clear()
            self.collapse_count += 1
        if self._collapsed is not None:
            key = (event.session_id, event.type)
            self._collapsed.pop(key, None)
            self._collapsed[key] = event
        else:
            self._pending.append(event)
        self._wakeup.set()

    def close(self) -> None:
        self._closed = True
        self._wakeup.set()

    async def receive(self) -> E | None:
        """The next event, or None once the fan-out has closed."""
        while True:
            if self._closed:
                return None
            if self._pending:
                return self._pending.popleft()
            if self._collapsed:
                return self._collapsed.popitem(last=False)[1]
            self._collapsed = None
            self._wakeup.clear()
            await self._wakeup.wait()

    def __aiter__(self) -> Subscription[E]:
        return self

    async def __anext__(self) -> E:
        event = await self.receive()
        if event is None:
            raise StopAsyncIteration
        return event


class FanOut(Generic[E]):
    """Every subscription, and the events of the last ``catch_up_window`` seconds."""

    def __init__(
        self, *, subscriber_buffer: int, catch_up_window: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._subscriber_buffer = subscriber_buffer
        self._catch_up_window = catch_up_window
        self._clock = clock
        self._subscriptions: set[Subscription[E]] = set()
        self._recent: OrderedDict[tuple[str, str], tuple[float, E]] = OrderedDict()
        """Latest event per (session, kind), oldest first, none older than the window."""
        self._closed = False

    @property
    def subscriber_count(self) -> int:
        return len(self._subscriptions)

    @contextmanager
    def subscribe(self, follows: Callable[[E], bool]) -> Iterator[Subscription[E]]:
        """A subscription to the events ``follows`` accepts, starting with the recent ones."""
        subscription = Subscription[E](follows, self._subscriber_buffer)
        self._forget_old()
        for _, event in self._recent.values():
            if follows(event):
                subscription.push(event)
        if self._closed:
            subscription.close()
        self._subscriptions.add(subscription)
        try:
            yield subscription
        finally:
            self._subscriptions.discard(subscription)

    def publish(self, event: E) -> None:
        key = (event.session_id, event.type)
        self._recent.pop(key, None)
        self._recent[key] = (self._clock(), event)
        self._forget_old()
        for subscription in self._subscriptions:
            if subscription.follows(event):
                subscription.push(event)

    def close(self) -> None:
        """End every subscription (they receive None); later ones end at once."""
        self._closed = True
        for subscription in self._subscriptions:
            subscription.close()

    def _forget_old(self) -> None:
        horizon = self._clock() - self._catch_up_window
        while self._recent:
            published_at, _ = next(iter(self._recent.values()))
            if published_at >= horizon:
                return
            self._recent.popitem(last=False)

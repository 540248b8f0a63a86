"""Fan-out of changes to watchers, one bounded buffer per watcher.

Publishing never awaits: a change is appended to each watcher of its session (and only
its session), and to each feed whose filter it matches, and they are woken. A watcher whose
buffer is full is marked lagged and its buffer dropped; it then catches up with one reset
snapshot. So a stuck watcher costs at most its buffer, and never delays the writer or the
other watchers. Buffers are bounded in bytes too, all together (each change counted once
however many buffers share it): a watcher whose buffer would take them past their share of
the memory budget is reset the same way. Feeds' filters are held for their streams' lives and
count against the same share.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable

from sessiontodo_server.domain import tenancy
from sessiontodo_server.domain.budget import Held, change_bytes, filter_bytes
from sessiontodo_server.domain.errors import LimitExceeded, Unavailable
from sessiontodo_server.domain.values import Change, SessionFilter

IN_FLIGHT_MESSAGES = 2
"""Messages a stream counts as held by gRPC for a client that has not read them: the one being
written and the one before it (a stream's generator resumes only once gRPC took its last one)."""


class Subscription:
    """One watcher's inbox: one session's changes, or (a feed) those of every session ``only`` matches."""

    def __init__(self, session_id: str, capacity: int, buffered: Held, only: SessionFilter | None = None) -> None:
        self.session_id = session_id
        self.only = only
        self.tenant = (only.tenant or "") if only is not None else tenancy.tenant_of(session_id)
        self._capacity = capacity
        self._buffered = buffered
        self._pending: deque[Change] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._deadline = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self.in_flight: deque[int] = deque()
        """The sizes of the last ``IN_FLIGHT_MESSAGES`` messages handed to gRPC."""
        self.filter_size = filter_bytes(only) if only is not None else 0
        self.lagged = False
        self.closed: Change | Unavailable | None = None
        """Why the subscription ended: the session's removal, or the server shutting down."""

    def push(self, change: Change, fits: bool) -> int:
        """Buffer ``change`` (1), or (0) drop the buffer and mark the watcher lagged when it is full or
        the buffers' share of the memory budget would not ``fit`` it; the hub holds what was buffered."""
        if self.lagged or self.closed:
            return 0
        self._wake()
        if fits and len(self._pending) < self._capacity:
            self._pending.append(change)
            return 1
        self._release()
        self.lagged = True
        return 0

    def _release(self) -> None:
        for change in self._pending:
            self._buffered.release(change)
        self._pending.clear()

    def lag(self) -> None:
        """What was pending cannot be trusted: catch up with a reset instead."""
        if not self.closed:
            self._release()
            self.lagged = True
            self._wake()

    def close(self, reason: Change | Unavailable) -> None:
        self.closed = reason
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def _readable(self) -> bool:
        return bool(self._pending or self.lagged or self.closed)

    async def wait(self, timeout: float) -> bool:
        """Wait for something to read; False if ``timeout`` passed first and there is still nothing.

        What is readable is read when the waiter runs again, not when it was woken: a change pushed
        after the timer woke it, before it ran, must not be taken for silence (a feed's PROGRESS
        would then cover that change, and the feed drop it as seen).

        One timer per subscription, moved on lazily when it fires, rather than one timer per
        wait: at tens of thousands of messages a second, per-wait timers fill the event loop's
        heap with cancelled entries and make every message pay for them."""
        if self._readable():
            return True
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + timeout
        if self._timer is None:
            self._timer = loop.call_at(self._deadline, self._on_timer)
        self._waiter = loop.create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None
        return self._readable()

    def _on_timer(self) -> None:
        self._timer = None
        if self._waiter is None:
            return  # not waiting: the next wait arms a timer again
        loop = self._waiter.get_loop()
        if loop.time() >= self._deadline:
            self._wake()
        else:
            self._timer = loop.call_at(self._deadline, self._on_timer)

    def disarm(self) -> None:
        """Drop the timer and the buffer of a subscription that is over."""
        self._release()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def drain(self) -> list[Change]:
        """Everything pending, and clears the lagged mark (the caller resets instead)."""
        changes = list(self._pending)
        self._release()
        self.lagged = False
        return changes


class WatchHub:
    """Subscriptions by session id; a change touches only its own session's watchers."""

    def __init__(
        self,
        buffer_size: int,
        max_watchers: int,
        buffer_bytes: int = 1 << 28,
        max_watchers_per_tenant: int = 0,
        *,
        position: int = 0,
    ) -> None:
        self._buffer_size = buffer_size
        self._max_watchers = max_watchers
        self._max_per_tenant = max_watchers_per_tenant
        self._by_tenant: dict[str, int] = {}
        self._buffer_bytes = buffer_bytes
        self.buffered = Held()
        """The changes waiting in any watcher's buffer, each counted once."""
        self.in_flight = 0
        """What streams handed to gRPC that their clients may not have read (``IN_FLIGHT_MESSAGES``)."""
        self.filters = 0
        """What the open feeds' filters hold."""
        self._by_session: dict[str, set[Subscription]] = {}
        self._feeds: set[Subscription] = set()
        self._count = 0
        self._shutting_down = False
        self.position = position
        """The cursor of the last change published: every feed has been handed all changes up to it."""

    @property
    def watcher_count(self) -> int:
        """Watchers of one session and feeds: they share the watcher limit."""
        return self._count

    @property
    def feed_count(self) -> int:
        return len(self._feeds)

    def _admit(self, subscription: Subscription) -> Subscription:
        """Count a new subscription against the watcher limits: the server's and its tenant's (0: none)."""
        if self._shutting_down:
            raise _shutting_down()
        if self._count >= self._max_watchers:
            raise LimitExceeded("watchers", self._max_watchers)
        of_tenant = self._by_tenant.get(subscription.tenant, 0)
        if self._max_per_tenant and of_tenant >= self._max_per_tenant:
            raise LimitExceeded("watchers per tenant", self._max_per_tenant)
        self._count += 1
        self._by_tenant[subscription.tenant] = of_tenant + 1
        return subscription

    def _discharge(self, subscription: Subscription) -> None:
        self._count -= 1
        if left := self._by_tenant[subscription.tenant] - 1:
            self._by_tenant[subscription.tenant] = left
        else:
            del self._by_tenant[subscription.tenant]

    def subscribe(self, session_id: str) -> Subscription:
        subscription = self._admit(Subscription(session_id, self._buffer_size, self.buffered))
        self._by_session.setdefault(session_id, set()).add(subscription)
        return subscription

    @property
    def held(self) -> int:
        """Bytes held against the buffers' share: buffered changes, what gRPC holds, feeds' filters."""
        return self.buffered.bytes + self.in_flight + self.filters

    def subscribe_feed(self, only: SessionFilter) -> Subscription:
        """A feed; RESOURCE_EXHAUSTED when its filter would take the buffers past their share."""
        subscription = Subscription("", self._buffer_size, self.buffered, only)
        if self.held + subscription.filter_size > self._buffer_bytes:
            raise LimitExceeded("memory", self._buffer_bytes)
        self._admit(subscription)
        self.filters += subscription.filter_size
        self._feeds.add(subscription)
        return subscription

    def hand_over(self, subscription: Subscription, change: Change) -> Change:
        """Count ``change``, about to be sent, as held by gRPC until two later messages went out. A
        client that never reads holds what it was sent, so a stream whose first message would take
        the buffers past their share is refused (RESOURCE_EXHAUSTED) instead of started."""
        size = change_bytes(change)
        if not subscription.in_flight and self.held + size > self._buffer_bytes:
            raise LimitExceeded("memory", self._buffer_bytes)
        subscription.in_flight.append(size)
        self.in_flight += size
        if len(subscription.in_flight) > IN_FLIGHT_MESSAGES:
            self.in_flight -= subscription.in_flight.popleft()
        return change

    def unsubscribe(self, subscription: Subscription) -> None:
        subscription.disarm()
        self.in_flight -= sum(subscription.in_flight)
        subscription.in_flight.clear()
        if subscription.only is not None:
            if subscription in self._feeds:
                self._feeds.discard(subscription)
                self.filters -= subscription.filter_size
                self._discharge(subscription)
            return
        watchers = self._by_session.get(subscription.session_id)
        if watchers is None or subscription not in watchers:
            return
        watchers.discard(subscription)
        self._discharge(subscription)
        if not watchers:
            del self._by_session[subscription.session_id]

    def publish(self, change: Change) -> None:
        if watchers := self._by_session.get(change.session_id):
            self._deliver(change, watchers)
        self._publish_to_feeds(change)

    def _publish_to_feeds(self, change: Change) -> None:
        if self._feeds and (feeds := [f for f in self._feeds if f.only is not None and f.only.shows(change)]):
            self._deliver(change, feeds)
        if change.cursor > self.position:
            self.position = change.cursor

    def _deliver(self, change: Change, subscriptions: Iterable[Subscription]) -> None:
        """One budget check and one hold per change, however many buffers take it."""
        fits = self.held + self.buffered.size_if_held(change) <= self._buffer_bytes
        if taken := sum(subscription.push(change, fits) for subscription in subscriptions):
            self.buffered.hold(change, taken)

    def lag_all(self, position: int) -> None:
        """The store cannot tell what changed before ``position``, where it goes on from (lower after
        its feed was re-created): every watcher and feed resets."""
        for subscription in [*self._feeds, *(s for watchers in self._by_session.values() for s in watchers)]:
            subscription.lag()
        self.position = position

    def end_session(self, removal: Change) -> None:
        """Give every watcher of a removed session its final message, and forget them: a session
        re-created under the same id must never reach its previous incarnation's watchers."""
        watchers = self._by_session.pop(removal.session_id, ())
        for subscription in watchers:
            self._discharge(subscription)
            subscription.close(removal)
        self._publish_to_feeds(removal)

    def shut_down(self) -> None:
        """End every watch and feed with UNAVAILABLE and refuse new ones."""
        self._shutting_down = True
        for subscription in [*self._feeds, *(s for watchers in self._by_session.values() for s in watchers)]:
            subscription.close(_shutting_down())


def _shutting_down() -> Unavailable:
    """A fresh error per watch: one shared instance would grow its traceback at every raise."""
    return Unavailable("the server is shutting down; reconnect and resume")

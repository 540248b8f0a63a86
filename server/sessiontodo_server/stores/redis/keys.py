"""Where a Redis store lives: its URL and its key layout.

Every key of one store shares the hash tag ``{st}``, so it lives in one Redis Cluster slot: the
server-wide feed is one ordered log, and every write updates a session and appends to that log
in one atomic script. (Scaling out is by replicas; one Redis shard serves them all.)

- ``P{st}:counters`` (hash): ``cursor`` (the last feed cursor), ``epoch`` (names this feed's
  numbering), ``floor`` (the revision new sessions start from);
- ``P{st}:sessions`` (sorted set, by id), ``:children`` ("parent child" pairs), ``:deadlines``
  (idle-TTL deadlines), ``:marks`` (the revision a removed id starts from when re-created);
- ``P{st}:tenant:T`` (sorted set, by id): tenant T's session ids (``T`` empty for the default
  tenant), its global list left out: what its listings, feed snapshots and session quota read;
- ``P{st}:feed`` (stream): the last ``feed_history`` changes, entry id ``<cursor>-0``;
- per session ID: ``P{st}:s:ID`` (hash: revision, parent, labels, times, idle TTL, list bytes),
  ``:t:ID`` (list: the encoded todos in order), ``:i:ID`` (hash: todo id -> encoded todo),
  ``:h:ID`` (list: the last ``history_limit`` changes), ``:q:ID``/``:qr:ID``/``:qt:ID`` (AddTodo
  request ids: their results, revisions and times);
- per batch request id R (its tenant, a newline, the id): ``P{st}:b:R`` (string: the batch's
  fingerprint and outcomes, expiring after an hour).

``P`` is the prefix (``sessiontodo:`` unless the URL says ``?prefix=``).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

DEFAULT_PREFIX = "sessiontodo:"


@dataclass(frozen=True, slots=True)
class RedisLocation:
    """Where the store lives: a redis-py URL and the prefix of every key."""

    url: str
    prefix: str
    timeout: float = 5.0
    """Seconds a call to Redis may take before it fails as UNAVAILABLE (``socket_timeout``)."""

    @property
    def base(self) -> str:
        """What every key starts with, hash tag included."""
        return f"{self.prefix}{{st}}:"

    def key(self, name: str) -> str:
        return f"{self.base}{name}"


def parse_redis_url(url: str) -> RedisLocation:
    """``redis[s]://[user:password@]host:port/db[?prefix=name:&socket_timeout=...]``."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise ValueError("the redis store URL needs a host: redis://[[user]:password@]host:port/db")
    query = parse_qsl(parts.query)
    ours = dict(query)
    prefix = ours.get("prefix", DEFAULT_PREFIX)
    if "{" in prefix or "}" in prefix:
        raise ValueError(f"redis key prefix must not contain braces (they pick cluster slots): {prefix!r}")
    if not prefix.isprintable():
        raise ValueError(f"redis key prefix must be printable: {prefix!r}")
    timeout = float(ours.get("socket_timeout", 5.0))
    rest = urlencode([(key, value) for key, value in query if key not in ("prefix", "socket_timeout")])
    return RedisLocation(urlunsplit(parts._replace(query=rest)), prefix, timeout)

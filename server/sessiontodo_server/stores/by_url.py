"""The store a URL names: the one place a new store is added.

``memory://`` and ``sqlite:///`` are always there; Redis and etcd are imported only when named
(redis-py comes with the ``redis`` extra).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from sessiontodo_common.addresses import redact_url
from sessiontodo_server.domain.budget import DEFAULT_MEMORY_BUDGET, MemoryBudget
from sessiontodo_server.domain.store import TodoStore
from sessiontodo_server.stores.memory import MemoryStore
from sessiontodo_server.stores.sqlite import Durability, open_sqlite_store


def open_store(
    url: str,
    history_limit: int,
    *,
    feed_history: int = 4096,
    budget: MemoryBudget = DEFAULT_MEMORY_BUDGET,
    durability: Durability = "process",
    redis_wait_replicas: int = 0,
) -> TodoStore:
    """A store for a URL: ``memory://``, ``sqlite:///relative.db``, ``sqlite:////absolute.db``,
    ``redis[s]://[:password@]host:port/db[?prefix=name:]`` for several replicas sharing one Redis, or
    ``etcd[s]://host:2379,host:2379,host:2379/prefix`` for several replicas on an etcd cluster.
    ``durability`` is the sqlite store's (see ``stores/sqlite.py``), ``redis_wait_replicas`` the Redis store's."""
    scheme = urlsplit(url).scheme
    if durability != "process" and scheme != "sqlite":
        raise ValueError(f"--durability {durability} applies to the sqlite store, not {scheme}://")
    if redis_wait_replicas and scheme not in ("redis", "rediss"):
        raise ValueError(f"--redis-wait-replicas applies to the Redis store, not {scheme}://")
    if scheme == "memory":
        return MemoryStore(history_limit, feed_history=feed_history, budget=budget)
    if scheme == "sqlite":
        path = url.removeprefix("sqlite:///")
        if not path or path == url:
            raise ValueError(
                f"sqlite store URL needs a path: sqlite:///relative.db or sqlite:////absolute.db, not {url!r}"
            )
        return open_sqlite_store(Path(path), history_limit, feed_history, budget, durability)
    if scheme in ("redis", "rediss"):
        from sessiontodo_server.stores.redis import RedisStore  # redis-py comes with the `redis` extra

        return RedisStore(url, history_limit, feed_history, redis_wait_replicas)
    if scheme in ("etcd", "etcds"):
        from sessiontodo_server.stores.etcd import EtcdStore

        return EtcdStore(url, history_limit, feed_history, budget)
    raise ValueError(
        f"unsupported store URL {redact_url(url)!r}: use memory://, sqlite:///path.db, redis://host:port/db"
        " or etcd://host:2379,…/prefix"
    )

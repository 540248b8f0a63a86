"""The Redis store, split by concern: ``store`` (the TodoStore), ``lua/`` (one script per
operation), ``keys`` (URL and key layout), ``entries`` (decoding replies), ``follower`` (reading
the shared feed)."""

from sessiontodo_server.stores.redis.keys import parse_redis_url
from sessiontodo_server.stores.redis.store import RedisStore

__all__ = ["RedisStore", "parse_redis_url"]

"""Redis store URLs: the key prefix and redis-py's options, refused prefixes, passwords kept out of logs
and errors (no Redis server needed)."""

from __future__ import annotations

import logging

import pytest

from sessiontodo_common.addresses import redact_url
from sessiontodo_server.stores.by_url import open_store
from sessiontodo_server.stores.redis import RedisStore, parse_redis_url


def test_a_redis_url_carries_the_key_prefix_and_redis_py_options() -> None:
    location = parse_redis_url("rediss://:secret@cache:6380/2?prefix=team-a:&socket_timeout=1&health_check_interval=3")
    assert (location.prefix, location.timeout) == ("team-a:", 1.0)
    assert location.url == "rediss://:secret@cache:6380/2?health_check_interval=3"
    assert parse_redis_url("redis://cache:6379/0").prefix == "sessiontodo:"


def test_a_prefix_with_braces_is_refused_because_braces_choose_cluster_slots() -> None:
    with pytest.raises(ValueError, match="braces"):
        parse_redis_url("redis://cache:6379/0?prefix={team}:")


@pytest.mark.parametrize(
    "url",
    [
        "redis://:hunter2@cache:6379/0",
        "redis://user:hunter2@cache:6379/0",
        "rediss://cache:6379/0?password=hunter2&socket_timeout=1",
        "redis://cache:6379/0?sentinel_password=hunter2",
    ],
)
def test_a_store_url_is_logged_without_its_password_in_any_form(url: str, caplog: pytest.LogCaptureFixture) -> None:
    assert "hunter2" not in redact_url(url)
    assert "cache:6379" in redact_url(url)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ValueError, match="unsupported store URL") as refused:
        open_store(url.replace("redis", "resid", 1), 8)
    assert "hunter2" not in str(refused.value)


def test_the_server_opens_a_redis_store_for_redis_and_rediss_urls() -> None:
    assert isinstance(open_store("redis://127.0.0.1:1/0", 8), RedisStore)
    assert isinstance(open_store("rediss://127.0.0.1:1/0", 8), RedisStore)

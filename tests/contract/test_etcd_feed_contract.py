"""The WatchChanges contract of ``tests/contract/test_feed_contract.py``, message by message, on the etcd store.

Not repeated here: the lagging-feed check (it needs writes that never yield to the feed, which
only the in-process stores make; the hub's lag handling is the same for every store) and the
checks that start servers of their own."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sessiontodo_server.app import RunningServer
from tests.contract.test_feed_contract import (  # the same checks, collected here again with this module's server
    stub,
    test_a_cursor_that_cannot_be_bridged_gets_a_reset_and_a_fresh_snapshot,
    test_a_malformed_cursor_is_invalid,
    test_a_quiet_feed_sends_progress_with_a_resumable_cursor,
    test_filters_select_sessions_by_id_parent_and_labels,
    test_resuming_after_any_cursor_gives_exactly_the_later_messages,
    test_sessions_created_and_written_by_others_appear_with_every_change_in_order,
    test_shutdown_ends_the_feed_with_unavailable,
    test_the_snapshot_holds_every_session_and_ends_with_a_bookmark,
)
from tests.support.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.peer, pytest.mark.process]

__all__ = [
    "stub",
    "test_a_cursor_that_cannot_be_bridged_gets_a_reset_and_a_fresh_snapshot",
    "test_a_malformed_cursor_is_invalid",
    "test_a_quiet_feed_sends_progress_with_a_resumable_cursor",
    "test_filters_select_sessions_by_id_parent_and_labels",
    "test_resuming_after_any_cursor_gives_exactly_the_later_messages",
    "test_sessions_created_and_written_by_others_appear_with_every_change_in_order",
    "test_shutdown_ends_the_feed_with_unavailable",
    "test_the_snapshot_holds_every_session_and_ends_with_a_bookmark",
]


@pytest.fixture
async def server(start: Callable[..., Any], etcd: EtcdCluster) -> RunningServer:
    running: RunningServer = await start(store=etcd.url(), progress_interval=0.5, watch_buffer=8, feed_history=64)
    return running

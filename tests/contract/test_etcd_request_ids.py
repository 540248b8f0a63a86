"""The request id checks of ``tests/contract/test_request_ids.py`` through a server on the etcd store
(retention across 10,000 writes is in ``tests/contract/test_store_contract.py``, on every store)."""

from __future__ import annotations

import pytest

from tests.contract.test_request_ids import (  # the same checks, collected here again with this module's store
    test_a_retry_returns_the_first_result_and_adds_nothing,
    test_a_reused_request_id_asking_for_something_else_is_failed_precondition,
    test_request_ids_are_per_session,
)
from tests.support.etcd_cluster import EtcdCluster

pytestmark = [pytest.mark.etcd, pytest.mark.peer, pytest.mark.process]

__all__ = [
    "test_a_retry_returns_the_first_result_and_adds_nothing",
    "test_a_reused_request_id_asking_for_something_else_is_failed_precondition",
    "test_request_ids_are_per_session",
]


@pytest.fixture
def store_url(etcd: EtcdCluster) -> str:
    return etcd.url()

"""The lists' share of the memory budget: every list's bytes and its remembered requests', in all
and per tenant, so a write that would pass either limit is refused before it is accepted."""

from __future__ import annotations

from collections import OrderedDict

from sessiontodo_server.domain.budget import MemoryBudget, list_bytes
from sessiontodo_server.domain.errors import LimitExceeded
from sessiontodo_server.domain.store import REQUEST_RETENTION_SECONDS, REQUEST_RETENTION_WRITES, AddResult
from sessiontodo_server.stores.session_record import SessionRecord

REQUEST_BYTES = 160
"""What remembering one request costs beyond its todo's text, for the memory budget."""


class ListsAccount:
    def __init__(self, budget: MemoryBudget) -> None:
        self._budget = budget
        self.bytes = 0
        self._per_tenant: dict[str, int] = {}
        """Each tenant's share (kept only with ``budget.per_tenant``)."""

    def check_growth(self, record: SessionRecord, size: int) -> None:
        """Refuse a list growing to ``size`` bytes past the lists' share or its tenant's share."""
        if size <= record.size:
            return
        if self.bytes - record.size + size > self._budget.lists:
            raise LimitExceeded("memory", self._budget.total)
        share = self._budget.per_tenant
        if share and self._per_tenant.get(record.tenant, 0) - record.size + size > share:
            raise LimitExceeded("memory per tenant", share)

    def check_batch_growth(self, tenant: str, growth: int, tenant_growth: int) -> None:
        """Refuse a batch whose lists would grow by ``growth`` bytes in all (``tenant_growth`` for
        ``tenant``) past the lists' share or the tenant's share."""
        if self.bytes + growth > self._budget.lists:
            raise LimitExceeded("memory", self._budget.total)
        share = self._budget.per_tenant
        if share and self._per_tenant.get(tenant, 0) + tenant_growth > share:
            raise LimitExceeded("memory per tenant", share)

    def check_shared_growth(self, size: int) -> None:
        if self.bytes + size > self._budget.lists:
            raise LimitExceeded("memory", self._budget.total)

    def resize_shared(self, delta: int) -> None:
        """What no one tenant holds (remembered batches) counts toward the lists' share too."""
        self.bytes += delta

    def resize_list(self, record: SessionRecord, delta: int) -> None:
        """A list grew or shrank by ``delta`` bytes."""
        record.size += delta
        self._add(record, delta)

    def resize_requests(self, record: SessionRecord, delta: int) -> None:
        """Remembered requests count toward the lists' share too."""
        record.requests_size += delta
        self._add(record, delta)

    def release(self, record: SessionRecord) -> None:
        """A removed session gives back all it held."""
        self.resize_list(record, -record.size)
        self.resize_requests(record, -record.requests_size)

    def _add(self, record: SessionRecord, delta: int) -> None:
        self.bytes += delta
        if self._budget.per_tenant:
            self._per_tenant[record.tenant] = self._per_tenant.get(record.tenant, 0) + delta


class RequestMemory:
    """AddTodo results remembered per session by request id, so a retry gets the first answer;
    kept for ``REQUEST_RETENTION_WRITES`` writes or ``REQUEST_RETENTION_SECONDS``, whichever is longer."""

    def __init__(self, account: ListsAccount) -> None:
        self._account = account

    def remember(self, record: SessionRecord, request_id: str, result: AddResult, now: float) -> None:
        if record.requests is None:
            record.requests = OrderedDict()
        if (previous := record.requests.pop(request_id, None)) is not None:
            self._account.resize_requests(record, -_request_bytes(previous[0]))
        record.requests[request_id] = (result, now)
        self._account.resize_requests(record, _request_bytes(result))

    def forget(self, record: SessionRecord, request_id: str) -> None:
        if record.requests is not None and (remembered := record.requests.pop(request_id, None)) is not None:
            self._account.resize_requests(record, -_request_bytes(remembered[0]))

    def forget_expired(self, record: SessionRecord, now: float) -> None:
        floor = self.floor(record, record.revision, now)
        while record.requests and next(iter(record.requests.values()))[0].revision < floor:
            self._account.resize_requests(record, -_request_bytes(record.requests.popitem(last=False)[1][0]))

    @staticmethod
    def floor(record: SessionRecord, revision: int, now: float) -> int:
        """The oldest revision whose request must still be remembered when the session is at ``revision``."""
        for result, at in (record.requests or {}).values():
            if result.revision >= revision - REQUEST_RETENTION_WRITES or at >= now - REQUEST_RETENTION_SECONDS:
                return result.revision
        return revision

    @staticmethod
    def find(record: SessionRecord, request_id: str) -> AddResult | None:
        remembered = None if record.requests is None else record.requests.get(request_id)
        return None if remembered is None else remembered[0]


def _request_bytes(result: AddResult) -> int:
    return REQUEST_BYTES + list_bytes((result.todo,))

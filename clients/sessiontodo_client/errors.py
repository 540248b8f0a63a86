"""The typed errors of a failed call: one class per gRPC status code, each carrying every google.rpc detail.

As python-api-core's ``exceptions``: ``service_error`` turns a failed call into the class of its
status code (``NotFound``, ``Aborted``, …), with the ``google.rpc`` details of its
``grpc-status-details-bin`` trailer unpacked: all of them in ``details``, and the ones this
service sends also as plain values (ErrorInfo's ``reason`` and ``metadata``, BadRequest's
``violations``, QuotaFailure's ``quota_violations``, RetryInfo's ``retry_delay``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status


class ServiceError(Exception):
    """A call failed: ``code`` is the gRPC status, ``message`` its text; ``details`` holds every
    google.rpc detail message, and the common ones are unpacked into ``reason`` and ``metadata``
    (ErrorInfo: e.g. ``sessionId``, ``actualRevision``), ``violations`` (BadRequest
    ``(field, description)``), ``quota_violations`` (QuotaFailure ``(subject, description)``) and
    ``retry_delay`` (RetryInfo, seconds)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        message: str,
        *,
        violations: Sequence[tuple[str, str]] = (),
        reason: str = "",
        metadata: Mapping[str, str] | None = None,
        quota_violations: Sequence[tuple[str, str]] = (),
        retry_delay: float | None = None,
        details: Sequence[Message] = (),
    ):
        self.code = code
        self.message = message
        self.violations = list(violations)
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.quota_violations = list(quota_violations)
        self.retry_delay = retry_delay
        self.details = list(details)
        super().__init__(f"{code.name}: {message}")

    @property
    def write_index(self) -> int | None:
        """The write of a ``batch_write`` that failed the batch (ErrorInfo's ``writeIndex``); None when the
        error is not one write's (the whole batch was refused, or the call was not a batch)."""
        index = self.metadata.get("writeIndex", "")
        return int(index) if index.isdecimal() else None


class Cancelled(ServiceError):
    """The call was cancelled, usually by the caller."""


class Unknown(ServiceError):
    """The server failed in a way it did not classify; never retried (a write may have been applied)."""


class InvalidArgument(ServiceError):
    """The request is malformed: ``violations`` names each field and what is wrong with it."""


class DeadlineExceeded(ServiceError):
    """The call's deadline passed; a write may still have been applied."""


class NotFound(ServiceError):
    """The session or todo does not exist (``reason`` says which)."""


class AlreadyExists(ServiceError):
    """What the call would create exists already."""


class PermissionDenied(ServiceError):
    """The token's role may not make this call."""


class ResourceExhausted(ServiceError):
    """A limit was reached: ``quota_violations`` says which."""


class FailedPrecondition(ServiceError):
    """The system is not in a state for this call; retrying will not help until it is."""


class ClaimRefused(FailedPrecondition):
    """A claim, renewal or release that the todo's state refuses; ``reason`` says why: ``TODO_TAKEN``
    (``owner`` has it), ``TODO_BLOCKED`` (``blocked_by``: its unfinished blockers), ``TODO_NOT_PENDING``
    (it is ``status``), or ``CLAIM_NOT_HELD`` (a renewal or release by someone who does not hold it:
    ``owner`` does, it is ``status``; a lapsed lease ends this way)."""

    @property
    def owner(self) -> str:
        return self.metadata.get("owner", "")

    @property
    def blocked_by(self) -> list[str]:
        return [todo_id for todo_id in self.metadata.get("blockedBy", "").split(",") if todo_id]

    @property
    def status(self) -> str:
        return self.metadata.get("status", "")


CLAIM_REFUSALS = frozenset({"TODO_TAKEN", "TODO_BLOCKED", "TODO_NOT_PENDING", "CLAIM_NOT_HELD"})
"""The ErrorInfo reasons of FAILED_PRECONDITION that ``ClaimRefused`` stands for."""


class Aborted(ServiceError):
    """The expected revision did not match: re-read, then retry the read-modify-write."""


class OutOfRange(ServiceError):
    """A position or value past the valid range."""


class Unimplemented(ServiceError):
    """The server does not offer this call (an older server)."""


class Internal(ServiceError):
    """An invariant of the server broke."""


class Unavailable(ServiceError):
    """The service could not be reached, or is shutting down: repeating the same call later can succeed."""


class DataLoss(ServiceError):
    """Unrecoverable loss or corruption of data."""


class Unauthenticated(ServiceError):
    """No bearer token, or one the server does not know."""


ERROR_CLASSES: Mapping[grpc.StatusCode, type[ServiceError]] = {
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.UNKNOWN: Unknown,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.ABORTED: Aborted,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRange,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
    grpc.StatusCode.INTERNAL: Internal,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DATA_LOSS: DataLoss,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
}
"""The class of each status code but OK (an error whose code is missing here is a plain ``ServiceError``)."""

_DETAIL_TYPES: tuple[type[Message], ...] = (
    error_details_pb2.ErrorInfo,
    error_details_pb2.BadRequest,
    error_details_pb2.QuotaFailure,
    error_details_pb2.RetryInfo,
    error_details_pb2.PreconditionFailure,
    error_details_pb2.ResourceInfo,
    error_details_pb2.RequestInfo,
    error_details_pb2.Help,
    error_details_pb2.LocalizedMessage,
    error_details_pb2.DebugInfo,
)
"""Every detail message of ``google/rpc/error_details.proto``."""


def _unpack_details(error: grpc.RpcError) -> list[Message]:
    """The google.rpc detail messages of a failed call, in the order sent; unknown ones are skipped."""
    status = rpc_status.from_call(error)
    unpacked: list[Message] = []
    for packed in status.details if status else ():
        for kind in _DETAIL_TYPES:
            if packed.Is(kind.DESCRIPTOR):
                detail = kind()
                packed.Unpack(detail)
                unpacked.append(detail)
    return unpacked


def _first(details: Sequence[Message], kind: type[Any]) -> Any:
    return next((detail for detail in details if isinstance(detail, kind)), None)


def service_error(error: grpc.RpcError) -> ServiceError:
    """The typed error of a failed call (a ``grpc.aio.AioRpcError``, or a synchronous call's
    ``grpc.RpcError``), with its google.rpc details unpacked."""
    code: grpc.StatusCode = error.code()
    details = _unpack_details(error)
    info = _first(details, error_details_pb2.ErrorInfo)
    bad_request = _first(details, error_details_pb2.BadRequest)
    quota = _first(details, error_details_pb2.QuotaFailure)
    retry = _first(details, error_details_pb2.RetryInfo)
    kind = ERROR_CLASSES.get(code, ServiceError)
    if kind is FailedPrecondition and info is not None and info.reason in CLAIM_REFUSALS:
        kind = ClaimRefused
    return kind(
        code,
        error.details() or "",
        violations=[(v.field, v.description) for v in bad_request.field_violations] if bad_request else (),
        reason=info.reason if info else "",
        metadata=dict(info.metadata) if info else None,
        quota_violations=[(v.subject, v.description) for v in quota.violations] if quota else (),
        retry_delay=retry.retry_delay.ToTimedelta().total_seconds() if retry else None,
        details=details,
    )

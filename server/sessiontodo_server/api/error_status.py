"""The one table from domain errors to gRPC statuses, with google.rpc details (BadRequest field
violations, QuotaFailure, RetryInfo, ErrorInfo) that grpcurl and every gRPC client can read."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn, TypeVar

import grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from sessiontodo_server.api.status_trailers import fit_status
from sessiontodo_server.domain import errors, tenancy

ERROR_DOMAIN = "sessiontodo.v1"

# The one table from domain errors to gRPC codes, with the ErrorInfo reason sent along.
_ERROR_TABLE: dict[type[errors.TodoError], tuple[int, str]] = {
    errors.InvalidArgument: (code_pb2.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
    errors.SessionNotFound: (code_pb2.NOT_FOUND, "SESSION_NOT_FOUND"),
    errors.TodoNotFound: (code_pb2.NOT_FOUND, "TODO_NOT_FOUND"),
    errors.RevisionMismatch: (code_pb2.ABORTED, "REVISION_MISMATCH"),
    errors.ParentMismatch: (code_pb2.FAILED_PRECONDITION, "PARENT_MISMATCH"),
    errors.LimitExceeded: (code_pb2.RESOURCE_EXHAUSTED, "LIMIT_EXCEEDED"),
    errors.RequestIdReused: (code_pb2.FAILED_PRECONDITION, "REQUEST_ID_REUSED"),
    errors.BatchRequestIdReused: (code_pb2.FAILED_PRECONDITION, "REQUEST_ID_REUSED"),
    errors.Unavailable: (code_pb2.UNAVAILABLE, "UNAVAILABLE"),
    errors.TodoTaken: (code_pb2.FAILED_PRECONDITION, "TODO_TAKEN"),
    errors.TodoBlocked: (code_pb2.FAILED_PRECONDITION, "TODO_BLOCKED"),
    errors.TodoNotPending: (code_pb2.FAILED_PRECONDITION, "TODO_NOT_PENDING"),
    errors.ClaimNotHeld: (code_pb2.FAILED_PRECONDITION, "CLAIM_NOT_HELD"),
}

# Error attributes as AIP-193 ErrorInfo metadata keys (lowerCamel).
_ERROR_METADATA = {
    "session_id": "sessionId",
    "todo_id": "todoId",
    "request_id": "requestId",
    "expected": "expectedRevision",
    "actual": "actualRevision",
    "parent_id": "parentId",
    "limit": "limit",
    "value": "value",
    "write_index": "writeIndex",
    "owner": "owner",
    "blocked_by": "blockedBy",
    "status": "status",
}


def to_status(error: errors.TodoError) -> status_pb2.Status:
    """The google.rpc.Status for a domain error, with its AIP-193 details."""
    code, reason = _ERROR_TABLE[type(error)]
    message = str(error)
    for attribute in ("session_id", "parent_id"):  # ids in the caller's own terms
        if (qualified := getattr(error, attribute, None)) and qualified != tenancy.local(qualified):
            message = message.replace(repr(qualified), repr(tenancy.local(qualified)))
    status = status_pb2.Status(code=code, message=message)
    if isinstance(error, errors.InvalidArgument):
        violations = [
            error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
            for field, description in error.violations
        ]
        status.details.add().Pack(error_details_pb2.BadRequest(field_violations=violations))
    elif isinstance(error, errors.LimitExceeded):
        violation = error_details_pb2.QuotaFailure.Violation(subject=error.limit, description=str(error))
        status.details.add().Pack(error_details_pb2.QuotaFailure(violations=[violation]))
    elif isinstance(error, errors.Unavailable):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(int(error.retry_after * 1000))
        status.details.add().Pack(retry)
    metadata = {
        key: tenancy.local(value) if attribute in ("session_id", "parent_id") else str(value)
        for attribute, key in _ERROR_METADATA.items()
        if (value := getattr(error, attribute, None)) is not None
    }
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason=reason, domain=ERROR_DOMAIN, metadata=metadata))
    return status


Handler = TypeVar("Handler", bound=Callable[..., Awaitable[Any]])


async def abort(context: grpc.aio.ServicerContext, error: errors.TodoError) -> NoReturn:
    """End the call with the error's status, trimmed to fit the client's metadata limit."""
    await context.abort_with_status(rpc_status.to_status(fit_status(to_status(error))))
    raise AssertionError("abort_with_status returned")  # it always raises


def translating_errors(handler: Handler) -> Handler:
    @functools.wraps(handler)
    async def wrapper(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await handler(self, request, context)
        except errors.TodoError as error:
            await abort(context, error)

    return wrapper  # type: ignore[return-value]

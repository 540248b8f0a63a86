"""An error's status fits gRPC's trailer budget, however much it has to say, and keeps its code (no gRPC server)."""

from __future__ import annotations

import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2

from sessiontodo_server.api.status_trailers import TRAILER_BUDGET, fit_status, trailer_size


def test_a_small_status_is_left_as_it_is() -> None:
    status = status_pb2.Status(code=code_pb2.NOT_FOUND, message="session not found: 'a'")
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="SESSION_NOT_FOUND", metadata={"sessionId": "a"}))
    assert fit_status(status) == status


@pytest.mark.parametrize("count", [1, 50, 81, 500, 10_000])
@pytest.mark.parametrize("text", ["x", "é" * 300, "%" * 5000])
def test_every_status_fits_the_budget_and_keeps_its_code(count: int, text: str) -> None:
    bad_request = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=f"f{n}{text}", description=text) for n in range(count)
        ]
    )
    status = status_pb2.Status(code=code_pb2.INVALID_ARGUMENT, message=text * count)
    status.details.add().Pack(bad_request)
    status.details.add().Pack(error_details_pb2.ErrorInfo(reason="INVALID_ARGUMENT", metadata={"value": text * 100}))
    fitted = fit_status(status)
    assert fitted.code == code_pb2.INVALID_ARGUMENT
    assert trailer_size(fitted) <= TRAILER_BUDGET
    assert len(fitted.details) == 2

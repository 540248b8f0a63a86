"""Make every error status fit in the trailers a client accepts.

gRPC clients refuse trailers over 8 KiB by default (``grpc.max_metadata_size``), and a
refused trailer turns the real error into ``RESOURCE_EXHAUSTED: received metadata size
exceeds hard limit``. The message travels twice (``grpc-message``, percent-encoded, and
inside ``grpc-status-details-bin``, base64), so ``fit_status`` bounds both: echoed values
are cut short, a long violation list keeps its first entries plus "and N more", and the
status code is never touched.
"""

from __future__ import annotations

import math

from google.protobuf import any_pb2, message
from google.rpc import error_details_pb2, status_pb2

TRAILER_BUDGET = 6 * 1024
"""Bytes for grpc-status, grpc-message and grpc-status-details-bin together: 2 KiB under the
client's default 8 KiB, leaving room for other trailers (tracing, load reports)."""

MAX_VALUE_CHARS = 200
"""An echoed value (a todo id, a field name, a description) longer than this is cut short."""

MAX_MESSAGE_BYTES = 1024
"""The message's share of the budget, percent-encoded as it travels in grpc-message."""

_HPACK_ENTRY_OVERHEAD = 32  # RFC 7541 §4.1: each header field counts its name, value and 32 bytes


def fit_status(status: status_pb2.Status, budget: int = TRAILER_BUDGET) -> status_pb2.Status:
    """A copy of ``status`` whose trailers fit in ``budget`` bytes, with the same code."""
    fitted = status_pb2.Status(code=status.code, message=_shorten_message(status.message))
    bad_request: error_details_pb2.BadRequest | None = None
    for detail in status.details:
        unpacked = _unpack_shortened(detail)
        if isinstance(unpacked, error_details_pb2.BadRequest):
            bad_request = unpacked
            original = error_details_pb2.BadRequest()
            detail.Unpack(original)
            if status.message == _joined(list(original.field_violations)):  # rebuilt from the kept ones
                fitted.message = _joined(list(unpacked.field_violations), MAX_MESSAGE_BYTES)
        if unpacked is not None:
            fitted.details.add().Pack(unpacked)
        else:
            fitted.details.append(detail)  # unknown detail type: kept whole while it fits
    if bad_request is not None:
        fitted = _trim_violations(fitted, bad_request, budget)
    while fitted.details and trailer_size(fitted) > budget:
        del fitted.details[-1]  # the last resort: code and message always get through
    return fitted


def trailer_size(status: status_pb2.Status) -> int:
    """What the status adds to the trailers, counted the way a client's metadata limit counts."""
    details = math.ceil(status.ByteSize() / 3) * 4
    return (
        len("grpc-status") + len(str(status.code)) + _HPACK_ENTRY_OVERHEAD
        + len("grpc-message") + _percent_encoded_length(status.message) + _HPACK_ENTRY_OVERHEAD
        + (len("grpc-status-details-bin") + details + _HPACK_ENTRY_OVERHEAD if status.details else 0)
    )  # fmt: skip


def _percent_encoded_length(text: str) -> int:
    """grpc-message percent-encodes every byte outside printable ASCII, and '%' itself."""
    return sum(1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3 for byte in text.encode())


def _shorten(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[: limit - 30]}… ({len(text)} characters)"


def _shorten_message(text: str) -> str:
    if _percent_encoded_length(text) <= MAX_MESSAGE_BYTES:
        return text
    suffix = f"… ({len(text)} characters)"
    room = MAX_MESSAGE_BYTES - _percent_encoded_length(suffix)
    kept = 0
    for character in text:
        room -= _percent_encoded_length(character)
        if room < 0:
            break
        kept += 1
    return text[:kept] + suffix


def _unpack_shortened(detail: any_pb2.Any) -> message.Message | None:
    """The detail with every echoed string cut short, or None for a type not known here."""
    for kind in (error_details_pb2.BadRequest, error_details_pb2.ErrorInfo, error_details_pb2.QuotaFailure):
        if detail.Is(kind.DESCRIPTOR):
            unpacked: message.Message = kind()
            detail.Unpack(unpacked)
            _shorten_strings(unpacked)
            return unpacked
    return None


def _shorten_strings(value: message.Message) -> None:
    for field, content in value.ListFields():
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key in list(content):
                if isinstance(content[key], str):
                    content[key] = _shorten(content[key], MAX_VALUE_CHARS)
        elif field.message_type is not None:
            for item in content if field.is_repeated else [content]:
                _shorten_strings(item)
        elif isinstance(content, str):
            setattr(value, field.name, _shorten(content, MAX_VALUE_CHARS))


def _trim_violations(
    status: status_pb2.Status, bad_request: error_details_pb2.BadRequest, budget: int
) -> status_pb2.Status:
    """Keep the longest prefix of the violations that fits, then say how many were left out."""
    violations = list(bad_request.field_violations)

    def attempt(kept: int) -> status_pb2.Status:
        trimmed = error_details_pb2.BadRequest(field_violations=violations[:kept])
        if kept < len(violations):
            trimmed.field_violations.add(description=f"and {len(violations) - kept} more")
        candidate = status_pb2.Status(code=status.code, message=status.message)
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                candidate.details.add().Pack(trimmed)
            else:
                candidate.details.append(detail)
        return candidate

    if trailer_size(whole := attempt(len(violations))) <= budget:
        return whole
    low, high = 0, len(violations)  # the most violations that fit: binary search on the prefix
    while low < high:
        middle = (low + high + 1) // 2
        if trailer_size(attempt(middle)) <= budget:
            low = middle
        else:
            high = middle - 1
    return attempt(low)


def _joined(violations: list[error_details_pb2.BadRequest.FieldViolation], limit: int | None = None) -> str:
    """``field: why; field: why``, or as many as fit in ``limit`` encoded bytes and "and N more"."""
    parts = [f"{v.field}: {v.description}" for v in violations]
    text = "; ".join(parts)
    if limit is None or _percent_encoded_length(text) <= limit:
        return text
    kept, room = 0, limit - 30
    while kept < len(parts) and (room := room - _percent_encoded_length(parts[kept]) - 2) >= 0:
        kept += 1
    return "; ".join([*parts[:kept], f"and {len(parts) - kept} more"])

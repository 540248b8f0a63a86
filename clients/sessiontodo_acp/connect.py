"""A sessiontodo client for long-lived gateways: after an outage it reconnects within seconds."""

from __future__ import annotations

import grpc

from sessiontodo_acp._session_jobs import DEFAULT_BACKOFF, Backoff
from sessiontodo_client import TodoClient


def connect(address: str, backoff: Backoff = DEFAULT_BACKOFF) -> TodoClient:
    """A ``TodoClient`` for ``host:port`` whose channel retries connecting every ``backoff.maximum`` seconds at most.

    gRPC's default reconnect backoff grows to 120 s, so a gateway that outlived a sessiontodo
    restart could otherwise wait minutes before its queued writes get through.
    """
    initial_ms = int(backoff.initial * 1000)
    channel = grpc.aio.insecure_channel(
        address,
        options=[
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.initial_reconnect_backoff_ms", initial_ms),
            ("grpc.min_reconnect_backoff_ms", initial_ms),
            ("grpc.max_reconnect_backoff_ms", int(backoff.maximum * 1000)),
        ],
    )
    return TodoClient(channel)
